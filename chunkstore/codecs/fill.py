"""Whether a chunk holds nothing but the fill value (such chunks need not be stored)."""

from __future__ import annotations

from typing import Any

import numpy as np


def is_all_fill(chunk: np.ndarray, fill: Any) -> bool:
    """True when every element is the fill value: floats bit for bit (-0.0 is not 0.0, and
    a NaN only the fill's own NaN), NaT matching NaT; such chunks read back as written."""
    if fill is None or chunk.size == 0:
        return fill is not None
    if chunk.dtype.kind == "c":  # real and imaginary parts each
        fill = complex(fill)
        return (is_all_fill(chunk.real, chunk.real.dtype.type(fill.real))
                and is_all_fill(chunk.imag, chunk.imag.dtype.type(fill.imag)))
    if chunk.dtype.kind == "f" and chunk.dtype.itemsize in (2, 4, 8):
        # bit for bit: -0.0 is not a fill of 0.0, nor a NaN of another payload a fill of
        # NaN (both would read back as the fill, not as written)
        bits = np.dtype(f"u{chunk.dtype.itemsize}").newbyteorder(chunk.dtype.byteorder)
        fill = np.asarray(fill, dtype=chunk.dtype).view(bits)[()]
        chunk = chunk.view(bits)
    elif chunk.dtype.kind == "f" and np.isnan(fill):
        return bool(np.all(np.isnan(chunk)))
    if chunk.dtype.kind == "V":  # records and raw bytes: bit for bit (a -0.0 or NaN field)
        items = np.ascontiguousarray(chunk).view(np.uint8).reshape(-1, chunk.dtype.itemsize)
        return bool(np.all(items == np.frombuffer(
            np.asarray(fill, dtype=chunk.dtype).tobytes(), dtype=np.uint8)))
    first = chunk.flat[0]
    if chunk.dtype.kind in "Mm" and np.isnat(fill):  # NaT != NaT, like NaN
        return bool(np.all(np.isnat(chunk)))
    if first != fill:
        return False
    return not np.any(chunk != fill)
