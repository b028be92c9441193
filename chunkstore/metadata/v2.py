"""Zarr v2 ``.zarray`` / ``.zgroup`` / ``.zattrs`` documents."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from chunkstore.errors import MetadataError
from chunkstore.metadata.dtypes import (
    dtype_from_v2,
    fill_value_to_json,
    parse_fill_value,
    v2_str_of,
)
from chunkstore.metadata.dtypes_extra import refine_v2_object_dtype
from chunkstore.metadata.json_io import (
    check_chunk_nbytes,
    check_grid,
    dump_json,
    require,
    shape_tuple,
)
from chunkstore.metadata.v3 import check_zero_chunks, stored_chunks, zero_chunks

_ARRAY_FIELDS = {
    "zarr_format", "shape", "chunks", "dtype", "compressor", "fill_value", "order",
    "filters", "dimension_separator",
}


def _codec_config(value: Any, field_name: str, where: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("id"), str):
        raise MetadataError(f"{where}: field {field_name!r}: invalid codec config {value!r}")
    return dict(value)


def _v2_fill_json(value: Any, dtype: np.dtype) -> Any:
    """v2 has no hex form of floats: a NaN of any payload or sign is written "NaN"."""
    out = fill_value_to_json(value, dtype)
    if dtype.kind not in "fc":
        return out
    def plain(v: Any) -> Any:
        return "NaN" if isinstance(v, str) and v.startswith("0x") else v
    return [plain(v) for v in out] if isinstance(out, list) else plain(out)


def _as_stored(value: Any, dtype: np.dtype) -> Any:
    """The fill value every reader of the document sees: a float NaN with a payload or
    a sign (``-np.nan``, ``0x7fc00001``) is stored as "NaN", which reads back as the
    canonical NaN. The writing handle uses the same value, so it compares chunks with
    the fill as stored: a chunk of the other NaN is kept, and reads back bit for bit."""
    if value is None or dtype.kind not in "fc":
        return value
    return parse_fill_value(_v2_fill_json(value, dtype), dtype, "array metadata")


@dataclass(frozen=True)
class ArrayMetadataV2:
    """The contents of ``.zarray`` plus the attributes from ``.zattrs``."""

    shape: tuple[int, ...]
    dtype: np.dtype
    chunk_shape: tuple[int, ...]
    fill_value: Any
    compressor: dict[str, Any] | None = None
    filters: tuple[dict[str, Any], ...] | None = None
    order: str = "C"
    dimension_separator: str = "."
    attributes: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    #: axes whose stored chunk length is 0 (zarr-python writes 0 for a chunk of an empty
    #: axis): ``chunk_shape`` holds 1 there, the documents keep 0 while the axis is empty
    zero_chunk_axes: tuple[int, ...] = ()

    zarr_format = 2
    #: a v2 grid is regular: no chunk edges (``ArrayMetadataV3.chunk_edges``)
    chunk_edges = None

    def __post_init__(self) -> None:
        shape, chunks, zeros = zero_chunks(self.shape, self.chunk_shape, self.zero_chunk_axes)
        object.__setattr__(self, "chunk_shape", chunks)
        object.__setattr__(self, "zero_chunk_axes", zeros)
        object.__setattr__(self, "fill_value", _as_stored(self.fill_value, np.dtype(self.dtype)))
        check_grid(shape, chunks, np.dtype(self.dtype).itemsize, "array metadata")

    @property
    def dimension_names(self) -> tuple[str, ...] | None:
        """From the ``_ARRAY_DIMENSIONS`` attribute (xarray's v2 convention), if valid."""
        names = self.attributes.get("_ARRAY_DIMENSIONS")
        if (isinstance(names, list) and len(names) == len(self.shape)
                and all(isinstance(n, str) for n in names)):
            return tuple(names)
        return None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def chunks(self) -> tuple[int, ...]:
        return self.chunk_shape

    def chunk_key(self, coords: tuple[int, ...]) -> str:
        """Store key of a chunk relative to the array's path (``"0"`` for 0-d)."""
        return self.dimension_separator.join(map(str, coords)) if coords else "0"

    def replace(self, **changes: Any) -> ArrayMetadataV2:
        return replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        doc = {
            "zarr_format": 2,
            "shape": list(self.shape),
            "chunks": stored_chunks(self.shape, self.chunk_shape, self.zero_chunk_axes),
            "dtype": v2_str_of(self.dtype),
            "compressor": self.compressor,
            "fill_value": _v2_fill_json(self.fill_value, self.dtype),
            "order": self.order,
            "filters": list(self.filters) if self.filters else None,
            "dimension_separator": self.dimension_separator,
        }
        doc.update(self.extra)
        return doc

    def documents(self, where: str = ".zarray") -> dict[str, bytes]:
        return {
            ".zarray": dump_json(self.to_json(), where),
            ".zattrs": dump_json(self.attributes, where.replace(".zarray", ".zattrs")),
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any], where: str, attributes: dict | None = None) -> ArrayMetadataV2:
        if doc.get("zarr_format") != 2:
            raise MetadataError(f"{where}: field 'zarr_format' must be 2, got {doc.get('zarr_format')!r}")
        shape = shape_tuple(require(doc, "shape", list, where), "shape", where)
        chunks = shape_tuple(require(doc, "chunks", list, where), "chunks", where)
        if len(chunks) != len(shape):
            raise MetadataError(f"{where}: field 'chunks' {list(chunks)} does not match the "
                                f"{len(shape)}-d shape")
        check_zero_chunks(shape, chunks, "chunks", where)
        dtype = dtype_from_v2(require(doc, "dtype", object, where), where)
        order = doc.get("order", "C")
        if order not in ("C", "F"):
            raise MetadataError(f"{where}: field 'order' must be 'C' or 'F', got {order!r}")
        sep = doc.get("dimension_separator", ".")
        if sep is None:
            sep = "."
        if sep not in (".", "/"):
            raise MetadataError(f"{where}: field 'dimension_separator' must be '.' or '/'")
        filters = doc.get("filters")
        if filters is not None:
            if not isinstance(filters, list):
                raise MetadataError(f"{where}: field 'filters' must be a list or null")
            if any(f is None for f in filters):
                raise MetadataError(f"{where}: field 'filters' has a null entry")
            filters = tuple(_codec_config(f, "filters", where) for f in filters) or None
        dtype = refine_v2_object_dtype(dtype, filters, where)
        check_chunk_nbytes(chunks, dtype.itemsize, "chunks", where)
        return cls(
            shape=shape,
            dtype=dtype,
            chunk_shape=chunks,
            fill_value=parse_fill_value(doc.get("fill_value"), dtype, where, allow_none=True),
            compressor=_codec_config(doc.get("compressor"), "compressor", where),
            filters=filters,
            order=order,
            dimension_separator=sep,
            attributes=attributes or {},
            extra={k: v for k, v in doc.items() if k not in _ARRAY_FIELDS},
        )


@dataclass(frozen=True)
class GroupMetadataV2:
    """A v2 group: ``.zgroup`` plus ``.zattrs``."""

    attributes: dict[str, Any] = field(default_factory=dict)

    zarr_format = 2

    def replace(self, **changes: Any) -> GroupMetadataV2:
        return replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        return {"zarr_format": 2}

    def documents(self, where: str = ".zgroup") -> dict[str, bytes]:
        return {
            ".zgroup": dump_json({"zarr_format": 2}, where),
            ".zattrs": dump_json(self.attributes, where.replace(".zgroup", ".zattrs")),
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any], where: str, attributes: dict | None = None) -> GroupMetadataV2:
        if doc.get("zarr_format") != 2:
            raise MetadataError(f"{where}: field 'zarr_format' must be 2")
        return cls(attributes=attributes or {})
