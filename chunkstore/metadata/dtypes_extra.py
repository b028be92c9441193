"""Data types beyond numbers: fixed-length bytes and unicode, variable-length strings and
bytes, datetime64 and timedelta64 — named and filled exactly as zarr-python 3 writes them.

| NumPy                   | v3 ``data_type``                                          | v2 ``dtype``   |
|-------------------------|-----------------------------------------------------------|----------------|
| ``S5``                  | ``{"name": "null_terminated_bytes", ... length_bytes 5}`` | ``"|S5"``      |
| ``U5``                  | ``{"name": "fixed_length_utf32", ... length_bytes 20}``   | ``"<U5"``      |
| ``StringDType()`` (str) | ``"string"`` (codec ``vlen-utf8``)                        | ``"|O"`` + filter ``vlen-utf8`` |
| ``object`` of bytes     | ``"variable_length_bytes"`` (codec ``vlen-bytes``)        | ``"|O"`` + filter ``vlen-bytes`` |
| ``M8[ns]`` / ``m8[s]``  | ``{"name": "numpy.datetime64", unit, scale_factor}``      | ``"<M8[ns]"``  |
| ``[("a","<i4"),...]``   | ``{"name": "structured", "configuration": {"fields":     | ``[["a", "<i4"], ...]`` |
|                         | [["a", "int32"], ...]}}`` (fields little-endian)          |                |

Fill values: bytes as base64 (``b"ab"`` -> ``"YWI="``), unicode and strings as JSON
strings, datetimes as the int64 count (NaT is ``-9223372036854775808``, the default),
structured (record) values as base64 of their raw bytes (zeros by default).

Structured dtypes are those zarr-python 3 reads and writes: named fields of the types
above (numbers, fixed-length bytes/unicode, datetimes; nested structures), no object or
variable-length fields, no sub-array fields. Padding and offsets (``align=True``) cannot
be described in the metadata: such a dtype is stored packed, as zarr-python does.
A v2 ``|O`` array's meaning comes from its object codec (the first filter); object
codecs other than the two string codecs (pickle, msgpack2, json2, vlen-array) need
``allow_unsafe_codecs=True``.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import numpy as np

from ..errors import MetadataError, UnsupportedError

EXTRA_KINDS = "SUOTMmV"
NAT = int(np.iinfo(np.int64).min)
VLEN_CODEC_IDS = {"vlen-utf8": "T", "vlen-bytes": "O"}
OBJECT_CODEC_IDS = frozenset({"vlen-utf8", "vlen-bytes", "vlen-array", "pickle", "msgpack2",
                              "json2"})
_TIME_UNITS = ("Y", "M", "W", "D", "h", "m", "s", "ms", "us", "μs", "ns", "ps", "fs", "as")
_TIME_NAMES = {"M": "numpy.datetime64", "m": "numpy.timedelta64"}
#: NumPy's limits: an item of at most 2**31 - 1 bytes, a time scale factor below 2**31
MAX_ITEMSIZE = 2**31 - 1
MAX_SCALE_FACTOR = 2**31 - 1
#: what NumPy raises for a type string it cannot build
NUMPY_DTYPE_ERRORS = (TypeError, ValueError, SyntaxError, OverflowError, MemoryError)


def numpy_dtype(spec: str, where: str, field: str = "data_type") -> np.dtype:
    """``np.dtype(spec)``, any failure a MetadataError naming the document and field."""
    try:
        return np.dtype(spec)
    except NUMPY_DTYPE_ERRORS as e:
        raise MetadataError(f"{where}: field {field!r}: NumPy cannot build data type "
                            f"{spec!r}: {e}") from e


def string_dtype() -> np.dtype:
    """The NumPy dtype of variable-length UTF-8 strings (``StringDType``, NumPy >= 2)."""
    cls = getattr(np.dtypes, "StringDType", None)
    if cls is None:
        raise UnsupportedError("variable-length strings need NumPy >= 2 (StringDType)")
    return cls()


def is_vlen(dtype: np.dtype) -> bool:
    """True for the variable-length kinds: strings (``T``) and Python objects (``O``)."""
    return np.dtype(dtype).kind in "OT"


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


# -- structured (record) dtypes ---------------------------------------------------------------
#: the kinds a field of a structured dtype may have (no object, string or void-bytes fields)
FIELD_KINDS = "biufcSUMmV"


def packed_structured(dtype: np.dtype, where: str) -> np.dtype:
    """A structured dtype as it is stored: its fields in order with no padding (what the
    metadata can describe); refuses plain void, sub-array and object fields."""
    if dtype.kind != "V" or dtype.names is None:
        raise UnsupportedError(f"{where}: data type {dtype!r} is raw void bytes without "
                               "fields; give a structured dtype, e.g. [('a', '<i4')]")
    if dtype.subdtype is not None:
        raise UnsupportedError(f"{where}: sub-array data type {dtype!r} is not supported")
    if not dtype.names:
        raise UnsupportedError(f"{where}: a structured dtype needs at least one field")
    fields = []
    for name in dtype.names:
        field_dtype = dtype.fields[name][0]
        if field_dtype.subdtype is not None:
            raise UnsupportedError(f"{where}: field {name!r} of {dtype!r} is a sub-array "
                                   f"({field_dtype}); zarr-python cannot store those")
        if field_dtype.kind not in FIELD_KINDS or (field_dtype.kind == "V"
                                                   and field_dtype.names is None):
            raise UnsupportedError(f"{where}: field {name!r} of {dtype!r} has type "
                                   f"{field_dtype}, which a structured Zarr dtype cannot hold")
        if field_dtype.kind == "V":
            field_dtype = packed_structured(field_dtype, where)
        elif field_dtype.kind in "SUMm":
            check_extra_dtype(field_dtype, where)
        fields.append((name, field_dtype))
    return np.dtype(fields)


def is_structured(dtype: np.dtype) -> bool:
    return np.dtype(dtype).kind == "V"


def _field_entries(spec: Any, where: str) -> list[tuple[str, Any]]:
    """``[[name, type], ...]`` of a structured dtype's JSON, checked."""
    if not isinstance(spec, list) or not spec:
        raise MetadataError(f"{where}: structured dtype fields must be a non-empty list of "
                            f"[name, type] pairs, got {spec!r}")
    out = []
    for entry in spec:
        if not isinstance(entry, list) or not entry or not isinstance(entry[0], str):
            raise MetadataError(f"{where}: structured dtype field {entry!r} must be "
                                "[name, type]")
        if len(entry) == 3:
            raise UnsupportedError(f"{where}: structured dtype field {entry[0]!r} is a "
                                   f"sub-array (shape {entry[2]!r}); not supported")
        if len(entry) != 2:
            raise MetadataError(f"{where}: structured dtype field {entry!r} must be "
                                "[name, type]")
        out.append((entry[0], entry[1]))
    return out


