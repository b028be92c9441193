"""Locate and load the metadata of the node (array or group) at a path."""

from __future__ import annotations

import os
from typing import Any

from ..errors import MetadataError, NodeNotFoundError
from ..storage.base import Store
from .json_io import load_json
from .v2 import ArrayMetadataV2, GroupMetadataV2
from .v3 import ArrayMetadataV3, GroupMetadataV3

ArrayMetadata = ArrayMetadataV2 | ArrayMetadataV3
GroupMetadata = GroupMetadataV2 | GroupMetadataV3
NodeMetadata = ArrayMetadata | GroupMetadata

METADATA_KEYS = ("zarr.json", ".zarray", ".zgroup", ".zattrs")


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


def load_node(store: Store, path: str, zarr_format: int | None = None) -> NodeMetadata:
    """Metadata of the node at ``path`` with one batched read; NodeNotFoundError if none."""
    keys = [join_path(path, k) for k in METADATA_KEYS]
    values = store.get_many(keys)
    node = parse_node(dict(zip(METADATA_KEYS, values, strict=True)), describe(store, path, "")[:-1],
                      zarr_format)
    if node is None:
        raise NodeNotFoundError(f"no array or group at path {path or '/'!r} in {store!r}")
    return node


def load_nodes(store: Store, paths: list[str]) -> dict[str, NodeMetadata | None]:
    """Metadata of several nodes with ONE batched read (None where nothing is there)."""
    keys = [join_path(p, k) for p in paths for k in METADATA_KEYS]
    values = store.get_many(keys) if keys else []
    n = len(METADATA_KEYS)
    out: dict[str, NodeMetadata | None] = {}
    for i, p in enumerate(paths):
        docs = dict(zip(METADATA_KEYS, values[i * n:(i + 1) * n], strict=True))
        out[p] = parse_node(docs, describe(store, p, "")[:-1])
    return out


def try_load_node(store: Store, path: str, zarr_format: int | None = None) -> NodeMetadata | None:
    """Like load_node, but None when nothing is there."""
    try:
        return load_node(store, path, zarr_format)
    except NodeNotFoundError:
        return None


def node_keys(node: NodeMetadata) -> tuple[str, ...]:
    """The metadata document names a node of this kind owns."""
    if node.zarr_format == 3:
        return ("zarr.json",)
    return (".zarray", ".zattrs") if isinstance(node, ArrayMetadataV2) else (".zgroup", ".zattrs")


def is_array(node: NodeMetadata) -> bool:
    return isinstance(node, ArrayMetadataV2 | ArrayMetadataV3)
