"""Numeric casts with the rules of the ``cast_value`` codec (zarr-extensions).

Each element is converted by value, in this order:

1. an explicit ``mapping`` (the codec's ``scalar_map``; the first entry for a value wins;
   NaN matches NaN);
2. a value the target type holds exactly is kept (NaN and infinities stay themselves
   between float types; the sign of zero is kept);
3. otherwise the value is rounded (``rounding``) and then, when it lies outside the
   target's range, ``out_of_range`` decides: ``"clamp"`` (to the integer bounds; to
   +-infinity for float targets), ``"wrap"`` (modulo 2^bits, integer targets only) or,
   when not set, an error. NaN and infinities have no integer value: an error unless
   mapped.

Everything is vectorized; the results are exact (no double rounding): float -> int
rounds in float64, which holds every float16/32/64 value; a float narrowed with a
directed rounding is first rounded to nearest by NumPy, compared exactly with the input
and stepped to its neighbour when needed (``nextafter``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from chunkstore.errors import CodecError

ROUNDINGS = ("nearest-even", "towards-zero", "towards-positive", "towards-negative",
             "nearest-away")
OUT_OF_RANGE = (None, "clamp", "wrap")
#: the types this module casts between (the spec's others have no NumPy type here)
NUMERIC_NAMES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                 "float16", "float32", "float64")
#: types the spec defines for cast_value / scale_offset that have no NumPy type here
UNSUPPORTED_NAMES = ("int2", "int4", "uint2", "uint4", "float4_e2m1fn", "float6_e2m3fn",
                     "float6_e3m2fn", "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz",
                     "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
                     "bfloat16")


def is_numeric(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is one of the integer or float types this module casts."""
    dtype = np.dtype(dtype)
    return dtype.kind in "iuf" and dtype.newbyteorder("=").name in NUMERIC_NAMES


def cast_values(values: np.ndarray, target: np.dtype, rounding: str = "nearest-even",
                out_of_range: str | None = None,
                mapping: Sequence[tuple[Any, Any]] = ()) -> np.ndarray:
    """``values`` converted to ``target`` by the rules above (a new array); CodecError
    names the first value that has no conversion."""
    values = np.asarray(values)
    if not values.dtype.isnative:
        values = values.astype(values.dtype.newbyteorder("="))
    target = np.dtype(target).newbyteorder("=")
    with np.errstate(all="ignore"):
        out, bad = _convert(values, target, rounding, out_of_range)
        if mapping:
            free = _apply_map(values, out, mapping)
            if bad is not None:
                bad &= free
    if bad is not None and bad.any():
        first = values.reshape(-1)[int(np.flatnonzero(bad.reshape(-1))[0])]
        raise CodecError(f"cannot cast the {values.dtype} value {first.item()!r} to "
                         f"{target}: {_why(first, target, out_of_range)}")
    return out


def _why(value: Any, target: np.dtype, out_of_range: str | None) -> str:
    if np.dtype(type(value)).kind == "f" and not np.isfinite(value):
        return (f"{target} has no NaN or infinity (map the value with the codec's "
                "'scalar_map')")
    return (f"out of the range of {target} (the codec's 'out_of_range' is "
            f"{out_of_range!r})")


def _apply_map(values: np.ndarray, out: np.ndarray, mapping: Sequence[tuple[Any, Any]]
               ) -> np.ndarray:
    """Write the mapped values into ``out``; returns where no key matched. One sorted
    lookup for all the keys: a map of many entries (untrusted metadata) costs a binary
    search per element, not a pass per entry."""
    first: dict[Any, Any] = {}
    nan_value = None
    for key, value in mapping:  # the first entry of a key wins (-0.0 is 0.0)
        if values.dtype.kind == "f" and np.isnan(key):
            nan_value = value if nan_value is None else nan_value
        else:
            first.setdefault(key.item(), value)
    free = np.ones(values.shape, bool)
    if nan_value is not None:
        hit = np.isnan(values)
        out[hit] = nan_value
        free &= ~hit
    if first:
        keys = np.array(list(first), dtype=values.dtype)
        mapped = np.array(list(first.values()), dtype=out.dtype)
        order = np.argsort(keys, kind="stable")
        keys, mapped = keys[order], mapped[order]
        pos = np.minimum(np.searchsorted(keys, values), len(keys) - 1)
        hit = free & (keys[pos] == values)
        out[hit] = mapped[pos[hit]]
        free &= ~hit
    return free


