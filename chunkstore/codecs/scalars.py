"""Scalars in codec configurations, written as the Zarr v3 fill values of integer and
float types (``cast_value``'s scalar map, ``scale_offset``'s offset and scale): JSON
numbers, "NaN" / "Infinity" / "-Infinity" (and "+Infinity", as the cast_value spec's own
example writes it), or the raw bits in hex ("0x7fc00000")."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from chunkstore.errors import CodecError

_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "+Infinity": math.inf,
              "-Infinity": -math.inf}


def scalar_from_json(value: Any, dtype: np.dtype, where: str) -> Any:
    """``value`` as a NumPy scalar of ``dtype`` (an integer or float type); CodecError
    naming ``where`` when it is not one."""
    dtype = np.dtype(dtype)
    out = None if isinstance(value, bool) else _parse(value, dtype)
    if out is None:
        raise CodecError(f"{where}: {value!r} is not a {dtype} value")
    return out


def _parse(value: Any, dtype: np.dtype) -> Any:
    """The scalar, or None when ``value`` is not one of ``dtype``."""
    if dtype.kind in "iu":
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        lo, hi = _bounds(dtype)
        return dtype.type(value) if isinstance(value, int) and lo <= value <= hi else None
    if isinstance(value, str):
        if value in _NONFINITE:
            return dtype.type(_NONFINITE[value])
        if not value.startswith("0x"):
            return None
        try:
            raw = bytes.fromhex(value[2:])
        except ValueError:
            return None
        if len(raw) != dtype.itemsize:
            return None
        return np.frombuffer(raw, dtype.newbyteorder(">"))[0].astype(dtype)
    if not isinstance(value, int | float):
        return None
    try:
        with np.errstate(over="ignore"):
            out = dtype.type(value)
    except OverflowError:  # an integer past float64
        return None
    return None if math.isinf(out) and math.isfinite(value) else out  # past the range


@functools.lru_cache(maxsize=16)
def _bounds(dtype: np.dtype) -> tuple[int, int]:
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)
