"""Writing a group's consolidated copy from the real tree (:func:`consolidate`), walked
until two walks agree, keeping the pending marks of writers still at work."""

from __future__ import annotations

import json
from typing import Any

from chunkstore.io.rmw import update_object
from chunkstore.metadata import consolidated as cons
from chunkstore.metadata.consolidated import V2_KEY
from chunkstore.metadata.json_io import dump_json, load_json
from chunkstore.metadata.nodes import (
    GroupMetadata,
    GroupMetadataV2,
    GroupMetadataV3,
    NodeMetadata,
    join_path,
    parse_node,
    where_prefix,
)
from chunkstore.nodes.consolidated_entries import depth, v2_pending, without_below
from chunkstore.nodes.pending import PENDING_KEY, Pending, parse_pending, purge
from chunkstore.nodes.reading import read_node, walk_descendants
from chunkstore.storage.base import Store

_VERIFY_ROUNDS = 8


def _v2_bytes(root: GroupMetadataV2, entries: dict[str, NodeMetadata], pending: Pending,
              where: str) -> bytes:
    raw = cons.v2_document(root, entries, where)
    if not pending:
        return raw
    doc = load_json(raw, where)
    doc[PENDING_KEY] = pending
    return dump_json(doc, where)


def _fingerprint(entries: dict[str, NodeMetadata]) -> str:
    """A comparable form of consolidated entries (NaN fill values compare equal here)."""
    return json.dumps({k: [v.to_json(), v.attributes] for k, v in entries.items()},
                      sort_keys=True, default=str)


def _stored(entries: dict[str, NodeMetadata], pending: Pending) -> dict[str, NodeMetadata]:
    """The entries to store while ``pending`` marks stand (those their writers took out)."""
    out = dict(entries)
    for rel in sorted(pending, key=depth):
        drops = {v[3] for v in pending[rel].values()}
        if "subtree" in drops:
            out = without_below(out, rel)
        elif "self" in drops and not any(k.startswith(rel + "/") for k in out):
            out.pop(rel, None)
    return out


def consolidate(store: Store, path: str, group: GroupMetadata, *, synchronizer: Any = None
                ) -> tuple[GroupMetadata, dict[str, NodeMetadata]]:
    """Write the consolidated metadata of the group at ``path`` (``group``: its metadata,
    which gives the format) from the real tree, and return the group's metadata and the
    entries.

    The tree is walked inside the conditional commit, then walked again: a member that
    changed before the copy existed (so its own refresh found nothing to update) is
    caught by the second walk and the copy rewritten, until both agree. Pending marks of
    writers still at work are kept (with their entries out of the stored copy); those of
    dead writers are dropped."""
    fmt = group.zarr_format
    where = where_prefix(store, path)
    state: dict[str, Any] = {}

    def build_v3(old: bytes | None) -> Any:
        node = parse_node({"zarr.json": old}, where, 3) if old is not None else group
        if not isinstance(node, GroupMetadataV3):
            node = group
        field = node.consolidated_metadata or {}
        pending, _, _ = purge(parse_pending(field.get(PENDING_KEY), f"{where}/zarr.json"))
        entries = walk_descendants(store, path, 3)
        new_field = cons.v3_inline(_stored(entries, pending))
        if pending:
            new_field[PENDING_KEY] = pending
        state["entries"], state["root"] = entries, node.replace(consolidated_metadata=new_field)
        return state["root"].documents(f"{where}/zarr.json")["zarr.json"]

    def build_v2(old: bytes | None) -> Any:
        at = f"{where}/{V2_KEY}"
        pending = purge(v2_pending(old, at))[0] if old is not None else {}
        root = read_node(store, path, 2, kind="group")
        entries = walk_descendants(store, path, 2)
        state["entries"], state["root"] = entries, root
        return _v2_bytes(root, _stored(entries, pending), pending, at)  # type: ignore[arg-type]

    key = join_path(path, "zarr.json" if fmt == 3 else V2_KEY)
    for _ in range(_VERIFY_ROUNDS):
        update_object(store, key, build_v3 if fmt == 3 else build_v2, synchronizer=synchronizer,
                      label=f"consolidated metadata of {where}")
        if _fingerprint(walk_descendants(store, path, fmt)) == _fingerprint(state["entries"]):
            break
    return state["root"], state["entries"]