def _convert(x: np.ndarray, target: np.dtype, rounding: str, out_of_range: str | None
             ) -> tuple[np.ndarray, np.ndarray | None]:
    """The conversion and a mask of the elements that have none (None: all have one)."""
    if target.kind in "iu":
        if x.dtype.kind in "iu":
            return _int_to_int(x, target, out_of_range)
        return _float_to_int(x, target, rounding, out_of_range)
    if x.dtype.kind == "f" and target.itemsize >= x.dtype.itemsize:
        return x.astype(target), None  # widening (or the same type): exact
    if x.dtype.kind in "iu" and x.dtype.itemsize <= 4:
        x = x.astype(np.float64)  # exact
        if target.itemsize == 8:
            return x, None
    return _narrow_to_float(x, target, rounding, out_of_range)


def _int_to_int(x: np.ndarray, target: np.dtype, out_of_range: str | None
                ) -> tuple[np.ndarray, np.ndarray | None]:
    src, dst = np.iinfo(x.dtype), np.iinfo(target)
    lo, hi = max(int(src.min), int(dst.min)), min(int(src.max), int(dst.max))
    outside = None
    if lo > int(src.min) or hi < int(src.max):
        lo_x, hi_x = x.dtype.type(lo), x.dtype.type(hi)
        if out_of_range == "clamp":
            x = np.clip(x, lo_x, hi_x)
        else:
            outside = (x < lo_x) | (x > hi_x)
    out = x.astype(target)  # modulo 2^bits: "wrap", and nothing else reaches past
    return out, (outside if out_of_range is None else None)


def _round(w: np.ndarray, rounding: str) -> np.ndarray:
    """``w`` (float64) rounded to integers."""
    if rounding == "nearest-even":
        return np.rint(w)
    if rounding == "towards-zero":
        return np.trunc(w)
    if rounding == "towards-positive":
        return np.ceil(w)
    if rounding == "towards-negative":
        return np.floor(w)
    a = np.abs(w)
    f = np.floor(a)
    return np.copysign(f + (a - f >= 0.5), w)  # a - f is exact


def _float_to_int(x: np.ndarray, target: np.dtype, rounding: str, out_of_range: str | None
                  ) -> tuple[np.ndarray, np.ndarray | None]:
    w = x.astype(np.float64)  # exact for float16/32/64
    finite = np.isfinite(w)
    r = np.where(finite, _round(w, rounding), 0.0)
    info = np.iinfo(target)
    lo, above = float(int(info.min)), float(int(info.max) + 1)  # powers of two: exact
    below_mask, above_mask = r < lo, r >= above
    outside = below_mask | above_mask
    out = np.where(outside, 0.0, r).astype(target)
    bad = ~finite
    if out_of_range is None:
        bad |= outside
    elif out_of_range == "clamp":
        out[below_mask] = info.min
        out[above_mask] = info.max
    elif outside.any():
        out[outside] = _wrap(r[outside], target)
    return out, bad


def _wrap(r: np.ndarray, target: np.dtype) -> np.ndarray:
    """Integer-valued float64 ``r`` modulo 2^bits, as ``target`` (two's complement)."""
    bits = 8 * target.itemsize
    m = np.fmod(r, 2.0 ** bits)  # exact; |m| < 2^bits
    if bits <= 32:
        return m.astype(np.int64).astype(target)  # int64 -> narrower: modulo 2^bits
    half, top = 2.0 ** 63, np.uint64(2 ** 63)
    u = np.empty(m.shape, np.uint64)
    high, low = m >= half, m < -half
    mid = ~(high | low)
    u[mid] = m[mid].astype(np.int64).view(np.uint64)
    u[high] = (m[high] - half).astype(np.int64).view(np.uint64) + top  # both exact
    u[low] = (m[low] + half).astype(np.int64).view(np.uint64) + top  # (Sterbenz)
    return u.view(target)


