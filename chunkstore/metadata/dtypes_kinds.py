"""The kinds of data types beyond numbers (fixed-length bytes and unicode, variable-length
strings and bytes, datetimes, structured and raw bytes), NumPy's limits on them, and the checks every
dtype module shares. The names and fill values live in ``dtypes_extra``,
``dtypes_structured`` and ``dtypes_fill``."""

from __future__ import annotations

from typing import Any

import numpy as np

from chunkstore.errors import MetadataError, UnsupportedError

EXTRA_KINDS = "SUOTMmV"
NAT = int(np.iinfo(np.int64).min)
VLEN_CODEC_IDS = {"vlen-utf8": "T", "vlen-bytes": "O"}
OBJECT_CODEC_IDS = frozenset({"vlen-utf8", "vlen-bytes", "vlen-array", "pickle", "msgpack2",
                              "json2"})
#: NumPy's time units; "generic" is a unit-less count (``m8`` / ``M8``), scale factor 1
TIME_UNITS = ("Y", "M", "W", "D", "h", "m", "s", "ms", "us", "μs", "ns", "ps", "fs", "as",
              "generic")
TIME_NAMES = {"M": "numpy.datetime64", "m": "numpy.timedelta64"}
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


def infer_object_dtype(data: np.ndarray) -> np.dtype:
    """For an object array of all-``str`` items: the string dtype; otherwise object."""
    flat = data.reshape(-1)
    if flat.size and all(isinstance(x, str) for x in flat):
        return string_dtype()
    return np.dtype("O")


def check_extra_dtype(dtype: np.dtype, where: str) -> None:
    """Refuse what neither zarr-python nor the specs can describe (S0, U0, V0)."""
    if dtype.kind in "SUV" and dtype.itemsize == 0:
        hint = "" if dtype.kind == "V" else " or use dtype=str / bytes for variable length"
        raise UnsupportedError(f"{where}: data type {dtype.str!r} has length 0; give a length "
                               f"(e.g. '{dtype.kind}8'){hint}")


def config_value(data_type: dict[str, Any], key: str, where: str) -> Any:
    """``configuration[key]`` of a v3 ``data_type`` object, or a MetadataError."""
    config = data_type.get("configuration")
    if not isinstance(config, dict) or key not in config:
        raise MetadataError(f"{where}: field 'data_type': {data_type.get('name')!r} needs "
                            f"configuration.{key}")
    return config[key]
