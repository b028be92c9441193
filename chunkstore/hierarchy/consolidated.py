"""Consolidated metadata in a store: written by :func:`consolidate`, read by
:func:`read_consolidated`, and kept current by :func:`refresh_consolidated`.

A consolidated document (v3 inline in a group's ``zarr.json``, v2 ``.zmetadata``) is a
copy of its descendants' metadata. Any change to one node (resize, append, attributes, a
new or deleted member) must reach every copy above it, or a later consolidated open reads
the old shape: a silent wrong answer (zarr-python issue 2921). The consolidating groups are
found by reading the store, whatever way the node was opened, and each copy is updated
with a conditional read-modify-write (``io.rmw``) that re-reads the member's current
document *after* reading the copy's generation: of two concurrent refreshes, the one that
commits last has read the newest member document, so a stale entry never wins.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..io.rmw import UNCHANGED, WriteUnit, commit_units, update_object
from ..metadata import consolidated as cons
from ..metadata.nodes import (
    GroupMetadata,
    GroupMetadataV2,
    GroupMetadataV3,
    NodeMetadata,
    is_array,
    join_path,
    parse_node,
    where_prefix,
)
from ..storage.base import Store
from .paths import ancestors, between, relative
from .reading import read_node, read_nodes, walk_descendants

V2_KEY = cons.V2_KEY
_VERIFY_ROUNDS = 8


class Consolidated:
    """An in-memory snapshot of every node below the group at ``root`` (paths relative
    to it), shared by the Group objects reached from it; their own writes keep it current
    (the stored copy is kept current by :func:`refresh_consolidated`)."""

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
            self.entries = _without_below(self.entries, rel, keep_self=node is not None)
        if node is not None:
            self.entries[rel] = node


def _without_below(entries: dict[str, NodeMetadata], rel: str, keep_self: bool = False
                   ) -> dict[str, NodeMetadata]:
    """``entries`` without those below ``rel`` (and without ``rel`` itself unless kept)."""
    return {k: v for k, v in entries.items()
            if not k.startswith(rel + "/") and (keep_self or k != rel)}


def read_consolidated(store: Store, path: str, root: GroupMetadata,
                      v2_doc: bytes | None) -> dict[str, NodeMetadata] | None:
    """The consolidated entries of the group at ``path`` (``root`` is its metadata,
    ``v2_doc`` its ``.zmetadata``), or None when it has none."""
    if isinstance(root, GroupMetadataV3):
        if root.consolidated_metadata is None:
            return None
        where = f"{where_prefix(store, path)}/zarr.json"
        return cons.parse_v3_inline(root.consolidated_metadata, where)
    where = f"{where_prefix(store, path)}/{V2_KEY}"
    return None if v2_doc is None else cons.parse_v2_document(v2_doc, where)


def _apply(entries: dict[str, NodeMetadata], store: Store, group: str, path: str,
           zarr_format: int) -> dict[str, NodeMetadata]:
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
            return _without_below(entries, rel)
        if is_array(node):
            entries = _without_below(entries, rel, keep_self=True)
        entries[rel] = node
    return entries


def _v3_unit(store: Store, group: str, path: str) -> WriteUnit:
    key = join_path(group, "zarr.json")
    where = where_prefix(store, group)

    def build(old: bytes | None) -> Any:
        if old is None:
            return UNCHANGED
        node = parse_node({"zarr.json": old}, where, 3)
        if not isinstance(node, GroupMetadataV3) or node.consolidated_metadata is None:
            return UNCHANGED
        entries = cons.parse_v3_inline(node.consolidated_metadata, f"{where}/zarr.json")
        entries = _apply(entries, store, group, path, 3)
        new = node.replace(consolidated_metadata=cons.v3_inline(entries))
        raw = new.documents(f"{where}/zarr.json")["zarr.json"]
        return UNCHANGED if raw == old else raw
    return WriteUnit(key, build, label=f"consolidated metadata of {where}/zarr.json")


def _v2_unit(store: Store, group: str, path: str) -> WriteUnit:
    key = join_path(group, V2_KEY)
    where = f"{where_prefix(store, group)}/{V2_KEY}"

    def build(old: bytes | None) -> Any:
        if old is None:
            return UNCHANGED
        entries = cons.parse_v2_document(old, where)
        if path != group:
            entries = _apply(entries, store, group, path, 2)
        root = read_node(store, group, 2, kind="group")
        if not isinstance(root, GroupMetadataV2):
            return UNCHANGED
        raw = cons.v2_document(root, entries, where)
        return UNCHANGED if raw == old else raw
    return WriteUnit(key, build, label=f"consolidated metadata {where}")


def holds_consolidated(raw: bytes | None, zarr_format: int) -> bool:
    """Whether a group's raw ``zarr.json`` (v3) or ``.zmetadata`` (v2) is a consolidated
    copy (a cheap test: the v3 document is parsed only when the copy is updated)."""
    if raw is None:
        return False
    return zarr_format == 2 or b'"consolidated_metadata"' in raw


def refresh_consolidated(store: Store, path: str, *, zarr_format: int | None = None,
                         synchronizer: Any = None, groups: Sequence[str] | None = None) -> None:
    """Bring the entry of the node at ``path`` up to date in every consolidated document
    above it (v2: its own ``.zmetadata`` too, which copies its attributes).

    The consolidating groups are found with one batched read of the candidates'
    documents (only the format's keys when ``zarr_format`` is given), unless the caller
    lists them in ``groups`` (it has just read them). Each is then updated with a
    conditional read-modify-write. A node that is gone is dropped with its subtree; a new
    one is added (with the groups between, if they are not listed).
    """
    above = ancestors(path)
    candidates: list[tuple[str, int]] = []
    if zarr_format in (None, 3):
        candidates += [(p, 3) for p in above]
    if zarr_format in (None, 2):
        candidates += [(p, 2) for p in [*above, path]]
    if groups is not None:
        wanted = set(groups)
        found = [c for c in candidates if c[0] in wanted]
    else:
        keys = [join_path(p, "zarr.json" if fmt == 3 else V2_KEY) for p, fmt in candidates]
        raw = store.get_many(keys) if keys else []
        found = [c for c, blob in zip(candidates, raw, strict=True)
                 if holds_consolidated(blob, c[1])]
    units = [_v3_unit(store, group, path) if fmt == 3 else _v2_unit(store, group, path)
             for group, fmt in found]
    if units:
        commit_units(store, units, synchronizer=synchronizer, cpu_bound=False)


def _fingerprint(entries: dict[str, NodeMetadata]) -> str:
    """A comparable form of consolidated entries (NaN fill values compare equal here)."""
    return json.dumps({k: [v.to_json(), v.attributes] for k, v in entries.items()},
                      sort_keys=True, default=str)


def consolidate(store: Store, path: str, group: GroupMetadata, *, synchronizer: Any = None
                ) -> tuple[GroupMetadata, dict[str, NodeMetadata]]:
    """Write the consolidated metadata of the group at ``path`` (``group``: its metadata,
    which gives the format) from the real tree, and return the group's metadata and the
    entries.

    The tree is walked inside the conditional commit, then walked again: a member that
    changed before the copy existed (so its own refresh found nothing to update) is
    caught by the second walk and the copy rewritten, until both agree."""
    fmt = group.zarr_format
    where = where_prefix(store, path)
    state: dict[str, Any] = {}

    def build_v3(old: bytes | None) -> Any:
        node = parse_node({"zarr.json": old}, where, 3) if old is not None else group
        if not isinstance(node, GroupMetadataV3):
            node = group
        entries = walk_descendants(store, path, 3)
        state["entries"], state["root"] = entries, node.replace(
            consolidated_metadata=cons.v3_inline(entries))
        return state["root"].documents(f"{where}/zarr.json")["zarr.json"]

    def build_v2(old: bytes | None) -> Any:
        root = read_node(store, path, 2, kind="group")
        entries = walk_descendants(store, path, 2)
        state["entries"], state["root"] = entries, root
        return cons.v2_document(root, entries, f"{where}/{V2_KEY}")  # type: ignore[arg-type]

    key = join_path(path, "zarr.json" if fmt == 3 else V2_KEY)
    for _ in range(_VERIFY_ROUNDS):
        update_object(store, key, build_v3 if fmt == 3 else build_v2, synchronizer=synchronizer,
                      label=f"consolidated metadata of {where}")
        if _fingerprint(walk_descendants(store, path, fmt)) == _fingerprint(state["entries"]):
            break
    return state["root"], state["entries"]
