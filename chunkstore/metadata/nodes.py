"""Locate and load the metadata of the node (array or group) at a path.

Reads are format-aware, so that the common case costs one request: ``zarr.json`` is read
first (v3 is the default format) and the v2 documents only where it is missing, or
only the documents of ``zarr_format`` when the caller knows it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ..errors import MetadataError, NodeNotFoundError
from ..storage.base import Store
from .json_io import load_json
from .v2 import ArrayMetadataV2, GroupMetadataV2
from .v3 import ArrayMetadataV3, GroupMetadataV3

ArrayMetadata = ArrayMetadataV2 | ArrayMetadataV3
GroupMetadata = GroupMetadataV2 | GroupMetadataV3
NodeMetadata = ArrayMetadata | GroupMetadata

#: the documents that say a node exists and what it is, in either format
KIND_KEYS = ("zarr.json", ".zarray", ".zgroup")
_V2_KIND_KEY = {"array": ".zarray", "group": ".zgroup"}


def join_path(path: str, key: str) -> str:
    """``path/key`` with an empty path meaning the store root."""
    return f"{path}/{key}" if path else key


def store_location(store: Store) -> str:
    """Where a store lives: a directory, zip file or URL when it has one, else its repr."""
    for attr in ("url", "root", "path"):  # FsspecStore, LocalStore, ZipStore
        value = getattr(store, attr, None)
        if isinstance(value, str | os.PathLike) and str(value):
            return os.fspath(value)
    return repr(store)


def describe(store: Store, path: str, key: str) -> str:
    """Human-readable location of a document, e.g. ``/data/x.zarr/sub/zarr.json``."""
    return f"{store_location(store)}/{join_path(path, key)}"


def parse_node(docs: dict[str, bytes | None], where_prefix: str, zarr_format: int | None = None
               ) -> NodeMetadata | None:
    """Build node metadata from raw documents (``zarr.json``, ``.zarray``...); None if absent."""
    def where(key: str) -> str:
        return f"{where_prefix}/{key}" if where_prefix else key

    raw3 = docs.get("zarr.json")
    if raw3 is not None and zarr_format in (None, 3):
        doc = load_json(raw3, where("zarr.json"))
        node_type = doc.get("node_type")
        if node_type == "array":
            return ArrayMetadataV3.from_json(doc, where("zarr.json"))
        if node_type == "group":
            return GroupMetadataV3.from_json(doc, where("zarr.json"))
        raise MetadataError(f"{where('zarr.json')}: field 'node_type' must be 'array' or "
                            f"'group', got {node_type!r}")
    if zarr_format == 3:
        return None
    attrs: dict[str, Any] = {}
    if docs.get(".zattrs") is not None:
        attrs = load_json(docs[".zattrs"], where(".zattrs"))
    if docs.get(".zarray") is not None:
        return ArrayMetadataV2.from_json(load_json(docs[".zarray"], where(".zarray")),
                                         where(".zarray"), attrs)
    if docs.get(".zgroup") is not None:
        return GroupMetadataV2.from_json(load_json(docs[".zgroup"], where(".zgroup")),
                                         where(".zgroup"), attrs)
    return None


def _fetch(store: Store, docs: dict[str, dict[str, bytes | None]], paths: Sequence[str],
           names: Sequence[str]) -> None:
    """Read the documents ``names`` of every path in ``paths`` with one batched call."""
    if not paths or not names:
        return
    values = store.get_many([join_path(p, n) for p in paths for n in names])
    for i, p in enumerate(paths):
        docs[p].update(zip(names, values[i * len(names):(i + 1) * len(names)], strict=True))


def read_documents(store: Store, paths: Sequence[str], zarr_format: int | None = None,
                   kind: str | None = None, group_extra: Sequence[str] = ()
                   ) -> dict[str, dict[str, bytes | None]]:
    """The raw metadata documents of the nodes at ``paths``, with few batched reads.

    ``zarr.json`` first (skipped when ``zarr_format=2``); the v2 documents only where it
    is missing (never when ``zarr_format=3``). ``kind`` ("array" or "group"), the kind
    the caller expects, makes the v2 read fetch that kind's document with ``.zattrs``
    (and ``group_extra``, e.g. ``.zmetadata``, for a group) in one round trip, and the
    other kind's document only when it is missing; without it, ``.zarray``, ``.zgroup``,
    ``.zattrs`` and ``group_extra`` are read together. Documents not read are absent.
    """
    docs: dict[str, dict[str, bytes | None]] = {p: {} for p in paths}
    todo = list(paths)
    if zarr_format != 2:
        _fetch(store, docs, todo, ("zarr.json",))
        todo = [p for p in todo if docs[p]["zarr.json"] is None]
    if zarr_format == 3 or not todo:
        return docs
    if kind is None:
        _fetch(store, docs, todo, (".zarray", ".zgroup", ".zattrs", *group_extra))
        return docs
    first = _V2_KIND_KEY[kind]
    _fetch(store, docs, todo, (first, ".zattrs", *(group_extra if kind == "group" else ())))
    other = ".zgroup" if first == ".zarray" else ".zarray"
    _fetch(store, docs, [p for p in todo if docs[p][first] is None], (other,))
    return docs


def where_prefix(store: Store, path: str) -> str:
    """The location metadata errors of the node at ``path`` start with."""
    return describe(store, path, "")[:-1]


def load_nodes(store: Store, paths: Sequence[str], zarr_format: int | None = None
               ) -> dict[str, NodeMetadata | None]:
    """Metadata of several nodes with one batched read per format step (None where
    nothing is there); children of a group are read with the group's ``zarr_format``."""
    raw = read_documents(store, paths, zarr_format)
    return {p: parse_node(raw[p], where_prefix(store, p), zarr_format) for p in paths}


def try_load_node(store: Store, path: str, zarr_format: int | None = None,
                  kind: str | None = None) -> NodeMetadata | None:
    """Metadata of the node at ``path``, or None when nothing is there (``kind``: the
    kind expected, see :func:`read_documents`)."""
    raw = read_documents(store, [path], zarr_format, kind)[path]
    return parse_node(raw, where_prefix(store, path), zarr_format)


def load_node(store: Store, path: str, zarr_format: int | None = None,
              kind: str | None = None) -> NodeMetadata:
    """Like try_load_node, but NodeNotFoundError when nothing is there."""
    node = try_load_node(store, path, zarr_format, kind)
    if node is None:
        raise NodeNotFoundError(f"no array or group at path {path or '/'!r} in {store!r}")
    return node


def probe_nodes(store: Store, paths: Sequence[str]) -> dict[str, NodeMetadata | None]:
    """What is at each path, in either format, from ONE batched read of ``zarr.json``,
    ``.zarray`` and ``.zgroup`` (attributes are not read): for existence checks."""
    docs: dict[str, dict[str, bytes | None]] = {p: {} for p in paths}
    _fetch(store, docs, paths, KIND_KEYS)
    return {p: parse_node(docs[p], where_prefix(store, p)) for p in paths}


def node_keys(node: NodeMetadata) -> tuple[str, ...]:
    """The metadata document names a node of this kind owns."""
    if node.zarr_format == 3:
        return ("zarr.json",)
    return (".zarray", ".zattrs") if isinstance(node, ArrayMetadataV2) else (".zgroup", ".zattrs")


def is_array(node: NodeMetadata) -> bool:
    return isinstance(node, ArrayMetadataV2 | ArrayMetadataV3)
