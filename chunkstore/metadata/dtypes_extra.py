"""Data types beyond numbers: fixed-length bytes and unicode, variable-length strings and
bytes, datetime64 and timedelta64 — named and filled exactly as zarr-python 3 writes them.

| NumPy                   | v3 ``data_type``                                          | v2 ``dtype``   |
|-------------------------|-----------------------------------------------------------|----------------|
| ``S5``                  | ``{"name": "null_terminated_bytes", ... length_bytes 5}`` | ``"|S5"``      |
| ``U5``                  | ``{"name": "fixed_length_utf32", ... length_bytes 20}``   | ``"<U5"``      |
| ``StringDType()`` (str) | ``"string"`` (codec ``vlen-utf8``)                        | ``"|O"`` + filter ``vlen-utf8`` |
| ``object`` of bytes     | ``"variable_length_bytes"`` (codec ``vlen-bytes``)        | ``"|O"`` + filter ``vlen-bytes`` |
| ``M8[ns]`` / ``m8[s]``  | ``{"name": "numpy.datetime64", unit, scale_factor}``      | ``"<M8[ns]"``  |
| ``m8`` / ``M8``         | unit ``"generic"``, scale_factor 1 (a unit-less count)    | ``"<m8"``      |
| ``V5``                  | ``{"name": "raw_bytes", ... length_bytes 5}``             | ``"|V5"``      |
| ``[("a","<i4"),...]``   | ``{"name": "struct", "configuration": {"fields":         | ``[["a", "<i4"], ...]`` |
|                         | [{"name": "a", "data_type": "int32"}, ...]}}`` (stored    |                |
|                         | little-endian; legacy ``structured`` read and kept)       |                |

Fill values: bytes and raw bytes as base64 (``b"ab"`` -> ``"YWI="``), unicode and strings
as JSON strings, datetimes as the int64 count (NaT is ``-9223372036854775808``, the
default), records in v3 ``struct`` as ``{field: value}`` (each field's own encoding), in v2
and legacy v3 ``structured`` as base64 of their raw bytes (zeros by default).

Structured dtypes are those zarr-python 3 reads and writes: named fields of the types
above (numbers, fixed-length bytes/unicode, datetimes, raw bytes; nested structures), no
object or variable-length fields, no sub-array fields. Padding and offsets (``align=True``) cannot
be described in the metadata: such a dtype is stored packed, as zarr-python does.
A v2 ``|O`` array's meaning comes from its object codec (the first filter); object
codecs other than the two string codecs (pickle, msgpack2, json2, vlen-array) need
``allow_unsafe_codecs=True``.

This module names the types (v3 names, v2 strings, object codecs, a user's ``dtype=``);
``dtypes_kinds`` holds the kinds and limits, ``dtypes_structured`` the record types and
``dtypes_fill`` the fill values (all importable from here, as before).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from chunkstore.errors import MetadataError, UnsupportedError
from chunkstore.metadata.dtypes_fill import (
    default_extra_fill,
    extra_fill_equal,
    extra_fill_to_json,
    normalize_extra_fill,
    parse_extra_fill,
)
from chunkstore.metadata.dtypes_kinds import (
    EXTRA_KINDS,
    MAX_ITEMSIZE,
    MAX_SCALE_FACTOR,
    NAT,
    NUMPY_DTYPE_ERRORS,
    OBJECT_CODEC_IDS,
    TIME_NAMES,
    TIME_UNITS,
    VLEN_CODEC_IDS,
    check_extra_dtype,
    config_value,
    infer_object_dtype,
    is_vlen,
    numpy_dtype,
    string_dtype,
)
from chunkstore.metadata.dtypes_structured import (
    FIELD_KINDS,
    is_structured,
    packed_structured,
    raw_bytes_from_v3,
    raw_bytes_to_v3,
    struct_fill_from_json,
    struct_fill_to_json,
    structured_dtype,
    structured_from_v2,
    structured_from_v3,
    structured_to_v2,
    structured_to_v3,
)

__all__ = ["EXTRA_KINDS", "FIELD_KINDS", "MAX_ITEMSIZE", "MAX_SCALE_FACTOR", "NAT",
           "NUMPY_DTYPE_ERRORS", "OBJECT_CODEC_IDS", "VLEN_CODEC_IDS", "check_extra_dtype",
           "default_extra_fill", "extra_dtype_from_v3", "extra_fill_equal",
           "extra_fill_to_json", "extra_v2_str", "extra_v3_name", "infer_object_dtype",
           "is_structured", "is_vlen", "normalize_extra_fill", "numpy_dtype",
           "object_codec_id", "packed_structured", "parse_extra_fill",
           "refine_v2_object_dtype", "string_dtype", "struct_fill_from_json",
           "struct_fill_to_json", "structured_dtype",
           "structured_from_v2", "structured_from_v3", "structured_to_v2",
           "structured_to_v3", "user_dtype", "with_object_codec"]


def user_dtype(dtype: Any, where: str = "array") -> np.dtype:
    """A user's dtype argument as a NumPy dtype, spelled as zarr-python accepts it.

    ``str``, ``"str"``, ``"string"`` and ``StringDType()`` mean variable-length UTF-8;
    ``bytes`` and ``"variable_length_bytes"`` mean variable-length bytes (object dtype).
    """
    if dtype is str or (isinstance(dtype, str) and dtype in ("str", "string")):
        return string_dtype()
    if dtype is bytes or (isinstance(dtype, str) and dtype == "variable_length_bytes"):
        return np.dtype("O")
    try:
        np_dtype = np.dtype(dtype)
    except NUMPY_DTYPE_ERRORS as e:
        raise UnsupportedError(f"{where}: unsupported dtype {dtype!r}") from e
    if np_dtype.kind == "V":
        return packed_structured(np_dtype, where)
    return np_dtype


# -- v3 names ----------------------------------------------------------------------------
def extra_v3_name(dtype: np.dtype, where: str) -> Any:
    """The v3 ``data_type`` (a name or a ``{"name", "configuration"}`` object)."""
    kind = dtype.kind
    check_extra_dtype(dtype, where)
    if kind == "S":
        return {"name": "null_terminated_bytes", "configuration": {"length_bytes": dtype.itemsize}}
    if kind == "U":
        return {"name": "fixed_length_utf32", "configuration": {"length_bytes": dtype.itemsize}}
    if kind == "T":
        return "string"
    if kind == "O":
        return "variable_length_bytes"
    if kind in "Mm":
        unit, scale = np.datetime_data(dtype)
        return {"name": TIME_NAMES[kind], "configuration": {"unit": unit, "scale_factor": scale}}
    if kind == "V" and dtype.names is None and dtype.subdtype is None:
        return raw_bytes_to_v3(dtype)
    raise UnsupportedError(f"{where}: data type {dtype!r} is not supported in Zarr v3 here")


def extra_dtype_from_v3(data_type: Any, where: str) -> np.dtype | None:
    """Parse a non-numeric v3 ``data_type``; None if the name is not one of ours."""
    if data_type == "string":
        return string_dtype()
    if data_type == "variable_length_bytes":
        return np.dtype("O")
    if not isinstance(data_type, dict):
        return None
    name = data_type.get("name")
    if name in ("null_terminated_bytes", "fixed_length_utf32"):
        length = config_value(data_type, "length_bytes", where)
        unit = 4 if name == "fixed_length_utf32" else 1
        if isinstance(length, bool) or not isinstance(length, int) or length < 1 or length % unit:
            raise MetadataError(f"{where}: field 'data_type': bad length_bytes {length!r} for "
                                f"{name}")
        if length > MAX_ITEMSIZE:
            raise MetadataError(f"{where}: field 'data_type': length_bytes {length} of {name} "
                                f"is more than the {MAX_ITEMSIZE} NumPy supports")
        return numpy_dtype(f"S{length}" if unit == 1 else f"U{length // 4}", where)
    if name == "raw_bytes":
        return raw_bytes_from_v3(data_type, where)
    if name in ("numpy.datetime64", "numpy.timedelta64"):
        unit = config_value(data_type, "unit", where)
        scale = config_value(data_type, "scale_factor", where)
        if unit not in TIME_UNITS or isinstance(scale, bool) or not isinstance(scale, int) \
                or not 1 <= scale <= MAX_SCALE_FACTOR or (unit == "generic" and scale != 1):
            raise MetadataError(f"{where}: field 'data_type': bad unit/scale_factor "
                                f"{unit!r}/{scale!r} for {name} (scale_factor must be "
                                f"1..{MAX_SCALE_FACTOR}, 1 for 'generic')")
        code = "M8" if name == "numpy.datetime64" else "m8"
        if unit == "generic":
            return np.dtype(code)
        return numpy_dtype(f"{code}[{'' if scale == 1 else scale}{unit}]", where)
    return None


# -- v2 dtype strings --------------------------------------------------------------------
def extra_v2_str(dtype: np.dtype, where: str = "array") -> str:
    """The v2 ``dtype`` string: ``"|S5"``, ``"<U5"``, ``"<M8[ns]"``, ``"|V5"``, ``"|O"``."""
    check_extra_dtype(dtype, where)
    if dtype.kind in "OT":
        return "|O"
    return dtype.str


def object_codec_id(filters: Any) -> str | None:
    """The id of a v2 array's object codec: the first filter that is one (a
    ``categorize`` of objects is one too, as in zarr-python 2: it maps each object to
    its label's number)."""
    for f in filters or ():
        cid = f.get("id") if isinstance(f, dict) else getattr(f, "codec_id", None)
        if cid in OBJECT_CODEC_IDS:
            return cid
        if cid == "categorize":
            of = f.get("dtype") if isinstance(f, dict) else getattr(f, "dtype", None)
            try:
                if np.dtype(of).kind == "O":
                    return cid
            except TypeError:
                pass
    return None


