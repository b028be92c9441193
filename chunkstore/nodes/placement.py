"""Placing a new node in a hierarchy: refuse or clear what is there, create the missing
groups above it, write its documents and list it in the consolidated copies above it,
with one batched read and one batched write in the common case."""

from __future__ import annotations

from typing import Any

from chunkstore.errors import ContainsArrayError, ContainsGroupError
from chunkstore.metadata.consolidated import V2_KEY
from chunkstore.metadata.nodes import (
    KIND_KEYS,
    GroupMetadataV2,
    GroupMetadataV3,
    NodeMetadata,
    is_array,
    join_path,
    parse_node,
    where_prefix,
)
from chunkstore.nodes.consolidated import holds_consolidated
from chunkstore.nodes.documents import delete_node, write_nodes
from chunkstore.nodes.nesting import refuse_nested
from chunkstore.nodes.paths import ancestors, check_new_path
from chunkstore.storage.base import Store


def parents_to_check(path: str, within: str | None) -> list[str]:
    """The groups above ``path``, root first; only those below ``within`` when given."""
    above = ancestors(path)
    if within is None:
        return above
    return [p for p in above if len(p) > len(within) and (not within or p.startswith(within + "/"))]


def empty_group(zarr_format: int) -> GroupMetadataV2 | GroupMetadataV3:
    """The metadata of a new group without attributes."""
    return GroupMetadataV3() if zarr_format == 3 else GroupMetadataV2()


def check_parents(store: Store, path: str) -> None:
    """ContainsArrayError when a node above ``path`` (either format) is an array, so that
    nothing could be created at ``path``; one batched read."""
    parents = ancestors(path)
    names = (*KIND_KEYS, V2_KEY)
    values = iter(store.get_many([join_path(p, n) for p in parents for n in names]))
    nodes = {p: parse_node({n: next(values) for n in names}, where_prefix(store, p))
             for p in parents}
    _refuse_array_parent(store, path, nodes)


def _refuse_array_parent(store: Store, path: str, nodes: dict[str, Any]) -> None:
    for parent, node in nodes.items():
        if node is not None and is_array(node):
            raise ContainsArrayError(f"cannot create {path!r}: A parent of {path!r} "
                                     f"({parent or '/'!r} in {store!r}) is an array - only "
                                     "groups may have child nodes.")


def place_node(store: Store, path: str, meta: NodeMetadata, *, overwrite: bool = False,
               within: str | None = None, checked: bool = False,
               synchronizer: Any = None) -> None:
    """Create the node ``meta`` at ``path``.

    A node already there (in either format: an existing v2 array blocks a new v3 one)
    raises ContainsArrayError / ContainsGroupError, or is deleted with ``overwrite``. The
    missing groups above ``path`` are created (root included, as zarr-python does); a
    parent that is an array raises ContainsArrayError. ``within``: the path of a group
    known to exist (its ancestors are not read); ``checked``: nothing is at ``path`` (the
    caller just read it in both formats). The groups above that hold consolidated copies
    are found in the same batched read (the copy's document of each group at or above
    ``within``), never taken from an older handle, which would miss a consolidation
    made since.
    """
    check_new_path(path)
    fmt = meta.zarr_format
    parents = parents_to_check(path, within)
    parent_names = KIND_KEYS + ((V2_KEY,) if fmt == 2 else ())
    key = "zarr.json" if fmt == 3 else V2_KEY  # where a group keeps its consolidated copy
    known = [p for p in ancestors(path) if p not in parents]  # at or above ``within``
    requests = [(p, n) for p in parents for n in parent_names] + [(p, key) for p in known]
    if not checked:
        requests += [(path, n) for n in KIND_KEYS]
    values = store.get_many([join_path(p, n) for p, n in requests])
    docs: dict[str, dict[str, bytes | None]] = {p: {} for p in [*known, *parents, path]}
    for (p, n), value in zip(requests, values, strict=True):
        docs[p][n] = value
    nodes = {p: parse_node(docs[p], where_prefix(store, p)) for p in [*parents, path]}
    existing = None if checked else nodes[path]
    if existing is not None and not overwrite:
        kind = ContainsArrayError if is_array(existing) else ContainsGroupError
        what = "an array" if is_array(existing) else "a group"
        raise kind(f"{what} already exists at path {path or '/'!r} in {store!r}")
    _refuse_array_parent(store, path, {p: nodes[p] for p in parents})
    # nodes of other stores nested with this one on the file system (LocalStore only)
    refuse_nested(store, path, creating_array=existing is None and is_array(meta))
    consolidating = [p for p in ancestors(path) if holds_consolidated(docs[p].get(key), fmt)]
    if existing is not None:
        delete_node(store, path, zarr_format=existing.zarr_format, synchronizer=synchronizer,
                    consolidating=consolidating if existing.zarr_format == fmt else None)
    written: dict[str, NodeMetadata] = {p: empty_group(fmt) for p in parents if nodes[p] is None}
    written[path] = meta
    write_nodes(store, written, synchronizer=synchronizer, consolidating=consolidating,
                created=None if existing is not None else path)