def structured_dtype(fields: list[tuple[str, np.dtype]], where: str) -> np.dtype:
    """NumPy's dtype of ``(name, dtype)`` fields; duplicate or empty names refused."""
    names = [n for n, _ in fields]
    if len(set(names)) != len(names) or not all(names):
        raise MetadataError(f"{where}: structured dtype field names must be distinct and "
                            f"non-empty, got {names!r}")
    for name, field_dtype in fields:
        if field_dtype.kind not in FIELD_KINDS or (field_dtype.kind == "V"
                                                   and field_dtype.names is None):
            raise UnsupportedError(f"{where}: structured dtype field {name!r} has type "
                                   f"{field_dtype}, which a structured Zarr dtype cannot hold")
    try:
        dtype = np.dtype(fields)
    except NUMPY_DTYPE_ERRORS as e:
        raise MetadataError(f"{where}: NumPy cannot build structured dtype {fields!r}: "
                            f"{e}") from e
    if dtype.itemsize > MAX_ITEMSIZE:
        raise MetadataError(f"{where}: structured dtype of {dtype.itemsize} bytes is more "
                            f"than the {MAX_ITEMSIZE} NumPy supports")
    return dtype


def structured_from_v2(spec: Any, where: str, parse_field: Any) -> np.dtype:
    """A v2 ``[["a", "<i4"], ["b", [["x", "<f4"]]]]`` (``parse_field`` parses the
    string of one field's type)."""
    fields = []
    for name, field_spec in _field_entries(spec, where):
        if isinstance(field_spec, list):
            fields.append((name, structured_from_v2(field_spec, where, parse_field)))
        elif isinstance(field_spec, str):
            fields.append((name, parse_field(field_spec, where)))
        else:
            raise MetadataError(f"{where}: structured dtype field {name!r} has invalid type "
                                f"{field_spec!r}")
    return structured_dtype(fields, where)


