"""Node metadata of either format: parse raw documents, name them, say where they live.

Pure: no store IO here (reading and writing documents is ``chunkstore.hierarchy``'s job).
"""

from __future__ import annotations

import os
from typing import Any

from chunkstore.errors import MetadataError
from chunkstore.metadata.json_io import load_json
from chunkstore.metadata.v2 import ArrayMetadataV2, GroupMetadataV2
from chunkstore.metadata.v3 import ArrayMetadataV3, GroupMetadataV3

ArrayMetadata = ArrayMetadataV2 | ArrayMetadataV3
GroupMetadata = GroupMetadataV2 | GroupMetadataV3
NodeMetadata = ArrayMetadata | GroupMetadata

#: the documents that say a node exists and what it is, in either format
KIND_KEYS = ("zarr.json", ".zarray", ".zgroup")
#: v2: the document naming each kind of node
V2_KIND_KEY = {"array": ".zarray", "group": ".zgroup"}


def join_path(path: str, key: str) -> str:
    """``path/key`` with an empty path meaning the store root."""
    return f"{path}/{key}" if path else key


def store_location(store: Any) -> str:
    """Where a store lives: a directory, zip file or URL when it has one, else its repr."""
    for attr in ("url", "root", "path"):  # FsspecStore, LocalStore, ZipStore
        value = getattr(store, attr, None)
        if isinstance(value, str | os.PathLike) and str(value):
            return os.fspath(value)
    return repr(store)


def describe(store: Any, path: str, key: str) -> str:
    """Human-readable location of a document, e.g. ``/data/x.zarr/sub/zarr.json``."""
    return f"{store_location(store)}/{join_path(path, key)}"


def where_prefix(store: Any, path: str) -> str:
    """The location metadata errors of the node at ``path`` start with."""
    return describe(store, path, "")[:-1]


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
        attrs = load_json(docs[".zattrs"], where(".zattrs"))  # type: ignore[arg-type]
    if docs.get(".zarray") is not None:
        return ArrayMetadataV2.from_json(load_json(docs[".zarray"], where(".zarray")),  # type: ignore[arg-type]
                                         where(".zarray"), attrs)
    if docs.get(".zgroup") is not None:
        return GroupMetadataV2.from_json(load_json(docs[".zgroup"], where(".zgroup")),  # type: ignore[arg-type]
                                         where(".zgroup"), attrs)
    return None


def node_keys(node: NodeMetadata) -> tuple[str, ...]:
    """The metadata document names a node of this kind owns."""
    if node.zarr_format == 3:
        return ("zarr.json",)
    return (".zarray", ".zattrs") if isinstance(node, ArrayMetadataV2) else (".zgroup", ".zattrs")


def is_array(node: NodeMetadata) -> bool:
    """True for array metadata (either format), False for a group's."""
    return isinstance(node, ArrayMetadataV2 | ArrayMetadataV3)
