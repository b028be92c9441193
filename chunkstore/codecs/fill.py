"""Whether a chunk holds nothing but the fill value (such chunks need not be stored)."""

from __future__ import annotations

from typing import Any

import numpy as np


def is_all_fill(chunk: np.ndarray, fill: Any) -> bool:
    """True when every element equals the fill value (NaN matches NaN)."""
    if fill is None or chunk.size == 0:
        return fill is not None
    if chunk.dtype.kind == "c":  # real and imaginary parts each, NaN matching NaN
        fill = complex(fill)
        return (is_all_fill(chunk.real, chunk.real.dtype.type(fill.real))
                and is_all_fill(chunk.imag, chunk.imag.dtype.type(fill.imag)))
    fill_is_nan = chunk.dtype.kind == "f" and np.isnan(fill)
    first = chunk.flat[0]
    if fill_is_nan:
        return bool(np.isnan(first)) and bool(np.all(np.isnan(chunk)))
    if chunk.dtype.kind in "Mm" and np.isnat(fill):  # NaT != NaT, like NaN
        return bool(np.all(np.isnat(chunk)))
    if first != fill:
        return False
    return not np.any(chunk != fill)