def structured_to_v2(dtype: np.dtype, field_str: Any) -> list[list[Any]]:
    """The v2 ``dtype`` of a structured dtype: ``[[name, "<i4"], ...]`` (nested lists for
    nested structures)."""
    out: list[list[Any]] = []
    for name in dtype.names:
        field_dtype = dtype.fields[name][0]
        out.append([name, structured_to_v2(field_dtype, field_str) if field_dtype.kind == "V"
                    else field_str(field_dtype)])
    return out


def structured_from_v3(data_type: dict[str, Any], where: str, parse_field: Any) -> np.dtype:
    """A v3 ``{"name": "structured", "configuration": {"fields": [[name, type], ...]}}``;
    fields are stored little-endian (``parse_field`` parses one field's ``data_type``)."""
    spec = _config(data_type, "fields", where)
    fields = [(name, parse_field(field_spec, where))
              for name, field_spec in _field_entries(spec, where)]
    return structured_dtype(fields, where).newbyteorder("<")


def structured_to_v3(dtype: np.dtype, field_name: Any) -> dict[str, Any]:
    """The v3 ``data_type`` of a structured dtype (``field_name`` names one field's type)."""
    return {"name": "structured", "configuration": {"fields": [
        [name, field_name(dtype.fields[name][0])] for name in dtype.names]}}


def infer_object_dtype(data: np.ndarray) -> np.dtype:
    """For an object array of all-``str`` items: the string dtype; otherwise object."""
    flat = data.reshape(-1)
    if flat.size and all(isinstance(x, str) for x in flat):
        return string_dtype()
    return np.dtype("O")


def check_extra_dtype(dtype: np.dtype, where: str) -> None:
    """Refuse what neither zarr-python nor the specs can describe (S0, U0, generic time)."""
    if dtype.kind in "SU" and dtype.itemsize == 0:
        raise UnsupportedError(f"{where}: data type {dtype.str!r} has length 0; give a length "
                               "(e.g. 'S8') or use dtype=str / bytes for variable length")
    if dtype.kind in "Mm":
        unit, _ = np.datetime_data(dtype)
        if unit == "generic":
            raise UnsupportedError(f"{where}: {dtype.str!r} has no time unit; give one, "
                                   "e.g. 'M8[ns]'")


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
        return {"name": _TIME_NAMES[kind], "configuration": {"unit": unit, "scale_factor": scale}}
    raise UnsupportedError(f"{where}: data type {dtype!r} is not supported in Zarr v3 here")


