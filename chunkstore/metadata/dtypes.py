"""Data types and fill values: NumPy dtypes <-> Zarr v3 names and v2 dtype strings.

Fill values are encoded exactly as the specs say: numbers as JSON numbers, non-finite
floats as "NaN" / "Infinity" / "-Infinity", complex as ``[real, imag]``; on read the
v3 hex form of the raw bits (``"0x7fc00001"``) is accepted too, its width checked
against the type.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from chunkstore.errors import MetadataError, UnsupportedError
from chunkstore.metadata.dtypes_extra import (
    EXTRA_KINDS,
    NUMPY_DTYPE_ERRORS,
    default_extra_fill,
    extra_dtype_from_v3,
    extra_fill_equal,
    extra_fill_to_json,
    extra_v2_str,
    extra_v3_name,
    normalize_extra_fill,
    packed_structured,
    parse_extra_fill,
    struct_fill_from_json,
    struct_fill_to_json,
    structured_from_v2,
    structured_from_v3,
    structured_to_v2,
    structured_to_v3,
)
from chunkstore.metadata.dtypes_structured import LEGACY_STRUCT_NAME, STRUCT_NAME, is_structured

# v3 core data type names -> NumPy dtype (native byte order)
V3_NUMERIC: dict[str, np.dtype] = {
    name: np.dtype(name)
    for name in (
        "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "float16", "float32", "float64", "complex64", "complex128",
    )
}
V2_KINDS = "biufc"  # bool, signed, unsigned, float, complex
#: the v3 names of types without configuration (also spelled ``{"name": "int32"}``)
_PLAIN_NAMES = frozenset(V3_NUMERIC) | {"string", "variable_length_bytes"}


def v3_name_of(dtype: np.dtype, where: str = "array", legacy_struct: bool = False) -> Any:
    """The v3 ``data_type`` of a NumPy dtype (a name, or an object for parametrized types);
    a record is a ``struct``, or with ``legacy_struct`` the ``structured`` it was read as."""
    dtype = np.dtype(dtype)
    if dtype.kind == "V":
        packed = packed_structured(dtype, where)
        if packed.names is not None:
            return structured_to_v3(packed, lambda d: v3_name_of(d, where, legacy_struct),
                                    legacy_struct)
    if dtype.kind in EXTRA_KINDS:
        return extra_v3_name(dtype, where)
    name = dtype.newbyteorder("=").name if dtype.kind in V2_KINDS else None
    if name in V3_NUMERIC:
        return name
    raise UnsupportedError(f"{where}: data type {dtype!r} is not supported in Zarr v3 here")


def dtype_from_v3(data_type: Any, where: str) -> np.dtype:
    """Parse a v3 ``data_type`` field."""
    if isinstance(data_type, str) and data_type in V3_NUMERIC:
        return V3_NUMERIC[data_type]
    if isinstance(data_type, dict) and data_type.get("name") in _PLAIN_NAMES \
            and set(data_type) <= {"name", "configuration"} \
            and data_type.get("configuration", {}) == {}:
        data_type = data_type["name"]  # {"name": "int32"}: a type without configuration
        if data_type in V3_NUMERIC:
            return V3_NUMERIC[data_type]
    if isinstance(data_type, dict) and data_type.get("name") in (STRUCT_NAME, LEGACY_STRUCT_NAME):
        return structured_from_v3(data_type, where, dtype_from_v3)
    extra = extra_dtype_from_v3(data_type, where)
    if extra is not None:
        return extra
    raise UnsupportedError(f"{where}: field 'data_type': unsupported data type {data_type!r}")


def dtype_from_v2(dtype_str: Any, where: str) -> np.dtype:
    """Parse a v2 ``dtype`` field: a NumPy type string with byte order, or the fields of
    a structured dtype, ``[["a", "<i4"], ["b", "<f8"]]``."""
    if isinstance(dtype_str, list):
        return structured_from_v2(dtype_str, where, dtype_from_v2)
    if not isinstance(dtype_str, str):
        raise MetadataError(f"{where}: field 'dtype': {dtype_str!r} is neither a type string "
                            "nor a list of structured fields")
    try:
        dtype = np.dtype(dtype_str)
    except NUMPY_DTYPE_ERRORS as e:  # numpy raises several kinds ("0:", "01", "<U9999999999")
        raise MetadataError(f"{where}: field 'dtype': invalid dtype {dtype_str!r}") from e
    if dtype.kind == "V" and (dtype.names is not None or dtype.subdtype is not None):
        raise UnsupportedError(f"{where}: field 'dtype': {dtype_str!r} is not raw bytes; a "
                               "structured dtype is written as its fields, [[name, type], ...]")
    if dtype.kind not in V2_KINDS + EXTRA_KINDS or dtype.kind == "T":
        raise UnsupportedError(f"{where}: field 'dtype': unsupported data type {dtype_str!r}")
    if dtype.kind in EXTRA_KINDS:
        extra_v2_str(dtype, f"{where}: field 'dtype'")  # refuses zero-length types
    return dtype


def v2_str_of(dtype: np.dtype) -> str | list[list[Any]]:
    """The v2 ``dtype``: a string, e.g. ``"<f8"``, ``"|b1"``, ``"|V5"``; for a structured
    dtype the list of its fields, ``[["a", "<i4"], ["b", "<f8"]]``."""
    dtype = np.dtype(dtype)
    if dtype.kind == "V":
        packed = packed_structured(dtype, "array")
        return packed.str if packed.names is None else structured_to_v2(packed, v2_str_of)
    if dtype.kind in EXTRA_KINDS:
        return extra_v2_str(dtype)
    if dtype.kind not in V2_KINDS:
        raise UnsupportedError(f"data type {dtype!r} is not supported in Zarr v2 here")
    return dtype.str


# -- fill values -----------------------------------------------------------------------
_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_FLOAT_STRUCT = {2: "e", 4: "f", 8: "d"}


def _float_from_json(value: Any, dtype: np.dtype, where: str) -> float:
    if isinstance(value, bool):
        raise MetadataError(f"{where}: field 'fill_value': {value!r} is not a float")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        if value in _NONFINITE:
            return _NONFINITE[value]
        if value.startswith("0x"):
            width = 2 * dtype.itemsize
            digits = value[2:]
            if len(digits) != width:
                raise MetadataError(
                    f"{where}: field 'fill_value': hex {value!r} must have {width} digits "
                    f"for {dtype.name}"
                )
            try:
                raw = bytes.fromhex(digits)
            except ValueError as e:
                raise MetadataError(f"{where}: field 'fill_value': bad hex {value!r}") from e
            return np.frombuffer(raw, dtype=dtype.newbyteorder(">"))[0]
    raise MetadataError(f"{where}: field 'fill_value': {value!r} is not valid for {dtype.name}")


def _float_to_json(value: Any, dtype: np.dtype) -> Any:
    f = float(value)
    if math.isnan(f):
        # a non-default NaN payload is kept exactly, as hex of the raw bits
        canonical = np.array(np.nan, dtype=dtype).tobytes()
        raw = np.array(value, dtype=dtype).tobytes()
        if raw != canonical and dtype.itemsize in _FLOAT_STRUCT:
            return "0x" + np.array(value, dtype=dtype).astype(dtype.newbyteorder(">")).tobytes().hex()
        return "NaN"
    if math.isinf(f):
        return "Infinity" if f > 0 else "-Infinity"
    if f == 0 and math.copysign(1.0, f) < 0:
        return -0.0  # not 0: its sign is the fill's bits
    return int(f) if f.is_integer() and abs(f) < 2**53 else f


def parse_fill_value(value: Any, dtype: np.dtype, where: str, *, allow_none: bool = False):
    """Decode a JSON fill value into a NumPy scalar of ``dtype`` (None if allowed)."""
    if value is None:
        if allow_none:
            return None
        raise MetadataError(f"{where}: field 'fill_value' must not be null")
    kind = dtype.kind
    if is_structured(dtype) and isinstance(value, dict):  # v3 struct: a value per field
        return struct_fill_from_json(value, dtype, where, parse_fill_value)
    if kind in EXTRA_KINDS:
        return parse_extra_fill(value, dtype, where)
    try:
        if kind == "b":
            if not isinstance(value, bool | int) or (isinstance(value, int) and value not in (0, 1)):
                raise MetadataError(f"{where}: field 'fill_value': {value!r} is not a bool")
            return np.bool_(bool(value))
        if kind in "iu":
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if isinstance(value, bool) or not isinstance(value, int):
                raise MetadataError(f"{where}: field 'fill_value': {value!r} is not an integer")
            info = np.iinfo(dtype)
            if not info.min <= value <= info.max:
                raise MetadataError(
                    f"{where}: field 'fill_value': {value} is out of range for {dtype.name}"
                )
            return dtype.type(value)
        if kind == "f":
            return np.array(_float_from_json(value, dtype, where), dtype=dtype)[()]
        if kind == "c":
            if not isinstance(value, list | tuple) or len(value) != 2:
                raise MetadataError(
                    f"{where}: field 'fill_value': complex fill must be [real, imag], "
                    f"got {value!r}"
                )
            part = np.dtype(f"f{dtype.itemsize // 2}")
            re = _float_from_json(value[0], part, where)
            im = _float_from_json(value[1], part, where)
            return np.array(complex(re, im), dtype=dtype)[()]
    except MetadataError:
        raise
    except (TypeError, ValueError, OverflowError) as e:
        raise MetadataError(f"{where}: field 'fill_value': {value!r} invalid: {e}") from e
    raise UnsupportedError(f"{where}: field 'fill_value' for data type {dtype!r}")


def fill_value_to_json(value: Any, dtype: np.dtype, struct_fields: bool = False) -> Any:
    """Encode a fill value for JSON as the specs require: a record as ``{field: value}``
    with ``struct_fields`` (v3 ``struct``), else as base64 of its bytes (v2, legacy v3)."""
    if value is None:
        return None
    kind = dtype.kind
    if struct_fields and is_structured(dtype):
        return struct_fill_to_json(value, dtype,
                                   lambda v, d: fill_value_to_json(v, d, struct_fields=True))
    if kind in EXTRA_KINDS:
        return extra_fill_to_json(value, dtype)
    if kind == "b":
        return bool(value)
    if kind in "iu":
        return int(value)
    if kind == "f":
        return _float_to_json(np.array(value, dtype=dtype)[()], dtype)
    if kind == "c":
        c = complex(value)
        part = np.dtype(f"f{dtype.itemsize // 2}")
        return [_float_to_json(part.type(c.real), part), _float_to_json(part.type(c.imag), part)]
    raise UnsupportedError(f"cannot encode a fill value for data type {dtype!r}")


def normalize_fill_value(value: Any, dtype: np.dtype, where: str = "array"):
    """Turn a user-given fill value into a NumPy scalar of ``dtype`` (None stays None)."""
    if value is None:
        return None
    if dtype.kind in EXTRA_KINDS:
        return normalize_extra_fill(value, dtype, where)
    try:
        arr = np.array(value, dtype=dtype)
    except (TypeError, ValueError, OverflowError) as e:
        raise MetadataError(f"{where}: fill_value {value!r} does not fit {dtype}") from e
    if arr.ndim != 0:
        raise MetadataError(f"{where}: fill_value must be a scalar, got {value!r}")
    if dtype.kind in "iu" and not isinstance(value, np.generic | int | bool):
        if isinstance(value, float) and not float(value).is_integer():
            raise MetadataError(f"{where}: fill_value {value!r} is not an integer")
    return arr[()]


def default_fill_value(dtype: np.dtype):
    """The fill value used when none is given: zero of the type (NaT / "" as zarr-python)."""
    if np.dtype(dtype).kind in EXTRA_KINDS:
        return default_extra_fill(np.dtype(dtype))
    return np.zeros((), dtype=dtype)[()]


def fill_equal(a: Any, b: Any) -> bool:
    """Fill values compare equal, NaN to NaN included (bitwise for floats)."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, str | bytes) or isinstance(b, str | bytes):
        return extra_fill_equal(a, b)
    a_arr, b_arr = np.asarray(a), np.asarray(b)
    return a_arr.dtype == b_arr.dtype and a_arr.tobytes() == b_arr.tobytes()


__all__ = [
    "V3_NUMERIC", "v3_name_of", "dtype_from_v3", "dtype_from_v2", "v2_str_of",
    "parse_fill_value", "fill_value_to_json", "normalize_fill_value", "default_fill_value",
    "fill_equal",
]
