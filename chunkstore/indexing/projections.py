"""Indexers: a whole selection -> one ``ChunkProjection`` per touched chunk (the part of
the chunk, the part of the output, and whether the chunk is covered entirely)."""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

from chunkstore.errors import BoundsCheckError
from chunkstore.indexing.axes import (
    ArrayAxis,
    Selection,
    axis_indexer,
    check_unsigned,
    expand_ellipsis,
    is_int,
)


class ChunkProjection(NamedTuple):
    chunk_coords: tuple[int, ...]
    chunk_selection: tuple[Any, ...]
    out_selection: tuple[Any, ...]
    is_complete: bool


def _slice_positions(s: slice) -> np.ndarray:
    """The indices of a projection's slice (explicit start; ``stop=None`` only when a
    negative step runs down to index 0)."""
    step = 1 if s.step is None else s.step
    stop = s.stop if s.stop is not None else (-1 if step < 0 else s.start)
    return np.arange(s.start or 0, stop, step)


def _ix(selection: tuple[Any, ...]) -> tuple[Any, ...]:
    """Make a mixed int/slice/array tuple index orthogonally (np.ix_ where needed)."""
    n_arrays = sum(isinstance(s, np.ndarray) for s in selection)
    n_ints = sum(is_int(s) for s in selection)
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


class OrthogonalIndexer(Sequence[ChunkProjection]):
    """Basic (ints, slices, Ellipsis) or orthogonal (plus int arrays / masks per axis)."""

    def __init__(self, selection: Selection, shape: Sequence[int], chunks: Sequence[int],
                 orthogonal: bool = True) -> None:
        sel = expand_ellipsis(selection, len(shape))
        self.axes = [axis_indexer(sel[i], shape[i], chunks[i], i, orthogonal)
                     for i in range(len(sel))]
        self.kept = [not ax.drop for ax in self.axes]
        self._drops = not all(self.kept)
        self.shape = tuple(ax.nitems for ax in self.axes if not ax.drop)
        self.is_basic = not any(type(ax) is ArrayAxis for ax in self.axes)

    @functools.cached_property
    def _per_axis(self) -> list[list[Any]]:
        return [ax.parts() for ax in self.axes]

    @functools.cached_property
    def _count(self) -> int:
        return math.prod(len(parts) for parts in self._per_axis)

    @functools.cached_property
    def _radices(self) -> list[tuple[int, int, list[Any]]]:
        """Per axis, last axis first: (axis, how many parts, the parts), the digits
        ``__getitem__`` splits an index into."""
        return [(a, len(p), p) for a, p in reversed(list(enumerate(self._per_axis)))]

    def __len__(self) -> int:
        """How many chunks the selection touches."""
        return self._count

    def __getitem__(self, i: int) -> ChunkProjection:  # type: ignore[override]
        """The ``i``-th projection in iteration (C) order, made on demand: a write of
        many chunks holds none of them longer than it needs it."""
        n = self._count
        if not -n <= i < n:
            raise IndexError(f"projection {i} of {n}")
        i %= n
        combo: list[Any] = [None] * len(self.axes)
        for axis, size, parts in self._radices:
            i, j = divmod(i, size)
            combo[axis] = parts[j]
        return self._projection(combo)

    def __iter__(self) -> Iterator[ChunkProjection]:
        for combo in itertools.product(*self._per_axis):
            yield self._projection(combo)

    def _projection(self, combo: Sequence[Any]) -> ChunkProjection:
        if not combo:  # a 0-d array: its one chunk, whole
            return ChunkProjection((), (), (), True)
        coords, chunk_sel, out_sel, complete = zip(*combo, strict=True)
        if self._drops:
            out_sel = tuple(itertools.compress(out_sel, self.kept))
        if not self.is_basic:
            chunk_sel, out_sel = _ix(chunk_sel), _ix(out_sel)
        return ChunkProjection(coords, chunk_sel, out_sel, all(complete))


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
        for axis, (s, n) in enumerate(zip(selection, shape, strict=True)):
            a = np.asarray(s)
            if isinstance(s, slice) or (a.dtype.kind not in "iu" and a.size):
                raise IndexError(f"coordinate selection for axis {axis} must be integers, got "
                                 f"{s!r}")
            check_unsigned(a, n, axis)
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
                raise BoundsCheckError(f"index {bad} is out of bounds for axis {axis} with "
                                       f"size {n}")
            coords.append(a)
        self.coords, self.chunks, self.array_shape = coords, tuple(chunks), tuple(shape)
        # ``chunks``: per axis a chunk length, or a rectilinear axis's chunk starts and
        # end (``ChunkGrid.axis_chunking``)

    def __iter__(self) -> Iterator[ChunkProjection]:
        npoints = int(np.prod(self.shape, dtype=np.int64))
        if npoints == 0:
            return
        chunk_idx = [c // cl if type(cl) is not np.ndarray else np.searchsorted(cl, c, side="right") - 1
                     for c, cl in zip(self.coords, self.chunks, strict=True)]
        grid = [math.ceil(n / cl) if type(cl) is not np.ndarray else len(cl) - 1
                for n, cl in zip(self.array_shape, self.chunks, strict=True)]
        linear = np.ravel_multi_index(chunk_idx, grid) if grid else np.zeros(npoints, np.intp)
        order = np.argsort(linear, kind="stable")  # stable: repeated points keep their order
        sorted_lin = linear[order]
        bounds = (np.flatnonzero(np.diff(sorted_lin)) + 1).tolist()
        starts, stops = [0, *bounds], [*bounds, npoints]
        # sort once, then every chunk's part is a slice (a view, no per-chunk fancy indexing)
        local = [((c % cl) if type(cl) is not np.ndarray else c - cl[ci])[order]
                 for c, cl, ci in zip(self.coords, self.chunks, chunk_idx, strict=True)]
        firsts = order[starts]
        chunk_coords = list(zip(*(ci[firsts].tolist() for ci in chunk_idx), strict=True))
        for cc, lo, hi in zip(chunk_coords, starts, stops, strict=True):
            yield ChunkProjection(cc, tuple(c[lo:hi] for c in local), (order[lo:hi],), False)
