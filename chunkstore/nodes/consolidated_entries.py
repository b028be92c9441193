"""The entries of a consolidated copy: the in-memory snapshot Groups share
(:class:`Consolidated`), reading a stored copy (:func:`read_consolidated`), and writing
entries back from the nodes' own documents (:func:`restore_entries`), which both a
consolidated open (for nodes with a pending mark) and ``nodes.consolidated`` use."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chunkstore.metadata import consolidated as cons
from chunkstore.metadata.consolidated import V2_KEY
from chunkstore.metadata.json_io import load_json
from chunkstore.metadata.nodes import (
    GroupMetadata,
    GroupMetadataV3,
    NodeMetadata,
    is_array,
    join_path,
    where_prefix,
)
from chunkstore.nodes.paths import between, relative
from chunkstore.nodes.pending import PENDING_KEY, Pending, drops_subtree, parse_pending
from chunkstore.nodes.pending import below_pending_subtree as _waits
from chunkstore.nodes.reading import read_nodes, walk_descendants
from chunkstore.storage.base import Store


class Consolidated:
    """An in-memory snapshot of every node below the group at ``root`` (paths relative
    to it), shared by the Group objects reached from it; their own writes keep it current
    (the stored copy is kept current by :func:`guarded_change`)."""

    def __init__(self, root: str, entries: dict[str, NodeMetadata]) -> None:
        self.root, self.entries = root, entries

    def rel(self, path: str) -> str:
        """``path`` relative to the snapshot's group."""
        return relative(path, self.root)

    def lookup(self, path: str) -> NodeMetadata | None:
        """The snapshot's metadata of the node at ``path`` (None: not listed)."""
        return self.entries.get(self.rel(path))

    def below(self, path: str) -> dict[str, NodeMetadata]:
        """The entries below ``path``, keyed relative to it."""
        return cons.children_of(self.entries, self.rel(path))

    def put(self, path: str, node: NodeMetadata | None) -> None:
        """Record ``node`` at ``path`` (None: it and everything below it are gone)."""
        rel = self.rel(path)
        if not rel:
            return
        if node is None or is_array(node):
            self.entries = without_below(self.entries, rel, keep_self=node is not None)
        if node is not None:
            self.entries[rel] = node


def without_below(entries: dict[str, NodeMetadata], rel: str, keep_self: bool = False
                   ) -> dict[str, NodeMetadata]:
    """``entries`` without those below ``rel`` (and without ``rel`` itself unless kept)."""
    return {k: v for k, v in entries.items()
            if not k.startswith(rel + "/") and (keep_self or k != rel)}


def depth(rel: str) -> int:
    return rel.count("/")


# -- entries from the store ---------------------------------------------------------------
def _apply(entries: dict[str, Any], store: Store, group: str, path: str,
           zarr_format: int) -> dict[str, Any]:
    """``entries`` of the group at ``group`` with the entry of ``path`` (and of the groups
    between that are not listed yet) set from the store's current documents; a node that
    is gone drops out with everything below it."""
    chain = between(group, path)
    need = [p for p in chain[:-1] if relative(p, group) not in entries] + chain[-1:]
    nodes = read_nodes(store, need, zarr_format)
    for p in chain:
        if p not in nodes:
            continue
        rel, node = relative(p, group), nodes[p]
        if node is None:
            return without_below(entries, rel)
        if is_array(node):
            entries = without_below(entries, rel, keep_self=True)
        entries[rel] = node
    return entries


def restore_entries(entries: dict[str, NodeMetadata], store: Store, group: str, zarr_format: int,
             paths: Sequence[str], subtrees: set[str], pending: Pending
             ) -> dict[str, NodeMetadata]:
    """``entries`` with the entries of ``paths`` (relative to the group) written back from
    the store; those in ``subtrees`` (their subtree was taken out) are walked again whole.
    A path below a node whose subtree is still pending waits for that node's writer."""
    walked: list[str] = []
    for rel in sorted(paths, key=depth):
        if _waits(rel, pending) or any(rel.startswith(w + "/") for w in walked):
            continue
        entries = _apply(entries, store, group, join_path(group, rel), zarr_format)
        node = entries.get(rel)
        if rel in subtrees and node is not None and not is_array(node):
            below = walk_descendants(store, join_path(group, rel), zarr_format)
            entries = without_below(entries, rel, keep_self=True)
            entries.update({f"{rel}/{k}": v for k, v in below.items()})
            walked.append(rel)
    return entries


def read_consolidated(store: Store, path: str, root: GroupMetadata,
                      v2_doc: bytes | None) -> dict[str, NodeMetadata] | None:
    """The consolidated entries of the group at ``path`` (``root`` is its metadata,
    ``v2_doc`` its ``.zmetadata``), or None when it has none. The entries of nodes with a
    pending mark (a writer is changing them now, or was killed while doing so) are read
    from the nodes' own documents: a consolidated open never shows a stale entry."""
    if isinstance(root, GroupMetadataV3):
        if root.consolidated_metadata is None:
            return None
        where = f"{where_prefix(store, path)}/zarr.json"
        entries = cons.parse_v3_inline(root.consolidated_metadata, where)
        pending = parse_pending(root.consolidated_metadata.get(PENDING_KEY), where)
        fmt = 3
    else:
        if v2_doc is None:
            return None
        where = f"{where_prefix(store, path)}/{V2_KEY}"
        entries = cons.parse_v2_document(v2_doc, where)
        pending = v2_pending(v2_doc, where)
        fmt = 2
    if pending:
        subtrees = {rel for rel, tokens in pending.items() if drops_subtree(tokens)}
        entries = restore_entries(entries, store, path, fmt, list(pending), subtrees, {})
    return entries


def v2_pending(raw: bytes, where: str) -> Pending:
    if f'"{PENDING_KEY}"'.encode() not in raw:
        return {}
    return parse_pending(load_json(raw, where).get(PENDING_KEY), where)
