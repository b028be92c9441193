"""Reading node documents from a store: one node, many nodes in a batch, a whole subtree.

Reads are format-aware, so that the common case costs one request: ``zarr.json`` is read
first (v3 is the default format) and the v2 documents only where it is missing, or only
the documents of ``zarr_format`` when the caller knows it. Nothing here lists a store
except :func:`walk_descendants`.
"""

from __future__ import annotations

from collections.abc import Sequence

from chunkstore.errors import NodeNotFoundError
from chunkstore.metadata.consolidated import V2_KEY
from chunkstore.metadata.nodes import (
    KIND_KEYS,
    V2_KIND_KEY,
    NodeMetadata,
    is_array,
    join_path,
    parse_node,
    where_prefix,
)
from chunkstore.storage.base import Store

#: names in a node's directory that are documents, not members
META_NAMES = frozenset({"zarr.json", ".zarray", ".zgroup", ".zattrs", V2_KEY})
Documents = dict[str, bytes | None]


def fetch_documents(store: Store, docs: dict[str, Documents], paths: Sequence[str],
           names: Sequence[str]) -> None:
    """Read the documents ``names`` of every path in ``paths`` with one batched call."""
    if not paths or not names:
        return
    values = store.get_many([join_path(p, n) for p in paths for n in names])
    for i, p in enumerate(paths):
        docs[p].update(zip(names, values[i * len(names):(i + 1) * len(names)], strict=True))


def read_documents(store: Store, paths: Sequence[str], zarr_format: int | None = None,
                   kind: str | None = None, group_extra: Sequence[str] = ()
                   ) -> dict[str, Documents]:
    """The raw metadata documents of the nodes at ``paths``, with few batched reads.

    ``zarr.json`` first (skipped when ``zarr_format=2``); the v2 documents only where it
    is missing (never when ``zarr_format=3``). ``kind`` ("array" or "group"), the kind
    the caller expects, makes the v2 read fetch that kind's document with ``.zattrs``
    (and ``group_extra``, e.g. ``.zmetadata``, for a group) in one round trip, and the
    other kind's document only when it is missing; without it, ``.zarray``, ``.zgroup``,
    ``.zattrs`` and ``group_extra`` are read together. Documents not read are absent.
    """
    docs: dict[str, Documents] = {p: {} for p in paths}
    todo = list(paths)
    if zarr_format != 2:
        fetch_documents(store, docs, todo, ("zarr.json",))
        todo = [p for p in todo if docs[p]["zarr.json"] is None]
    if zarr_format == 3 or not todo:
        return docs
    if kind is None:
        fetch_documents(store, docs, todo, (".zarray", ".zgroup", ".zattrs", *group_extra))
        return docs
    first = V2_KIND_KEY[kind]
    fetch_documents(store, docs, todo, (first, ".zattrs", *(group_extra if kind == "group" else ())))
    other = ".zgroup" if first == ".zarray" else ".zarray"
    fetch_documents(store, docs, [p for p in todo if docs[p][first] is None], (other,))
    return docs


def read_nodes(store: Store, paths: Sequence[str], zarr_format: int | None = None
               ) -> dict[str, NodeMetadata | None]:
    """Metadata of several nodes with one batched read per format step (None where
    nothing is there); children of a group are read with the group's ``zarr_format``."""
    raw = read_documents(store, paths, zarr_format)
    return {p: parse_node(raw[p], where_prefix(store, p), zarr_format) for p in paths}


def try_read_node(store: Store, path: str, zarr_format: int | None = None,
                  kind: str | None = None) -> NodeMetadata | None:
    """Metadata of the node at ``path``, or None when nothing is there (``kind``: the
    kind expected, see :func:`read_documents`)."""
    raw = read_documents(store, [path], zarr_format, kind)[path]
    return parse_node(raw, where_prefix(store, path), zarr_format)


def read_node(store: Store, path: str, zarr_format: int | None = None,
              kind: str | None = None) -> NodeMetadata:
    """Like :func:`try_read_node`, but NodeNotFoundError when nothing is there."""
    node = try_read_node(store, path, zarr_format, kind)
    if node is None:
        raise NodeNotFoundError(f"no array or group at path {path or '/'!r} in {store!r}")
    return node


def probe_nodes(store: Store, paths: Sequence[str]) -> dict[str, NodeMetadata | None]:
    """What is at each path, in either format, from ONE batched read of ``zarr.json``,
    ``.zarray`` and ``.zgroup`` (attributes are not read): for existence checks."""
    docs: dict[str, Documents] = {p: {} for p in paths}
    fetch_documents(store, docs, paths, KIND_KEYS)
    return {p: parse_node(docs[p], where_prefix(store, p)) for p in paths}


def walk_descendants(store: Store, path: str, zarr_format: int,
                     max_depth: int | None = None) -> dict[str, NodeMetadata]:
    """Every node of ``zarr_format`` below the group at ``path``, relative path ->
    metadata, breadth first: one listing per group and one batched read per level
    (``max_depth`` None = unlimited, 0 = children only)."""
    found: dict[str, NodeMetadata] = {}
    level, depth = [""], 0
    while level and (max_depth is None or depth <= max_depth):
        candidates = [join_path(rel, n) for rel in level
                      for n in store.list_dir(join_path(path, rel)) if n not in META_NAMES]
        nodes = read_nodes(store, [join_path(path, c) for c in candidates], zarr_format)
        level = []
        for rel in candidates:
            node = nodes[join_path(path, rel)]
            if node is not None:
                found[rel] = node
                if not is_array(node):
                    level.append(rel)
        depth += 1
    return found
