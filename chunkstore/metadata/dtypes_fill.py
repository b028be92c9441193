"""Fill values of the data types beyond numbers, as zarr-python 3 writes them: bytes as
base64, unicode and strings as JSON strings, datetimes as the int64 count (NaT the
default), raw bytes and (in v2 and legacy v3) structured values as base64 of their bytes;
a v3 ``struct`` value per field is handled in ``dtypes_structured``."""

from __future__ import annotations

import base64
import binascii
from typing import Any

import numpy as np

from chunkstore.errors import MetadataError, UnsupportedError
from chunkstore.metadata.dtypes_kinds import NAT


def _b64decode(value: str, where: str) -> bytes:
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as e:
        raise MetadataError(f"{where}: field 'fill_value': {value!r} is not base64") from e


def parse_extra_fill(value: Any, dtype: np.dtype, where: str) -> Any:
    """Decode a JSON fill value of a non-numeric dtype (``value`` is not None)."""
    kind = dtype.kind
    if kind == "V":
        what = "raw bytes" if dtype.names is None else "structured dtype"
        if not isinstance(value, str):
            raise MetadataError(f"{where}: field 'fill_value': {value!r} must be a base64 "
                                f"string of a value's bytes (of the {what})")
        raw = _b64decode(value, where)
        if len(raw) != dtype.itemsize:
            raise MetadataError(f"{where}: field 'fill_value': {len(raw)} bytes, a value of "
                                f"the {what} has {dtype.itemsize}")
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
    if kind == "V" and dtype.names is None:
        return _raw_scalar(value, dtype, where)
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
    if kind in "Mm" and isinstance(value, int | np.integer) \
            and not isinstance(value, bool | np.timedelta64):  # a timedelta64 is an integer
        # a count of the unit (NumPy deprecates converting one to a unit-less type)
        if not NAT <= int(value) < 2**63:
            raise MetadataError(f"{where}: fill_value {value!r} is not an int64 count of "
                                f"{dtype.str} units")
        return np.array(int(value), dtype=np.int64).view(dtype.newbyteorder("="))[()]
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


def _raw_scalar(value: Any, dtype: np.dtype, where: str) -> np.void:
    """A raw-bytes fill value: ``bytes`` (zero-padded to the length, as NumPy and
    zarr-python do) or a ``np.void`` of at most that length."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, np.void) and value.dtype.names is None:
        value = value.tobytes()
    if not isinstance(value, bytes | bytearray):
        raise MetadataError(f"{where}: fill_value {value!r} of a raw bytes array ({dtype.str}) "
                            "must be bytes")
    if len(value) > dtype.itemsize:
        raise MetadataError(f"{where}: fill_value of {len(value)} bytes is longer than "
                            f"{dtype.str}")
    return np.frombuffer(bytes(value).ljust(dtype.itemsize, b"\0"), dtype=dtype)[0].copy()


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
