"""A stored consolidated copy, parsed only as far as an update of a few entries needs.

Marking and settling a node (``nodes.consolidated``) rewrites one or two entries of a
copy that may list thousands: the other entries stay as the JSON they were read as
(never validated or re-encoded one by one), and the document is written compactly by the
C encoder. What is written is what ``metadata.consolidated`` writes, entry for entry
(v3: ``{"kind": "inline", "must_understand": false, "metadata": {...}}`` sorted by path;
v2: ``.zgroup`` and ``.zattrs`` of the group, then ``<path>/.zarray|.zgroup`` and
``<path>/.zattrs`` sorted by path), plus the pending marks. Full validation is for
readers (``read_consolidated``) and for :func:`~nodes.consolidated.consolidate`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from chunkstore.errors import MetadataError
from chunkstore.metadata import consolidated as cons
from chunkstore.metadata.json_io import check_document, load_json
from chunkstore.metadata.nodes import GroupMetadataV2, NodeMetadata
from chunkstore.metadata.v2 import ArrayMetadataV2
from chunkstore.metadata.v3 import GroupMetadataV3
from chunkstore.nodes.pending import PENDING_KEY, Pending, parse_pending

#: an entry as stored: v3 its JSON object; v2 ``(".zarray" | ".zgroup", doc, attrs)``
Entry = Any


def _reject(name: str) -> Any:
    raise ValueError(f"bare {name} is not valid JSON")


def _load(raw: bytes, where: str) -> dict[str, Any]:
    """``raw`` parsed by the C decoder (after the caps on size and values); anything it
    does not take (or that is not an object) goes through the strict ``load_json``,
    which raises a MetadataError naming ``where``."""
    raw = check_document(raw, where, depth=False)  # size and values: before parsing
    try:
        doc = json.loads(raw, parse_constant=_reject)
    except (ValueError, UnicodeDecodeError, RecursionError):
        doc = None
    return doc if isinstance(doc, dict) else load_json(raw, where)


def _refuse(strict: Any, where: str) -> Any:
    """Raise the error of the strict parser (``metadata.consolidated``) for a copy whose
    outline is malformed: it names the field."""
    strict()
    raise MetadataError(f"{where}: malformed consolidated metadata")


def _default(obj: Any) -> Any:
    if hasattr(obj, "tolist"):  # numpy scalars and arrays
        return obj.tolist()
    raise TypeError(f"{type(obj).__name__} {obj!r} is not JSON serializable")


def _dump(doc: dict[str, Any], where: str) -> bytes:
    try:
        raw = json.dumps(doc, separators=(",", ":"), default=_default).encode()
    except (TypeError, ValueError, RecursionError) as e:
        raise MetadataError(f"{where}: value is not JSON-serializable: {e}") from e
    return check_document(raw, where, writing=True, depth=False)  # readers would refuse it


@dataclass
class CopyDoc:
    """A copy's entries (path relative to the group -> :data:`Entry` or NodeMetadata)
    and pending marks, with what else the document holds."""

    fmt: int
    doc: dict[str, Any]
    entries: dict[str, Entry | NodeMetadata]
    pending: Pending
    where: str

    @classmethod
    def v3(cls, raw: bytes, where: str) -> CopyDoc | None:
        """The copy in a group's ``zarr.json`` (None: not a group holding one)."""
        doc = _load(raw, where)
        field = doc.get("consolidated_metadata")
        if doc.get("node_type") != "group" or doc.get("zarr_format") != 3 or field is None:
            return None
        docs = field.get("metadata", {}) if isinstance(field, dict) else None
        if not isinstance(docs, dict) or field.get("kind", "inline") != "inline":
            _refuse(lambda: cons.parse_v3_inline(
                GroupMetadataV3.from_json(doc, where).consolidated_metadata, where), where)
        entries = {rel.strip("/"): value for rel, value in docs.items()}
        return cls(3, doc, entries, parse_pending(field.get(PENDING_KEY), where), where)

    @classmethod
    def v2(cls, raw: bytes, where: str) -> CopyDoc:
        """The copy in a ``.zmetadata``."""
        doc = _load(raw, where)
        docs = doc.get("metadata")
        if doc.get("zarr_consolidated_format") != 1 or not isinstance(docs, dict):
            _refuse(lambda: cons.parse_v2_document(raw, where), where)
        named = ((key.rpartition("/"), value) for key, value in docs.items())
        entries = {rel: (name, value, docs.get(f"{rel}/.zattrs"))
                   for (rel, _, name), value in named if rel and name in (".zarray", ".zgroup")}
        return cls(2, doc, entries, parse_pending(doc.get(PENDING_KEY), where), where)

    def has_root(self) -> bool:
        """Whether a v2 copy holds its group's ``.zgroup`` (kept as is by :meth:`dump`
        when no fresh group metadata is given)."""
        return isinstance(self.doc.get("metadata", {}).get(".zgroup"), dict)

    def dump(self, root: GroupMetadataV2 | None = None) -> bytes:
        """The document with the current entries and marks (v2: ``root``, the group's
        metadata, gives the ``.zgroup`` and ``.zattrs`` that head the copy; None keeps
        those stored)."""
        doc = dict(self.doc)
        if self.fmt == 3:
            field: dict[str, Any] = {"kind": "inline", "must_understand": False,
                                     "metadata": {rel: _v3_entry(self.entries[rel])
                                                  for rel in sorted(self.entries)}}
            if self.pending:
                field[PENDING_KEY] = self.pending
            doc["consolidated_metadata"] = field
            return _dump(doc, self.where)
        if root is not None:
            docs: dict[str, Any] = {".zgroup": root.to_json(), ".zattrs": root.attributes}
        else:
            stored = self.doc["metadata"]
            docs = {".zgroup": stored[".zgroup"], ".zattrs": stored.get(".zattrs", {})}
        for rel in sorted(self.entries):
            name, value, attrs = _v2_entry(self.entries[rel], rel, self.where)
            docs[f"{rel}/{name}"] = value
            docs[f"{rel}/.zattrs"] = attrs if attrs is not None else {}
        out: dict[str, Any] = {"metadata": docs, "zarr_consolidated_format": 1}
        if self.pending:
            out[PENDING_KEY] = self.pending
        return _dump(out, self.where)


def _v3_entry(entry: Entry | NodeMetadata) -> Any:
    if not hasattr(entry, "to_json"):
        return entry
    doc = entry.to_json()
    if isinstance(entry, GroupMetadataV3):
        doc.pop("consolidated_metadata", None)
    return doc


def _v2_entry(entry: Entry | NodeMetadata, rel: str, where: str) -> tuple[str, Any, Any]:
    if isinstance(entry, tuple):
        return entry
    if isinstance(entry, ArrayMetadataV2):
        return ".zarray", entry.to_json(), entry.attributes
    if isinstance(entry, GroupMetadataV2):
        return ".zgroup", entry.to_json(), entry.attributes
    raise MetadataError(f"{where}: v3 node {rel!r} cannot be listed in .zmetadata")
