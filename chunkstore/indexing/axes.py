"""Per-axis selection math: one item of a selection (an int, a slice, an index array or a
bool mask) along one axis -> the chunks it touches along that axis and where each part
goes. Also the checks every indexer shares (integers, bounds, Ellipsis)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from chunkstore.errors import BoundsCheckError

Selection = Any


def is_int(x: Any) -> bool:
    return isinstance(x, int | np.integer) and not isinstance(x, bool | np.bool_)


def normalize_int(i: Any, dim_len: int, axis: int) -> int:
    i = int(i)
    if i < 0:
        i += dim_len
    if not 0 <= i < dim_len:
        raise BoundsCheckError(f"index {i if i >= 0 else i - dim_len} is out of bounds for "
                               f"axis {axis} with size {dim_len}")
    return i


def check_unsigned(a: np.ndarray, dim_len: int, axis: int) -> None:
    """BoundsCheckError for an unsigned index array holding an index >= ``dim_len``,
    checked before the array is cast to signed positions (where 2**64 - 1 would become
    -1 and address the last element)."""
    if a.dtype.kind == "u" and a.size and a.max() >= dim_len:
        bad = a[a >= dim_len].flat[0]
        raise BoundsCheckError(f"index {bad} is out of bounds for axis {axis} with size "
                               f"{dim_len}")


def expand_ellipsis(selection: Selection, ndim: int) -> tuple[Any, ...]:
    """A selection as a tuple of one entry per axis (Ellipsis and missing axes -> ``:``)."""
    if not isinstance(selection, tuple):
        selection = (selection,)
    if len(selection) == ndim and not any(s is Ellipsis or s is None for s in selection):
        return selection
    n_ellipsis = sum(1 for s in selection if s is Ellipsis)
    if n_ellipsis > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if any(s is None for s in selection):
        raise IndexError("np.newaxis / None is not supported in selections")
    if n_ellipsis:
        i = next(k for k, s in enumerate(selection) if s is Ellipsis)
        fill = ndim - (len(selection) - 1)
        selection = selection[:i] + (slice(None),) * fill + selection[i + 1:]
    if len(selection) > ndim:
        raise IndexError(f"too many indices: array is {ndim}-dimensional, but "
                         f"{len(selection)} were indexed")
    return tuple(selection) + (slice(None),) * (ndim - len(selection))


# -- per-axis indexers -------------------------------------------------------------------
# ``chunk_len`` is the chunk length of a regular axis, or (a rectilinear axis) an int64
# array of the chunk starts followed by the last chunk's end (``ChunkGrid.axis_chunking``)
# each yields parts ``(chunk, chunk_sel, out_sel, complete)``: the chunk's number along the
# axis, what to take from it (int | slice | ndarray), where it goes in the output (None when
# the axis is dropped | slice | ndarray) and whether the chunk's whole extent is taken
AxisPart = tuple[int, Any, Any, bool]


class IntAxis:
    drop = True
    nitems = 1

    def __init__(self, i: Any, dim_len: int, chunk_len: Any, axis: int) -> None:
        i = int(i)
        if not 0 <= i < dim_len:
            i = normalize_int(i, dim_len, axis)
        if type(chunk_len) is not np.ndarray:
            c, off = divmod(i, chunk_len)
            self.part = (c, off, None, chunk_len == 1)
        else:
            c = int(np.searchsorted(chunk_len, i, side="right")) - 1
            start = int(chunk_len[c])
            self.part = (c, i - start, None, min(int(chunk_len[c + 1]), dim_len) - start == 1)

    def parts(self) -> list[AxisPart]:
        return [self.part]


class SliceAxis:
    def __init__(self, s: slice, dim_len: int, chunk_len: Any, axis: int) -> None:
        if s.step == 0:
            raise ValueError(f"slice step cannot be zero (axis {axis})")
        start, stop, step = s.indices(dim_len)
        n = len(range(start, stop, step))
        self.reverse = step < 0
        if self.reverse and n:  # walk the same elements forwards, fill the output backwards
            start, step = start + (n - 1) * step, -step
            stop = start + (n - 1) * step + 1
        self.start, self.stop, self.step, self.nitems = start, stop, step, n
        self.dim_len, self.chunk_len = dim_len, chunk_len
        self.drop = False

    def parts(self) -> list[AxisPart]:
        if not self.nitems:
            return []
        return list(self._parts())

    def _parts(self) -> Iterator[AxisPart]:
        cl, step = self.chunk_len, self.step
        last = self.start + (self.nitems - 1) * step
        if type(cl) is np.ndarray:
            yield from self._varying_parts(last)
            return
        for c in range(self.start // cl, last // cl + 1):
            cs = c * cl
            first = self.start if self.start >= cs else self.start + -(-(cs - self.start) // step) * step
            limit = min(last + 1, cs + cl)
            if first >= limit:
                continue
            count = -(-(limit - first) // step)
            o = (first - self.start) // step
            if self.reverse:
                lo = self.nitems - 1 - o
                hi = lo - count
                out_sel = slice(lo, hi if hi >= 0 else None, -1)
            else:
                out_sel = slice(o, o + count)
            complete = step == 1 and first == cs and count == min(cl, self.dim_len - cs)
            yield (c, slice(first - cs, limit - cs, step), out_sel, complete)

    def _varying_parts(self, last: int) -> Iterator[AxisPart]:
        """``_parts`` of a rectilinear axis (chunk starts in ``chunk_len``)."""
        bounds, step = self.chunk_len, self.step
        lo = int(np.searchsorted(bounds, self.start, side="right")) - 1
        hi = int(np.searchsorted(bounds, last, side="right")) - 1
        for c, (cs, ce) in enumerate(zip(bounds[lo:hi + 1].tolist(),
                                         bounds[lo + 1:hi + 2].tolist(), strict=True), lo):
            first = self.start if self.start >= cs else self.start + -(-(cs - self.start) // step) * step
            limit = min(last + 1, ce)
            if first >= limit:
                continue
            count = -(-(limit - first) // step)
            o = (first - self.start) // step
            if self.reverse:
                top = self.nitems - 1 - o
                bottom = top - count
                out_sel = slice(top, bottom if bottom >= 0 else None, -1)
            else:
                out_sel = slice(o, o + count)
            complete = step == 1 and first == cs and count == min(ce, self.dim_len) - cs
            yield (c, slice(first - cs, limit - cs, step), out_sel, complete)


class ArrayAxis:
    """Integer array (any order, repeats, negatives) or bool mask along one axis."""

    def __init__(self, idx: Any, dim_len: int, chunk_len: Any, axis: int) -> None:
        arr = np.asarray(idx)
        if arr.dtype == bool:
            if arr.shape != (dim_len,):
                raise IndexError(f"boolean index of shape {arr.shape} does not match axis {axis} "
                                 f"of size {dim_len}")
            arr = np.flatnonzero(arr)
        elif arr.size == 0:
            arr = arr.astype(np.intp)
        elif arr.dtype.kind not in "iu":
            raise IndexError(f"arrays used as indices must be of integer or boolean type "
                             f"(axis {axis}, got {arr.dtype})")
        if arr.ndim != 1:
            raise IndexError(f"orthogonal index arrays must be 1-d (axis {axis}, got {arr.ndim}-d)")
        check_unsigned(arr, dim_len, axis)
        arr = arr.astype(np.intp, copy=True)
        neg = arr < 0
        arr[neg] += dim_len
        if arr.size and (arr.min() < 0 or arr.max() >= dim_len):
            bad = np.asarray(idx)[(arr < 0) | (arr >= dim_len)][0]
            raise BoundsCheckError(f"index {bad} is out of bounds for axis {axis} with size "
                                   f"{dim_len}")
        self.idx, self.chunk_len, self.dim_len = arr, chunk_len, dim_len
        self.nitems = arr.size
        self.drop = False

    def parts(self) -> list[AxisPart]:
        return list(self._parts()) if self.nitems else []

    def _parts(self) -> Iterator[AxisPart]:
        varying = type(self.chunk_len) is np.ndarray
        if varying:
            chunks = np.searchsorted(self.chunk_len, self.idx, side="right") - 1
        else:
            chunks = self.idx // self.chunk_len
        if np.all(chunks[1:] >= chunks[:-1]):
            order = None
            sorted_chunks = chunks
        else:
            order = np.argsort(chunks, kind="stable")
            sorted_chunks = chunks[order]
        bounds = np.flatnonzero(np.diff(sorted_chunks)) + 1
        starts = np.concatenate(([0], bounds))
        stops = np.concatenate((bounds, [sorted_chunks.size]))
        for lo, hi in zip(starts.tolist(), stops.tolist(), strict=True):
            c = int(sorted_chunks[lo])
            if varying:
                cs = int(self.chunk_len[c])
                valid = min(int(self.chunk_len[c + 1]), self.dim_len) - cs
            else:
                cs = c * self.chunk_len
                valid = min(self.chunk_len, self.dim_len - cs)
            if order is None:
                positions = slice(lo, hi)
                local = self.idx[lo:hi] - cs
            else:
                positions = order[lo:hi]
                local = self.idx[positions] - cs
            complete = local.size == valid and np.array_equal(local, np.arange(valid))
            yield (c, local, positions, bool(complete))


def axis_indexer(sel: Any, dim_len: int, chunk_len: Any, axis: int, allow_arrays: bool):
    if type(sel) is int or is_int(sel):
        return IntAxis(sel, dim_len, chunk_len, axis)
    if isinstance(sel, slice):
        return SliceAxis(sel, dim_len, chunk_len, axis)
    if allow_arrays and (isinstance(sel, np.ndarray | list | tuple | range) or
                         np.ndim(sel) > 0):
        return ArrayAxis(sel, dim_len, chunk_len, axis)
    if isinstance(sel, np.ndarray) and sel.ndim == 0 and sel.dtype.kind in "iu":
        return IntAxis(int(sel), dim_len, chunk_len, axis)
    kind = "basic" if not allow_arrays else "orthogonal"
    raise IndexError(f"unsupported {kind} selection item {sel!r} for axis {axis}; use .oindex "
                     "for integer arrays/masks per axis or .vindex for coordinates")
