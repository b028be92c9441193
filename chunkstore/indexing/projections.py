"""Pure selection math: a selection -> the chunks it touches and where data goes.

No IO here. Every indexer yields ``ChunkProjection``s: for each touched chunk, the part
of the chunk (``chunk_selection``) and the part of the output (``out_selection``) that
correspond, and whether the chunk is covered entirely (so a write needs no read).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

Selection = Any


class ChunkProjection(NamedTuple):
    chunk_coords: tuple[int, ...]
    chunk_selection: tuple[Any, ...]
    out_selection: tuple[Any, ...]
    is_complete: bool


def _is_int(x: Any) -> bool:
    return isinstance(x, int | np.integer) and not isinstance(x, bool | np.bool_)


def normalize_int(i: Any, dim_len: int, axis: int) -> int:
    i = int(i)
    if i < 0:
        i += dim_len
    if not 0 <= i < dim_len:
        raise IndexError(f"index {i if i >= 0 else i - dim_len} is out of bounds for axis "
                         f"{axis} with size {dim_len}")
    return i


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
# each yields parts ``(chunk, chunk_sel, out_sel, complete)``: the chunk's number along the
# axis, what to take from it (int | slice | ndarray), where it goes in the output (None when
# the axis is dropped | slice | ndarray) and whether the chunk's whole extent is taken
AxisPart = tuple[int, Any, Any, bool]


class _IntAxis:
    drop = True
    nitems = 1

    def __init__(self, i: Any, dim_len: int, chunk_len: int, axis: int) -> None:
        i = int(i)
        if not 0 <= i < dim_len:
            i = normalize_int(i, dim_len, axis)
        c, off = divmod(i, chunk_len)
        self.part = (c, off, None, chunk_len == 1)

    def parts(self) -> list[AxisPart]:
        return [self.part]


class _SliceAxis:
    def __init__(self, s: slice, dim_len: int, chunk_len: int, axis: int) -> None:
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


class _ArrayAxis:
    """Integer array (any order, repeats, negatives) or bool mask along one axis."""

    def __init__(self, idx: Any, dim_len: int, chunk_len: int, axis: int) -> None:
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
        arr = arr.astype(np.intp, copy=True)
        neg = arr < 0
        arr[neg] += dim_len
        if arr.size and (arr.min() < 0 or arr.max() >= dim_len):
            bad = np.asarray(idx)[(arr < 0) | (arr >= dim_len)][0]
            raise IndexError(f"index {bad} is out of bounds for axis {axis} with size {dim_len}")
        self.idx, self.chunk_len, self.dim_len = arr, chunk_len, dim_len
        self.nitems = arr.size
        self.drop = False

    def parts(self) -> list[AxisPart]:
        return list(self._parts()) if self.nitems else []

    def _parts(self) -> Iterator[AxisPart]:
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
            if order is None:
                positions = slice(lo, hi)
                local = self.idx[lo:hi] - c * self.chunk_len
            else:
                positions = order[lo:hi]
                local = self.idx[positions] - c * self.chunk_len
            valid = min(self.chunk_len, self.dim_len - c * self.chunk_len)
            complete = local.size == valid and np.array_equal(local, np.arange(valid))
            yield (c, local, positions, bool(complete))


def _axis_indexer(sel: Any, dim_len: int, chunk_len: int, axis: int, allow_arrays: bool):
    if type(sel) is int or _is_int(sel):
        return _IntAxis(sel, dim_len, chunk_len, axis)
    if isinstance(sel, slice):
        return _SliceAxis(sel, dim_len, chunk_len, axis)
    if allow_arrays and (isinstance(sel, np.ndarray | list | tuple | range) or
                         np.ndim(sel) > 0):
        return _ArrayAxis(sel, dim_len, chunk_len, axis)
    if isinstance(sel, np.ndarray) and sel.ndim == 0 and sel.dtype.kind in "iu":
        return _IntAxis(int(sel), dim_len, chunk_len, axis)
    kind = "basic" if not allow_arrays else "orthogonal"
    raise IndexError(f"unsupported {kind} selection item {sel!r} for axis {axis}; use .oindex "
                     "for integer arrays/masks per axis or .vindex for coordinates")


def _slice_positions(s: slice) -> np.ndarray:
    """The indices of a projection's slice (explicit start; ``stop=None`` only when a
    negative step runs down to index 0)."""
    step = 1 if s.step is None else s.step
    stop = s.stop if s.stop is not None else (-1 if step < 0 else s.start)
    return np.arange(s.start or 0, stop, step)


def _ix(selection: tuple[Any, ...]) -> tuple[Any, ...]:
    """Make a mixed int/slice/array tuple index orthogonally (np.ix_ where needed)."""
    n_arrays = sum(isinstance(s, np.ndarray) for s in selection)
    n_ints = sum(_is_int(s) for s in selection)
    # one array alone indexes orthogonally; ints or more arrays would make NumPy
    # broadcast them together (and move the axes), so mesh every array/slice axis
    if n_arrays == 0 or (n_arrays == 1 and n_ints == 0):
        return selection
    # with two or more arrays, every non-int axis becomes an open-mesh array
    expanded = [s if isinstance(s, np.ndarray) else (_slice_positions(s)
                if isinstance(s, slice) else None) for s in selection]
    keep = [e for e in expanded if e is not None]
    meshes = iter(np.ix_(*keep))
    return tuple(next(meshes) if e is not None else s for e, s in zip(expanded, selection, strict=True))


class OrthogonalIndexer:
    """Basic (ints, slices, Ellipsis) or orthogonal (plus int arrays / masks per axis)."""

    def __init__(self, selection: Selection, shape: Sequence[int], chunks: Sequence[int],
                 orthogonal: bool = True) -> None:
        sel = expand_ellipsis(selection, len(shape))
        self.axes = [_axis_indexer(sel[i], shape[i], chunks[i], i, orthogonal)
                     for i in range(len(sel))]
        self.kept = [not ax.drop for ax in self.axes]
        self.shape = tuple(ax.nitems for ax in self.axes if not ax.drop)
        self.is_basic = not any(type(ax) is _ArrayAxis for ax in self.axes)

    def __iter__(self) -> Iterator[ChunkProjection]:
        per_axis = [ax.parts() for ax in self.axes]
        if not per_axis:  # a 0-d array: its one chunk, whole
            yield ChunkProjection((), (), (), True)
            return
        mesh = not self.is_basic
        kept = None if all(self.kept) else self.kept
        for combo in itertools.product(*per_axis):
            coords, chunk_sel, out_sel, complete = zip(*combo, strict=True)
            if kept is not None:
                out_sel = tuple(itertools.compress(out_sel, kept))
            if mesh:
                chunk_sel, out_sel = _ix(chunk_sel), _ix(out_sel)
            yield ChunkProjection(coords, chunk_sel, out_sel, all(complete))


class BasicIndexer(OrthogonalIndexer):
    """Ints (negative too), slices with any non-zero step, Ellipsis."""

    def __init__(self, selection: Selection, shape: Sequence[int], chunks: Sequence[int]) -> None:
        super().__init__(selection, shape, chunks, orthogonal=False)


class CoordinateIndexer:
    """Points given by one integer array per axis (broadcast together), or a bool mask."""

    def __init__(self, selection: Selection, shape: Sequence[int], chunks: Sequence[int]) -> None:
        ndim = len(shape)
        if not isinstance(selection, tuple):
            selection = (selection,)
        if len(selection) == 1 and np.asarray(selection[0]).dtype == bool:
            mask = np.asarray(selection[0])
            if mask.shape != tuple(shape):
                raise IndexError(f"boolean mask of shape {mask.shape} does not match the array "
                                 f"shape {tuple(shape)}")
            selection = np.nonzero(mask)
        if len(selection) != ndim:
            raise IndexError(f"coordinate selection needs one index array per axis: array is "
                             f"{ndim}-dimensional, got {len(selection)}")
        arrays = []
        for axis, s in enumerate(selection):
            a = np.asarray(s)
            if isinstance(s, slice) or (a.dtype.kind not in "iu" and a.size):
                raise IndexError(f"coordinate selection for axis {axis} must be integers, got "
                                 f"{s!r}")
            arrays.append(a.astype(np.intp))
        try:
            arrays = np.broadcast_arrays(*arrays)
        except ValueError as e:
            raise IndexError(f"coordinate arrays cannot be broadcast together: {e}") from None
        self.shape = arrays[0].shape if arrays else ()
        coords = []
        for axis, (a, n) in enumerate(zip(arrays, shape, strict=True)):
            a = a.reshape(-1).copy()
            a[a < 0] += n
            if a.size and (a.min() < 0 or a.max() >= n):
                bad = a[(a < 0) | (a >= n)][0]
                raise IndexError(f"index {bad} is out of bounds for axis {axis} with size {n}")
            coords.append(a)
        self.coords, self.chunks, self.array_shape = coords, tuple(chunks), tuple(shape)

    def __iter__(self) -> Iterator[ChunkProjection]:
        npoints = int(np.prod(self.shape, dtype=np.int64))
        if npoints == 0:
            return
        chunk_idx = [c // cl for c, cl in zip(self.coords, self.chunks, strict=True)]
        grid = [math.ceil(n / cl) for n, cl in zip(self.array_shape, self.chunks, strict=True)]
        linear = np.ravel_multi_index(chunk_idx, grid) if grid else np.zeros(npoints, np.intp)
        order = np.argsort(linear, kind="stable")  # stable: repeated points keep their order
        sorted_lin = linear[order]
        bounds = (np.flatnonzero(np.diff(sorted_lin)) + 1).tolist()
        starts, stops = [0, *bounds], [*bounds, npoints]
        # sort once, then every chunk's part is a slice (a view, no per-chunk fancy indexing)
        local = [(c % cl)[order] for c, cl in zip(self.coords, self.chunks, strict=True)]
        firsts = order[starts]
        chunk_coords = list(zip(*(ci[firsts].tolist() for ci in chunk_idx), strict=True))
        for cc, lo, hi in zip(chunk_coords, starts, stops, strict=True):
            yield ChunkProjection(cc, tuple(c[lo:hi] for c in local), (order[lo:hi],), False)


# -- NumPy's rules for ``a[selection]`` --------------------------------------------------
ORTHOGONAL, COORDINATE, BASIC = "orthogonal", "coordinate", "basic"


def _as_index_array(item: Any) -> Any:
    """An array-like index that is not a NumPy array or list (a chunkstore Array used as a
    mask, a dask array...) as an ndarray; anything else unchanged."""
    if isinstance(item, np.ndarray | list | slice) or item is Ellipsis or item is None:
        return item
    if _is_int(item) or isinstance(item, bool | np.bool_ | float | str | bytes | tuple):
        return item
    if hasattr(item, "__array__") and hasattr(item, "shape") and len(item.shape) > 0:
        return np.asarray(item)
    return item


def numpy_selection(selection: Selection, shape: Sequence[int]) -> tuple[Selection, str]:
    """``(selection, kind)`` giving ``a[selection]`` NumPy's result, ``kind`` being how to
    run it: "basic" (ints, slices, Ellipsis), "orthogonal" (one index array, where NumPy
    indexes orthogonally) or "coordinate" (points: a whole-array mask, one index array
    per axis, or NumPy's mixed advanced indexing rewritten as points).

    Mixed advanced indexing follows NumPy: the index arrays (and ints) broadcast together;
    their dimensions replace them in place when they are adjacent, else come first; the
    sliced axes keep their place. So on a 5x5x5 array ``a[[1, 2, 3], [1, 2, 3]]`` has
    shape (3, 5) and assigning to it writes 15 elements."""
    ndim = len(shape)
    was_tuple = isinstance(selection, tuple)
    items = tuple(_as_index_array(s) for s in (selection if was_tuple else (selection,)))
    arrays = [isinstance(s, np.ndarray | list) for s in items]
    plain = items if was_tuple else items[0]
    if not any(arrays):
        return plain, BASIC
    first = np.asarray(items[0])
    if len(items) == 1 and first.dtype == bool and first.ndim == ndim > 1:
        return items[0], COORDINATE  # a whole-array mask
    if all(arrays) and len(items) == ndim and ndim > 1:
        return plain, COORDINATE
    if _orthogonal_is_numpy(items, arrays):
        return plain, ORTHOGONAL
    return _mixed_as_points(items, shape), COORDINATE


def _orthogonal_is_numpy(items: tuple[Any, ...], arrays: list[bool]) -> bool:
    """One 1-d index array, with ints only next to it (or before every slice): then
    NumPy's result is the orthogonal one."""
    if sum(arrays) != 1:
        return False
    pos = arrays.index(True)
    if np.ndim(items[pos]) != 1:
        return False
    advanced = [i for i, s in enumerate(items) if arrays[i] or _is_int(s)]
    if advanced == list(range(advanced[0], advanced[-1] + 1)):
        return True
    return not any(isinstance(s, slice) or s is Ellipsis for s in items[:pos])


def _mixed_as_points(items: tuple[Any, ...], shape: Sequence[int]) -> tuple[np.ndarray, ...]:
    """One coordinate array per axis, broadcastable to NumPy's result shape."""
    sel = expand_ellipsis(items, len(shape))
    advanced: dict[int, np.ndarray] = {}
    for axis, s in enumerate(sel):
        if isinstance(s, slice):
            continue
        a = np.asarray(s)
        if a.dtype == bool:
            if a.ndim != 1:
                raise IndexError(f"a boolean index mixed with other index arrays must be 1-d "
                                 f"(axis {axis}, got {a.ndim}-d)")
            if a.shape[0] != shape[axis]:
                raise IndexError(f"boolean index of shape {a.shape} does not match axis "
                                 f"{axis} of size {shape[axis]}")
            a = np.flatnonzero(a)
        elif a.size and a.dtype.kind not in "iu":
            raise IndexError(f"arrays used as indices must be of integer or boolean type "
                             f"(axis {axis}, got {a.dtype})")
        advanced[axis] = a.astype(np.intp)
    try:
        bshape = np.broadcast_shapes(*(a.shape for a in advanced.values()))
    except ValueError as e:
        raise IndexError(f"shape mismatch: index arrays could not be broadcast together: "
                         f"{e}") from None
    axes = sorted(advanced)
    sliced = [i for i in range(len(shape)) if i not in advanced]
    if axes == list(range(axes[0], axes[-1] + 1)):  # adjacent: in place of the first
        before = [i for i in sliced if i < axes[0]]
        after = [i for i in sliced if i > axes[0]]
    else:  # separated by a slice: the broadcast dimensions come first
        before, after = [], sliced
    nb = len(bshape)
    out_ndim = len(before) + nb + len(after)
    coords = []
    for axis in range(len(shape)):
        if axis in advanced:
            a = np.broadcast_to(advanced[axis], bshape)
            coords.append(a.reshape((1,) * len(before) + bshape + (1,) * len(after)))
            continue
        start, stop, step = sel[axis].indices(shape[axis])
        positions = np.arange(start, stop, step, dtype=np.intp)
        dim = before.index(axis) if axis in before else len(before) + nb + after.index(axis)
        coords.append(positions.reshape([-1 if d == dim else 1 for d in range(out_ndim)]))
    return tuple(coords)


def block_selection_to_basic(selection: Selection, shape: Sequence[int],
                             chunks: Sequence[int]) -> tuple[slice, ...]:
    """Translate a selection in units of chunks (ints / step-1 slices) into element slices."""
    sel = expand_ellipsis(selection, len(shape))
    out = []
    for axis, (s, n, cl) in enumerate(zip(sel, shape, chunks, strict=True)):
        nblocks = math.ceil(n / cl)
        if _is_int(s):
            b = normalize_int(s, nblocks, axis)
            out.append(slice(b * cl, min(n, (b + 1) * cl)))
        elif isinstance(s, slice):
            if s.step not in (None, 1):
                raise IndexError(f"block selection slices must have step 1 (axis {axis})")
            start, stop, _ = s.indices(nblocks)
            out.append(slice(start * cl, min(n, max(start, stop) * cl)))
        else:
            raise IndexError(f"block selection supports ints and slices only (axis {axis}, "
                             f"got {s!r})")
    return tuple(out)


def chunk_grid_shape(shape: Sequence[int], chunks: Sequence[int]) -> tuple[int, ...]:
    """Number of chunks along each axis."""
    return tuple(math.ceil(n / c) for n, c in zip(shape, chunks, strict=True))


def chunk_region(coords: Sequence[int], shape: Sequence[int], chunks: Sequence[int]
                 ) -> tuple[slice, ...]:
    """The slices of the array a chunk covers (clipped at the array edge)."""
    return tuple(slice(c * cl, min(n, (c + 1) * cl))
                 for c, n, cl in zip(coords, shape, chunks, strict=True))


def all_chunk_coords(shape: Sequence[int], chunks: Sequence[int]) -> Iterator[tuple[int, ...]]:
    """Every chunk's grid coordinates in C order."""
    return itertools.product(*(range(g) for g in chunk_grid_shape(shape, chunks)))