def _config(data_type: dict[str, Any], key: str, where: str) -> Any:
    config = data_type.get("configuration")
    if not isinstance(config, dict) or key not in config:
        raise MetadataError(f"{where}: field 'data_type': {data_type.get('name')!r} needs "
                            f"configuration.{key}")
    return config[key]


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
        length = _config(data_type, "length_bytes", where)
        unit = 4 if name == "fixed_length_utf32" else 1
        if isinstance(length, bool) or not isinstance(length, int) or length < 1 or length % unit:
            raise MetadataError(f"{where}: field 'data_type': bad length_bytes {length!r} for "
                                f"{name}")
        if length > MAX_ITEMSIZE:
            raise MetadataError(f"{where}: field 'data_type': length_bytes {length} of {name} "
                                f"is more than the {MAX_ITEMSIZE} NumPy supports")
        return numpy_dtype(f"S{length}" if unit == 1 else f"U{length // 4}", where)
    if name in ("numpy.datetime64", "numpy.timedelta64"):
        unit = _config(data_type, "unit", where)
        scale = _config(data_type, "scale_factor", where)
        if unit not in _TIME_UNITS or isinstance(scale, bool) or not isinstance(scale, int) \
                or not 1 <= scale <= MAX_SCALE_FACTOR:
            raise MetadataError(f"{where}: field 'data_type': bad unit/scale_factor "
                                f"{unit!r}/{scale!r} for {name} (scale_factor must be "
                                f"1..{MAX_SCALE_FACTOR})")
        code = "M8" if name == "numpy.datetime64" else "m8"
        return numpy_dtype(f"{code}[{'' if scale == 1 else scale}{unit}]", where)
    return None


# -- v2 dtype strings --------------------------------------------------------------------
def extra_v2_str(dtype: np.dtype, where: str = "array") -> str:
    """The v2 ``dtype`` string: ``"|S5"``, ``"<U5"``, ``"<M8[ns]"``, ``"|O"``."""
    check_extra_dtype(dtype, where)
    if dtype.kind in "OT":
        return "|O"
    return dtype.str


def object_codec_id(filters: Any) -> str | None:
    """The id of a v2 array's object codec: the first filter that is one."""
    for f in filters or ():
        cid = f.get("id") if isinstance(f, dict) else getattr(f, "codec_id", None)
        if cid in OBJECT_CODEC_IDS:
            return cid
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
    if dtype.kind == "T" and cid != "vlen-utf8":
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


# -- fill values -------------------------------------------------------------------------
def _b64decode(value: str, where: str) -> bytes:
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as e:
        raise MetadataError(f"{where}: field 'fill_value': {value!r} is not base64") from e


def parse_extra_fill(value: Any, dtype: np.dtype, where: str) -> Any:
    """Decode a JSON fill value of a non-numeric dtype (``value`` is not None)."""
    kind = dtype.kind
    if kind == "V":
        if not isinstance(value, str):
            raise MetadataError(f"{where}: field 'fill_value': {value!r} must be a base64 "
                                "string of a structured value's bytes")
        raw = _b64decode(value, where)
        if len(raw) != dtype.itemsize:
            raise MetadataError(f"{where}: field 'fill_value': {len(raw)} bytes, a value of "
                                f"the structured dtype has {dtype.itemsize}")
        return np.frombuffer(raw, dtype=dtype)[0].copy()
    if kind in "SO":
        if not isinstance(value, str):
            raise MetadataError(f"{where}: field 'fill_value': {value!r} must be a base64 string")
        raw = _b64decode(value, where)
        if kind == "O":
            return raw
        if len(raw) > dtype.itemsize:
            raise MetadataError(f"{where}: field 'fill_value': {len(raw)} bytes do not fit "
                                f"{dtype.str}")
        return np.array(raw, dtype=dtype)[()]
    if kind in "UT":
        if kind == "T" and isinstance(value, int | float) and not isinstance(value, bool):
            value = str(value)  # zarr-python 2 wrote 0 for string arrays; 3 reads it as "0"
        if not isinstance(value, str):
            raise MetadataError(f"{where}: field 'fill_value': {value!r} must be a string")
        if kind == "T":
            return value
        if len(value) > dtype.itemsize // 4:
            raise MetadataError(f"{where}: field 'fill_value': {value!r} does not fit {dtype.str}")
        return np.array(value, dtype=dtype)[()]
    if kind in "Mm":
        if value == "NaT":
            value = NAT
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or \
                not NAT <= value < 2**63:
            raise MetadataError(f"{where}: field 'fill_value': {value!r} must be an int64 "
                                f"count of {dtype.str} units")
        return np.array(value, dtype=np.int64).view(dtype.newbyteorder("="))[()]
    raise UnsupportedError(f"{where}: field 'fill_value' for data type {dtype!r}")


