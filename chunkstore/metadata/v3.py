"""Zarr v3 ``zarr.json`` documents for arrays and groups."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from chunkstore.errors import MetadataError, UnsupportedError
from chunkstore.metadata.dtypes import (
    dtype_from_v3,
    fill_value_to_json,
    parse_fill_value,
    v3_name_of,
)
from chunkstore.metadata.dtypes_structured import LEGACY_STRUCT_NAME
from chunkstore.metadata.json_io import (
    check_chunk_nbytes,
    check_grid,
    dump_json,
    require,
    shape_tuple,
)
from chunkstore.metadata.rectilinear import (
    AxisEdges,
    edges_from_json,
    edges_to_json,
    grown_edges,
    max_lengths,
)

_ARRAY_FIELDS = {
    "zarr_format", "node_type", "shape", "data_type", "chunk_grid", "chunk_key_encoding",
    "fill_value", "codecs", "attributes", "dimension_names", "storage_transformers",
}
_GROUP_FIELDS = {"zarr_format", "node_type", "attributes", "consolidated_metadata"}


def zero_chunks(shape: Any, chunks: Any, known: tuple[int, ...] = ()
                ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """``(shape, chunk_shape, zero_chunk_axes)`` of an array whose chunks may have length 0
    (v2 and v3): zarr-python accepts and writes a chunk length of 0 on an axis of length 0.
    Such an axis gets chunk length 1 (one chunk that is never stored) and is remembered in
    ``zero_chunk_axes``, so the document is written back with its 0. A 0 on an axis that is
    not empty describes no grid: MetadataError."""
    shape, chunks = tuple(int(s) for s in shape), tuple(int(c) for c in chunks)
    if len(shape) != len(chunks):
        return shape, chunks, ()  # reported by the grid check
    zeros = set(known)
    for axis, (s, c) in enumerate(zip(shape, chunks, strict=True)):
        if c == 0:
            if s != 0:
                raise MetadataError(f"array metadata: chunk length 0 on axis {axis} of "
                                    f"length {s} (only an empty axis may have it)")
            zeros.add(axis)
    kept = tuple(sorted(a for a in zeros if a < len(shape)))
    return shape, tuple(1 if a in kept and c == 0 else c
                        for a, c in enumerate(chunks)), kept


def stored_chunks(shape: tuple[int, ...], chunks: tuple[int, ...],
                  zero_axes: tuple[int, ...]) -> list[int]:
    """The chunk shape as written: 0 on the axes read with 0 while they are still empty."""
    return [0 if a in zero_axes and shape[a] == 0 else c for a, c in enumerate(chunks)]


def normalize_codec_json(codec: Any, where: str) -> dict[str, Any]:
    """A v3 codec entry as ``{"name": ..., "configuration": {...}}``."""
    if isinstance(codec, str):
        return {"name": codec, "configuration": {}}
    if not isinstance(codec, dict) or not isinstance(codec.get("name"), str):
        raise MetadataError(f"{where}: field 'codecs': invalid codec entry {codec!r}")
    config = codec.get("configuration", {})
    if not isinstance(config, dict):
        raise MetadataError(f"{where}: field 'codecs': configuration of {codec['name']!r} "
                            "must be an object")
    if codec["name"] == "sharding_indexed":  # read before any codec is built (the grid)
        shape = config.get("chunk_shape")
        if not isinstance(shape, list) or not all(
                type(c) is int and c > 0 for c in shape):
            raise MetadataError(f"{where}: field 'codecs': 'sharding_indexed' needs "
                                f"'chunk_shape', a list of positive integers, got {shape!r}")
    out = {"name": codec["name"], "configuration": dict(config)}
    for key, value in codec.items():
        if key not in ("name", "configuration"):
            out[key] = value
    return out


def _check_extensions(doc: dict[str, Any], known: set[str], where: str) -> dict[str, Any]:
    """Unknown top-level fields are kept if they say ``must_understand: false``."""
    extra = {}
    for key, value in doc.items():
        if key in known:
            continue
        if isinstance(value, dict) and value.get("must_understand") is False:
            extra[key] = value
        else:
            raise UnsupportedError(
                f"{where}: unknown field {key!r} must be understood (no 'must_understand': false)"
            )
    return extra


def _chunk_key_encoding(value: Any, where: str) -> tuple[str, str]:
    if value is None:
        return ("default", "/")
    if isinstance(value, str):
        value = {"name": value}
    if not isinstance(value, dict):
        raise MetadataError(f"{where}: field 'chunk_key_encoding' is invalid: {value!r}")
    name = value.get("name")
    config = value.get("configuration") or {}
    if name == "default":
        sep = config.get("separator", "/")
    elif name == "v2":
        sep = config.get("separator", ".")
    else:
        raise UnsupportedError(f"{where}: field 'chunk_key_encoding': unknown name {name!r}")
    if sep not in ("/", "."):
        raise MetadataError(f"{where}: field 'chunk_key_encoding': bad separator {sep!r}")
    return (name, sep)


def check_zero_chunks(shape: tuple[int, ...], chunks: tuple[int, ...], field_name: str,
                       where: str) -> None:
    """A chunk length of 0 is valid on an empty axis only (as zarr-python writes it)."""
    for axis, (s, c) in enumerate(zip(shape, chunks, strict=True)):
        if c == 0 and s != 0:
            raise MetadataError(f"{where}: field {field_name!r}: chunk length 0 on axis "
                                f"{axis} of length {s} (only an empty axis may have it)")


@dataclass(frozen=True)
class ArrayMetadataV3:
    """The contents of an array's ``zarr.json`` (immutable; use ``replace``)."""

    shape: tuple[int, ...]
    dtype: np.dtype
    chunk_shape: tuple[int, ...]
    fill_value: Any
    codecs: tuple[dict[str, Any], ...]
    chunk_key_encoding: tuple[str, str] = ("default", "/")
    attributes: dict[str, Any] = field(default_factory=dict)
    dimension_names: tuple[str | None, ...] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: axes whose stored chunk length is 0 (zarr-python writes 0 for a chunk of an empty
    #: axis): ``chunk_shape`` holds 1 there, the documents keep 0 while the axis is empty
    zero_chunk_axes: tuple[int, ...] = ()
    #: a record dtype read as the legacy ``structured`` (fill value base64): written back
    #: as it was, so the readers of the array (zarr-python < 3.2) keep reading it
    legacy_struct: bool = False
    #: a ``rectilinear`` chunk grid: per axis a regular chunk length or every chunk's
    #: length (None: the ``regular`` grid of ``chunk_shape``); ``chunk_shape`` then holds
    #: the longest chunk along each axis
    chunk_edges: tuple[AxisEdges, ...] | None = None

    zarr_format = 3

    def __post_init__(self) -> None:
        if self.chunk_edges is not None:
            object.__setattr__(self, "chunk_shape", max_lengths(self.chunk_edges))
        shape, chunks, zeros = zero_chunks(self.shape, self.chunk_shape, self.zero_chunk_axes)
        object.__setattr__(self, "chunk_shape", chunks)
        object.__setattr__(self, "zero_chunk_axes", zeros)
        check_grid(shape, chunks, np.dtype(self.dtype).itemsize, "array metadata")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def chunks(self) -> tuple[int, ...]:
        return self.chunk_shape

    @property
    def order(self) -> str:
        """'F' when the first codec is a transpose reversing the axes, else 'C'."""
        if self.codecs and self.codecs[0]["name"] == "transpose" and self.ndim > 1:
            order = self.codecs[0]["configuration"].get("order")
            if list(order) == list(range(self.ndim))[::-1]:
                return "F"
        return "C"

    def chunk_key(self, coords: tuple[int, ...]) -> str:
        """Store key of a chunk, relative to the array's path."""
        name, sep = self.chunk_key_encoding
        if name == "default":
            return sep.join(("c", *map(str, coords)))
        return sep.join(map(str, coords)) if coords else "0"

    def replace(self, **changes: Any) -> ArrayMetadataV3:
        """A copy with ``changes``; a new shape grows a rectilinear grid's explicit axes
        to cover it (``grown_edges``)."""
        if self.chunk_edges is not None and "shape" in changes and "chunk_edges" not in changes:
            edges = grown_edges(self.chunk_edges, changes["shape"])
            inner = self._inner_chunks()
            for axis, (old, new) in enumerate(zip(self.chunk_edges, edges, strict=True)):
                if inner and new != old and new[-1] % inner[axis]:  # type: ignore[index]
                    raise ValueError(
                        f"cannot resize to {tuple(changes['shape'])}: the shard added on "
                        f"axis {axis} would have length {new[-1]}, not a multiple of the "
                        f"inner chunk length {inner[axis]}")  # type: ignore[index]
            changes["chunk_edges"] = edges
        return replace(self, **changes)

    def _inner_chunks(self) -> list[int] | None:
        """The inner chunk shape of a sharded array (None: not sharded)."""
        if len(self.codecs) == 1 and self.codecs[0].get("name") == "sharding_indexed":
            return list((self.codecs[0].get("configuration") or {}).get("chunk_shape", []))
        return None

    # -- JSON ----------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        name, sep = self.chunk_key_encoding
        doc: dict[str, Any] = {
            "zarr_format": 3,
            "node_type": "array",
            "shape": list(self.shape),
            "data_type": v3_name_of(self.dtype, legacy_struct=self.legacy_struct),
            "chunk_grid": edges_to_json(self.chunk_edges) if self.chunk_edges is not None
            else {"name": "regular", "configuration": {"chunk_shape": stored_chunks(
                self.shape, self.chunk_shape, self.zero_chunk_axes)}},
            "chunk_key_encoding": {"name": name, "configuration": {"separator": sep}},
            # v3 stores records little-endian: so are the bytes of a legacy (base64) fill
            "fill_value": fill_value_to_json(self.fill_value, self.dtype.newbyteorder("<")
                                             if self.dtype.kind == "V" else self.dtype,
                                             struct_fields=not self.legacy_struct),
            "codecs": [dict(c) for c in self.codecs],
            "attributes": self.attributes,
        }
        if self.dimension_names is not None:
            doc["dimension_names"] = list(self.dimension_names)
        doc.update(self.extra)
        return doc

    def documents(self, where: str = "zarr.json") -> dict[str, bytes]:
        """The documents to store, by key relative to the node's path."""
        return {"zarr.json": dump_json(self.to_json(), where)}

    @classmethod
    def from_json(cls, doc: dict[str, Any], where: str) -> ArrayMetadataV3:
        if doc.get("zarr_format") != 3:
            raise MetadataError(f"{where}: field 'zarr_format' must be 3, got {doc.get('zarr_format')!r}")
        if doc.get("node_type") != "array":
            raise MetadataError(f"{where}: field 'node_type' must be 'array'")
        extra = _check_extensions(doc, _ARRAY_FIELDS, where)
        shape = shape_tuple(require(doc, "shape", list, where), "shape", where)
        data_type = require(doc, "data_type", (str, dict), where)
        dtype = dtype_from_v3(data_type, where)
        grid = require(doc, "chunk_grid", dict, where)
        edges = None
        if grid.get("name") == "rectilinear":
            edges = edges_from_json(grid.get("configuration"), shape, where)
            chunk_shape = max_lengths(edges)
        elif grid.get("name") != "regular":
            raise UnsupportedError(f"{where}: field 'chunk_grid': unknown chunk grid "
                                   f"{grid.get('name')!r} (known: 'regular', 'rectilinear')")
        else:
            chunk_shape = shape_tuple((grid.get("configuration") or {}).get("chunk_shape"),
                                      "chunk_grid.chunk_shape", where)
        if len(chunk_shape) != len(shape):
            raise MetadataError(f"{where}: field 'chunk_grid': chunk_shape {list(chunk_shape)} "
                                f"does not match the {len(shape)}-d shape")
        check_zero_chunks(shape, chunk_shape, "chunk_grid.chunk_shape", where)
        check_chunk_nbytes(chunk_shape, dtype.itemsize, "chunk_grid.chunk_shape", where)
        if doc.get("storage_transformers"):
            raise UnsupportedError(f"{where}: field 'storage_transformers' is not supported "
                                   f"({doc['storage_transformers']!r})")
        codecs = require(doc, "codecs", list, where)
        if not codecs:
            raise MetadataError(f"{where}: field 'codecs' must list at least one codec")
        dim_names = doc.get("dimension_names")
        if dim_names is not None:
            if not isinstance(dim_names, list) or len(dim_names) != len(shape) or not all(
                n is None or isinstance(n, str) for n in dim_names
            ):
                raise MetadataError(f"{where}: field 'dimension_names' is invalid: {dim_names!r}")
            dim_names = tuple(dim_names)
        attributes = doc.get("attributes", {})
        if not isinstance(attributes, dict):
            raise MetadataError(f"{where}: field 'attributes' must be an object")
        return cls(
            shape=shape,
            dtype=dtype,
            chunk_shape=chunk_shape,
            fill_value=parse_fill_value(require(doc, "fill_value", object, where), dtype, where),
            codecs=tuple(normalize_codec_json(c, where) for c in codecs),
            chunk_key_encoding=_chunk_key_encoding(doc.get("chunk_key_encoding"), where),
            attributes=attributes,
            dimension_names=dim_names,
            extra=extra,
            legacy_struct=isinstance(data_type, dict)
            and data_type.get("name") == LEGACY_STRUCT_NAME,
            chunk_edges=edges,
        )


@dataclass(frozen=True)
class GroupMetadataV3:
    """The contents of a group's ``zarr.json``."""

    attributes: dict[str, Any] = field(default_factory=dict)
    consolidated_metadata: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    zarr_format = 3

    def replace(self, **changes: Any) -> GroupMetadataV3:
        return replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"zarr_format": 3, "node_type": "group", "attributes": self.attributes}
        if self.consolidated_metadata is not None:
            doc["consolidated_metadata"] = self.consolidated_metadata
        doc.update(self.extra)
        return doc

    def documents(self, where: str = "zarr.json") -> dict[str, bytes]:
        return {"zarr.json": dump_json(self.to_json(), where)}

    @classmethod
    def from_json(cls, doc: dict[str, Any], where: str) -> GroupMetadataV3:
        if doc.get("zarr_format") != 3:
            raise MetadataError(f"{where}: field 'zarr_format' must be 3")
        if doc.get("node_type") != "group":
            raise MetadataError(f"{where}: field 'node_type' must be 'group'")
        extra = _check_extensions(doc, _GROUP_FIELDS, where)
        attributes = doc.get("attributes", {})
        if not isinstance(attributes, dict):
            raise MetadataError(f"{where}: field 'attributes' must be an object")
        consolidated = doc.get("consolidated_metadata")
        if consolidated is not None and not isinstance(consolidated, dict):
            raise MetadataError(f"{where}: field 'consolidated_metadata' must be an object")
        return cls(attributes=attributes, consolidated_metadata=consolidated, extra=extra)