def with_object_codec(dtype: np.dtype, filters: tuple[dict[str, Any], ...] | None, where: str
                      ) -> tuple[dict[str, Any], ...] | None:
    """v2 filters of a new array, led by the object codec its dtype needs (as zarr-python)."""
    if dtype.kind not in "OT":
        if object_codec_id(filters) is not None:
            raise MetadataError(f"{where}: object codec filter on non-object dtype {dtype}")
        return filters
    cid = object_codec_id(filters)
    if cid is None:
        return ({"id": "vlen-utf8" if dtype.kind == "T" else "vlen-bytes"}, *(filters or ()))
    if dtype.kind == "T" and cid not in ("vlen-utf8", "categorize"):
        raise MetadataError(f"{where}: a string array needs the vlen-utf8 object codec, got {cid!r}")
    return filters


def refine_v2_object_dtype(dtype: np.dtype, filters: Any, where: str) -> np.dtype:
    """A v2 ``|O`` dtype made precise by its object codec (strings -> StringDType)."""
    if dtype.kind != "O":
        return dtype
    cid = object_codec_id(filters)
    if cid is None:
        raise MetadataError(f"{where}: field 'filters': an object ('|O') array needs an object "
                            "codec filter (e.g. vlen-utf8), found none")
    return string_dtype() if cid == "vlen-utf8" else np.dtype("O")
