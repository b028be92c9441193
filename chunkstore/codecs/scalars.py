"""Scalars in codec configurations, written as the Zarr v3 fill values of integer and
float types (``cast_value``'s scalar map, ``scale_offset``'s offset and scale): JSON
numbers, "NaN" / "Infinity" / "-Infinity" (and "+Infinity", as the cast_value spec's own
example writes it), or the raw bits in hex ("0x7fc00000")."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import CodecError

_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "+Infinity": math.inf,
              "-Infinity": -math.inf}


def scalar_from_json(value: Any, dtype: np.dtype, where: str) -> Any:
    """``value`` as a NumPy scalar of ``dtype`` (an integer or float type); CodecError
    naming ``where`` when it is not one."""
    dtype = np.dtype(dtype)
    bad = CodecError(f"{where}: {value!r} is not a {dtype} value")
    if isinstance(value, bool):
        raise bad
    if dtype.kind in "iu":
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        info = np.iinfo(dtype)
        if not isinstance(value, int) or not int(info.min) <= value <= int(info.max):
            raise bad
        return dtype.type(value)
    if isinstance(value, str) and value in _NONFINITE:
        return dtype.type(_NONFINITE[value])
    if isinstance(value, str) and value.startswith("0x"):
        try:
            raw = bytes.fromhex(value[2:])
        except ValueError:
            raise bad from None
        if len(raw) != dtype.itemsize:
            raise bad
        return np.frombuffer(raw, dtype.newbyteorder(">"))[0].astype(dtype)
    if not isinstance(value, int | float):
        raise bad
    try:
        with np.errstate(over="ignore"):
            out = dtype.type(value)
    except OverflowError:  # an integer past float64
        raise bad from None
    if math.isinf(out) and math.isfinite(value):  # past the type's range
        raise bad
    return out