def extra_fill_to_json(value: Any, dtype: np.dtype) -> Any:
    """Encode a fill value of a non-numeric dtype as zarr-python does."""
    kind = dtype.kind
    if kind == "V":
        return base64.b64encode(np.array(value, dtype=dtype).tobytes()).decode("ascii")
    if kind in "SO":
        raw = bytes(value)
        return base64.b64encode(raw).decode("ascii")
    if kind in "UT":
        return str(value)
    if kind in "Mm":
        return int(np.array(value, dtype=dtype.newbyteorder("=")).view(np.int64))
    raise UnsupportedError(f"cannot encode a fill value for data type {dtype!r}")


def normalize_extra_fill(value: Any, dtype: np.dtype, where: str) -> Any:
    """A user-given fill value as the scalar the array holds (``str``/``bytes`` for vlen)."""
    kind = dtype.kind
    if kind == "V":
        return _structured_scalar(value, dtype, where)
    if kind == "T":
        if not isinstance(value, str):
            raise MetadataError(f"{where}: fill_value {value!r} of a string array must be a str")
        return str(value)
    if kind == "O":
        if not isinstance(value, bytes):
            raise MetadataError(f"{where}: fill_value {value!r} of a variable-length bytes "
                                "array must be bytes")
        return bytes(value)
    if kind in "SU":
        width = dtype.itemsize if kind == "S" else dtype.itemsize // 4
        if isinstance(value, str | bytes) and len(value) > width:
            raise MetadataError(f"{where}: fill_value {value!r} is longer than {dtype.str}")
    try:
        arr = np.array(value, dtype=dtype)
    except (TypeError, ValueError, OverflowError, UnicodeError) as e:
        raise MetadataError(f"{where}: fill_value {value!r} does not fit {dtype}") from e
    if arr.ndim != 0:
        raise MetadataError(f"{where}: fill_value must be a scalar, got {value!r}")
    return arr[()]


def _structured_scalar(value: Any, dtype: np.dtype, where: str) -> np.void:
    """A structured fill value from what zarr-python accepts: a record (``np.void``), a
    tuple or list of field values, the raw bytes of one value, or a number for every field."""
    try:
        if isinstance(value, bytes):
            if len(value) != dtype.itemsize:
                raise MetadataError(f"{where}: fill_value of {len(value)} bytes, a value of "
                                    f"{dtype} has {dtype.itemsize}")
            return np.frombuffer(value, dtype=dtype)[0].copy()
        if isinstance(value, list):
            value = tuple(value)
        if isinstance(value, np.ndarray) and value.ndim == 0:
            value = value[()]
        if not isinstance(value, tuple | np.void | int | float | np.number | bool):
            raise MetadataError(f"{where}: fill_value {value!r} does not fit {dtype}")
        return np.array(value, dtype=dtype)[()]
    except MetadataError:
        raise
    except (TypeError, ValueError, OverflowError) as e:
        raise MetadataError(f"{where}: fill_value {value!r} does not fit {dtype}: {e}") from e


def default_extra_fill(dtype: np.dtype) -> Any:
    """zarr-python's default: empty string/bytes, NaT for datetimes and timedeltas."""
    kind = dtype.kind
    if kind == "T":
        return ""
    if kind == "O":
        return b""
    if kind in "Mm":
        return np.array(NAT, dtype=np.int64).view(dtype.newbyteorder("="))[()].astype(dtype)
    return np.zeros((), dtype=dtype)[()]


def extra_fill_equal(a: Any, b: Any) -> bool:
    """Equality of fill values of vlen dtypes (by value; NaT equals NaT elsewhere)."""
    return isinstance(a, str) == isinstance(b, str) and a == b