def _narrow_to_float(x: np.ndarray, target: np.dtype, rounding: str, out_of_range: str | None
                     ) -> tuple[np.ndarray, np.ndarray | None]:
    """A float (or 64-bit integer) ``x`` to a float type that may not hold it exactly."""
    y = x.astype(target)  # round to nearest, ties to even
    if rounding != "nearest-even":
        y = _directed(x, y, rounding)
    info = np.finfo(target)
    if info.maxexp >= 1024:  # float64 from an integer: always in range
        return y, None
    finite = np.isfinite(x) if x.dtype.kind == "f" else True
    # past the largest finite value: rounded to infinity, or (directed roundings towards
    # zero step back from infinity) at least the next power of two, 2^maxexp
    outside = finite & np.isinf(y)
    big = 2 ** info.maxexp
    if x.dtype.kind == "f" or big <= int(np.iinfo(x.dtype).max):
        outside |= finite & (x >= x.dtype.type(big))
        if x.dtype.kind != "u":
            outside |= finite & (x <= x.dtype.type(-big))
    if out_of_range is None:
        return y, outside
    y[outside] = np.copysign(np.inf, x[outside]).astype(target)  # "clamp"
    return y, None


def _compare(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """sign(y - x), exactly: -1, 0 or 1 per element (x a float or an integer)."""
    if x.dtype.kind == "f":
        ys = y.astype(x.dtype)  # exact: y is of a narrower float type
        return (ys > x).astype(np.int8) - (ys < x).astype(np.int8)
    yf = y.astype(np.float64)
    info = np.iinfo(x.dtype)
    above, below = yf >= float(int(info.max) + 1), yf < float(int(info.min))
    inside = ~(above | below)
    yi = np.where(inside, yf, 0.0).astype(x.dtype)  # integer-valued: exact
    cmp = (yi > x).astype(np.int8) - (yi < x).astype(np.int8)
    cmp[above] = 1
    cmp[below] = -1
    return cmp


def _directed(x: np.ndarray, y: np.ndarray, rounding: str) -> np.ndarray:
    """The nearest-even ``y`` moved to its neighbour where ``rounding`` says otherwise."""
    cmp = _compare(y, x)
    pos_inf, neg_inf = np.array(np.inf, y.dtype), np.array(-np.inf, y.dtype)
    positive, negative = x > 0, x < 0
    if rounding == "towards-positive":
        step, goal = cmp < 0, pos_inf
    elif rounding == "towards-negative":
        step, goal = cmp > 0, neg_inf
    elif rounding == "towards-zero":
        step, goal = (positive & (cmp > 0)) | (negative & (cmp < 0)), np.zeros((), y.dtype)
    else:  # nearest-away: only ties rounded towards zero move
        inward = (positive & (cmp < 0)) | (negative & (cmp > 0))
        goal = np.where(positive, pos_inf, neg_inf)
        z = np.where(inward, np.nextafter(y, goal), y)
        step = inward & _ties(x, y, z, inward)
        return np.where(step, z, y)
    return np.where(step, np.nextafter(y, goal), y)


def _ties(x: np.ndarray, y: np.ndarray, z: np.ndarray, where: np.ndarray) -> np.ndarray:
    """Where ``x`` lies exactly half-way between ``y`` and ``z`` (for the ``where`` ones)."""
    if x.dtype.kind == "f":  # differences of neighbours: exact in x's type (Sterbenz)
        ys, zs = y.astype(x.dtype), z.astype(x.dtype)
        return (x - ys) == (zs - x)
    out = np.zeros(x.shape, bool)  # 64-bit integers: exact rational arithmetic, the few
    flat_x, flat_y, flat_z = x.reshape(-1), y.reshape(-1), z.reshape(-1)
    flat = out.reshape(-1)
    for i in np.flatnonzero(where.reshape(-1)):
        yi, zi = float(flat_y[i]), float(flat_z[i])
        if math.isfinite(zi):  # (an infinite neighbour is never as near)
            xi = int(flat_x[i])
            flat[i] = abs(xi - Fraction(yi)) == abs(Fraction(zi) - xi)
    return out
