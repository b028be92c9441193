"""Consolidated metadata: every node's documents below a group, in one document.

Written exactly as zarr-python does: v3 inline in the group's ``zarr.json``
(``consolidated_metadata = {"kind": "inline", "must_understand": false, "metadata":
{relative path: zarr.json contents}}``), v2 as ``.zmetadata`` (``{"zarr_consolidated_format":
1, "metadata": {"a/.zarray": {...}, "a/.zattrs": {...}, ".zgroup": {...}}}``).
Paths in both are relative to the group that holds them.
"""

from __future__ import annotations

from typing import Any

from chunkstore.errors import MetadataError
from chunkstore.metadata.json_io import dump_json, load_json
from chunkstore.metadata.nodes import NodeMetadata, is_array
from chunkstore.metadata.v2 import ArrayMetadataV2, GroupMetadataV2
from chunkstore.metadata.v3 import ArrayMetadataV3, GroupMetadataV3

V2_KEY = ".zmetadata"


def v3_inline(entries: dict[str, NodeMetadata]) -> dict[str, Any]:
    """The ``consolidated_metadata`` field of a v3 group for ``entries`` (rel path -> node)."""
    docs = {}
    for rel, node in sorted(entries.items()):
        doc = node.to_json()
        if isinstance(node, GroupMetadataV3):
            doc.pop("consolidated_metadata", None)
        docs[rel] = doc
    return {"kind": "inline", "must_understand": False, "metadata": docs}


def parse_v3_inline(field: dict[str, Any], where: str) -> dict[str, NodeMetadata]:
    """Nodes of a v3 ``consolidated_metadata`` field, keyed by path relative to the group."""
    if field.get("kind", "inline") != "inline":
        raise MetadataError(f"{where}: field 'consolidated_metadata.kind' must be 'inline', "
                            f"got {field.get('kind')!r}")
    docs = field.get("metadata", {})
    if not isinstance(docs, dict):
        raise MetadataError(f"{where}: field 'consolidated_metadata.metadata' must be an object")
    out: dict[str, NodeMetadata] = {}
    for rel, doc in docs.items():
        at = f"{where} (consolidated entry {rel!r})"
        if not isinstance(doc, dict):
            raise MetadataError(f"{at}: must be an object")
        node_type = doc.get("node_type")
        if node_type == "array":
            out[rel.strip("/")] = ArrayMetadataV3.from_json(doc, at)
        elif node_type == "group":
            out[rel.strip("/")] = GroupMetadataV3.from_json(doc, at)
        else:
            raise MetadataError(f"{at}: field 'node_type' must be 'array' or 'group', "
                                f"got {node_type!r}")
    return out


def v2_document(root: GroupMetadataV2, entries: dict[str, NodeMetadata], where: str) -> bytes:
    """The ``.zmetadata`` document for a v2 group ``root`` and its descendants."""
    docs: dict[str, Any] = {".zgroup": root.to_json(), ".zattrs": root.attributes}
    for rel, node in sorted(entries.items()):
        if isinstance(node, ArrayMetadataV2):
            docs[f"{rel}/.zarray"] = node.to_json()
        elif isinstance(node, GroupMetadataV2):
            docs[f"{rel}/.zgroup"] = node.to_json()
        else:
            raise MetadataError(f"{where}: v3 node {rel!r} cannot be listed in .zmetadata")
        docs[f"{rel}/.zattrs"] = node.attributes
    return dump_json({"metadata": docs, "zarr_consolidated_format": 1}, where)


def parse_v2_document(raw: bytes, where: str) -> dict[str, NodeMetadata]:
    """Nodes of a ``.zmetadata`` document, keyed by path relative to its group."""
    doc = load_json(raw, where)
    if doc.get("zarr_consolidated_format") != 1:
        raise MetadataError(f"{where}: field 'zarr_consolidated_format' must be 1")
    docs = doc.get("metadata")
    if not isinstance(docs, dict):
        raise MetadataError(f"{where}: field 'metadata' must be an object")
    out: dict[str, NodeMetadata] = {}
    for key, value in docs.items():
        rel, _, name = key.rpartition("/")
        if name not in (".zarray", ".zgroup") or not rel:
            continue
        at = f"{where} (consolidated entry {key!r})"
        if not isinstance(value, dict):
            raise MetadataError(f"{at}: must be an object")
        attrs = docs.get(f"{rel}/.zattrs") or {}
        if not isinstance(attrs, dict):
            raise MetadataError(f"{where} (consolidated entry {rel + '/.zattrs'!r}): "
                                "must be an object")
        cls = ArrayMetadataV2 if name == ".zarray" else GroupMetadataV2
        out[rel] = cls.from_json(value, at, attrs)
    return out


def children_of(entries: dict[str, NodeMetadata], rel: str) -> dict[str, NodeMetadata]:
    """The entries below ``rel`` (``""`` = all), re-keyed relative to it."""
    if not rel:
        return dict(entries)
    prefix = rel + "/"
    return {k[len(prefix):]: v for k, v in entries.items() if k.startswith(prefix)}


def immediate(entries: dict[str, NodeMetadata]) -> dict[str, NodeMetadata]:
    """The direct children among ``entries`` (keys without a ``/``)."""
    return {k: v for k, v in entries.items() if "/" not in k}


__all__ = ["V2_KEY", "children_of", "immediate", "is_array", "parse_v2_document",
           "parse_v3_inline", "v2_document", "v3_inline"]
