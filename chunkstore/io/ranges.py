"""Partial reads inside uncompressed chunks: fetch only the byte ranges a selection needs.

When a chunk is stored as raw C-ordered bytes (the codec chain is only ``bytes``, or a v2
array without filters/compressor), element ``i`` of the chunk lives at byte
``i * itemsize``. A selection touching a small part of a chunk then needs a few byte
ranges (coalesced when close together) instead of the whole chunk — what h5py does
for contiguous/uncompressed data, and zarr-python and tensorstore do not. Used for stores
without zero-copy views (remote, zip, memory); a local directory maps the files instead.
Each request costs ``request_cost`` bytes' worth of reading, so ranges closer than that
are merged: many tiny ranges become a few larger ones, or a single one.

Pure arithmetic: :meth:`RangePlanner.plan` turns a chunk selection into a
:class:`RangePlan`; :meth:`RangePlanner.gather` turns the fetched bytes into values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from chunkstore.io.coalesce import coalesce

#: read the whole chunk when the selection needs more than this fraction of it (gathering
#: from many ranges would cost more CPU than the IO saved)
MAX_FRACTION = 0.25
#: what one more request costs, in bytes (stores say theirs: ``Capabilities.request_cost_bytes``)
REQUEST_COST = 4096


@dataclass
class RangePlan:
    """Byte ranges ``[(start, stop), ...]`` of one chunk and how to pick the values.

    Either ``offsets`` (element offsets shaped like ``chunk[chunk_selection]``), or for
    basic selections ``offsets=None`` and the strided ``selection`` itself; ``view``
    (element offset from the first range's start, shape, byte strides) lets a single
    range be read in place, with no copy into a chunk-sized buffer.
    """

    ranges: list[tuple[int, int]]
    offsets: np.ndarray | None
    selection: tuple[Any, ...] = ()
    view: tuple[int, tuple[int, ...], tuple[int, ...]] | None = None
    range_starts: np.ndarray | None = None  # element offset where each range starts
    range_cum: np.ndarray | None = None     # elements in the ranges before each one
    packed: tuple[int, ...] | None = None   # the ranges joined are the selection, this shape

    @property
    def nbytes(self) -> int:
        """Bytes the ranges add up to."""
        return sum(b - a for a, b in self.ranges)


class RangePlanner:
    """Plans ranged reads for one array's chunk shape and stored dtype.

    >>> p = RangePlanner((4, 8), np.dtype("<i4"))
    >>> p.plan((1, slice(2, 5))).ranges   # elements 10..12 of the chunk
    [(40, 52)]
    """

    def __init__(self, chunk_shape: tuple[int, ...], stored_dtype: np.dtype,
                 request_cost: int = REQUEST_COST, max_fraction: float = MAX_FRACTION) -> None:
        self.chunk_shape, self.stored_dtype = chunk_shape, stored_dtype
        self.request_cost = request_cost
        self.itemsize = stored_dtype.itemsize
        self.nelements = int(np.prod(chunk_shape, dtype=np.int64))
        self.max_count = max_fraction * self.nelements
        strides, acc = [], 1
        for n in reversed(chunk_shape):
            strides.append(acc)
            acc *= n
        self.strides = tuple(reversed(strides))  # in elements
        self._grid: np.ndarray | None = None
        # plans of basic selections, by selection: the chunks of one selection mostly
        # share a pattern (and so do repeated selections); plans are never mutated
        self._basic_plans: dict[tuple, RangePlan | None] = {}

    @property
    def grid(self) -> np.ndarray:
        """Element offsets of the chunk, shaped like it (indexing it mirrors the data)."""
        if self._grid is None:
            dtype = np.int32 if self.nelements < 2**31 else np.int64
            grid = np.arange(self.nelements, dtype=dtype).reshape(self.chunk_shape)
            grid.flags.writeable = False
            self._grid = grid
        return self._grid

    def plan(self, chunk_selection: tuple[Any, ...]) -> RangePlan | None:
        """The ranges for ``chunk[chunk_selection]``, or None when a whole read is better."""
        arrays = 0
        for s in chunk_selection:
            if isinstance(s, np.ndarray):
                arrays += 1
            elif not isinstance(s, int | np.integer | slice):
                return None
        if not arrays:
            key = tuple((s.start, s.stop, s.step) if isinstance(s, slice) else int(s)
                        for s in chunk_selection)
            try:
                return self._basic_plans[key]
            except KeyError:
                pass
            plan = self._plan_basic(chunk_selection)
            if len(self._basic_plans) >= 1024:
                self._basic_plans.clear()
            self._basic_plans[key] = plan
            return plan
        if arrays == len(chunk_selection) and _same_shapes(chunk_selection):
            count = chunk_selection[0].size  # coordinates: one array per axis
            if count > self.max_count:
                return None
            offsets = chunk_selection[0].astype(np.int64) * self.strides[0]
            for s, st in zip(chunk_selection[1:], self.strides[1:], strict=True):
                offsets += s * st
        else:
            count = _selection_size(chunk_selection, self.chunk_shape)
            if count is None or count > self.max_count:
                return None
            offsets = np.asarray(self.grid[chunk_selection])
        flat = np.unique(offsets.reshape(-1))
        if flat.size == 0:
            return RangePlan([], offsets)
        return self._merge(flat, 1, offsets, chunk_selection, None)

    def _plan_basic(self, selection: tuple[Any, ...]) -> RangePlan | None:
        """Ints and positive-step slices: runs computed from strides, no offset arrays."""
        size = self.itemsize
        if all(isinstance(s, int | np.integer) for s in selection):  # one element
            offset = sum(int(i) * st for i, st in zip(selection, self.strides, strict=True))
            return RangePlan([(offset * size, (offset + 1) * size)], None, selection,
                             (0, (), ()))
        axes = []  # per axis: (first index, step, count)
        count, first = 1, 0
        shape, strides = [], []
        for s, n, st in zip(selection, self.chunk_shape, self.strides, strict=True):
            if isinstance(s, slice):
                start, stop, step = s.indices(n)
                if step < 0:
                    return None
                k = len(range(start, stop, step))
                shape.append(k)
                strides.append(step * st * size)
            else:
                start, step, k = int(s), 1, 1
            axes.append((start, step, k))
            first += start * st
            count *= k
        if count > self.max_count:
            return None
        if count == 0:
            return RangePlan([], None, selection)
        # trailing axes read whole make one contiguous run with the axis before them
        run, d = 1, len(axes) - 1
        while d >= 0 and axes[d][0] == 0 and axes[d][1] == 1 and axes[d][2] == self.chunk_shape[d]:
            run *= self.chunk_shape[d]
            d -= 1
        base = 0
        if d >= 0 and (axes[d][1] == 1 or axes[d][2] == 1):
            base = axes[d][0] * self.strides[d]
            run *= axes[d][2]
            d -= 1
        starts = np.array([base], dtype=np.int64)
        if d >= 0:
            for axis in range(d, -1, -1):  # outer axes: every combination starts a run
                start, step, k = axes[axis]
                offs = (start + step * np.arange(k, dtype=np.int64)) * self.strides[axis]
                starts = np.add.outer(offs, starts).reshape(-1)
        # every run holds selected elements only, in C order: unmerged runs are packed
        return self._merge(starts, run, None, selection, (first, tuple(shape), tuple(strides)))

    def _merge(self, starts: np.ndarray, run: int, offsets: np.ndarray | None,
               selection: tuple[Any, ...], view: tuple | None) -> RangePlan:
        """Coalesce sorted runs ``[start, start + run)`` whose gaps cost less to read than a
        request more (so the ranges never cost more than reading the whole chunk)."""
        size = self.itemsize
        firsts, lasts, _ = coalesce(starts, starts + run, self.request_cost // size)
        plan = RangePlan([(a * size, b * size) for a, b in
                          zip(firsts.tolist(), lasts.tolist(), strict=True)],
                         offsets, selection)
        if view is not None and len(plan.ranges) == 1:
            plan.view = (view[0] - int(firsts[0]), view[1], view[2])
        elif view is not None and len(plan.ranges) == starts.size:
            plan.packed = view[1]  # the runs laid end to end are the selection in C order
        if offsets is not None:
            plan.range_starts = firsts
            plan.range_cum = np.concatenate(([0], np.cumsum(lasts - firsts)[:-1]))
        return plan

    def gather(self, plan: RangePlan, parts: list[bytes],
               flat_buffer: np.ndarray | None = None) -> np.ndarray:
        """Values of the selection from the fetched ranges (``flat_buffer``: scratch of the
        chunk's element count and stored dtype, needed only for strided multi-range plans)."""
        if sum(map(len, parts)) != plan.nbytes:
            for (start, stop), data in zip(plan.ranges, parts, strict=True):
                if len(data) != stop - start:
                    raise ValueError(f"range {start}-{stop} returned {len(data)} bytes "
                                     "(truncated chunk)")
        if plan.offsets is not None:  # point-like: pick from the ranges laid end to end
            if not plan.ranges:
                return np.empty(plan.offsets.shape, self.stored_dtype)
            data = parts[0] if len(parts) == 1 else b"".join(parts)
            compact = np.frombuffer(data, dtype=self.stored_dtype)
            if len(parts) == 1:
                return compact[plan.offsets - plan.range_starts[0]]
            which = np.searchsorted(plan.range_starts, plan.offsets, side="right") - 1
            return compact[plan.offsets - plan.range_starts[which] + plan.range_cum[which]]
        if plan.view is not None:  # one range: a strided view of the bytes as they came
            first, shape, strides = plan.view
            return np.ndarray(shape, self.stored_dtype, buffer=parts[0],
                              offset=first * self.itemsize, strides=strides)
        if plan.packed is not None:
            joined = b"".join(parts)
            return np.frombuffer(joined, dtype=self.stored_dtype).reshape(plan.packed)
        if not plan.ranges:
            return np.empty(_basic_shape(plan.selection, self.chunk_shape), self.stored_dtype)
        if flat_buffer is None:
            flat_buffer = np.empty(self.nelements, self.stored_dtype)
        raw = flat_buffer.view(np.uint8)
        for (start, stop), data in zip(plan.ranges, parts, strict=True):
            raw[start:stop] = np.frombuffer(data, dtype=np.uint8)
        return flat_buffer.reshape(self.chunk_shape)[plan.selection]


def _same_shapes(arrays: tuple[np.ndarray, ...]) -> bool:
    shape = arrays[0].shape
    return all(a.shape == shape for a in arrays)


def _basic_shape(selection: tuple[Any, ...], shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(len(range(*s.indices(n))) for s, n in zip(selection, shape, strict=True)
                 if isinstance(s, slice))


def _selection_size(selection: tuple[Any, ...], shape: tuple[int, ...]) -> int | None:
    """Number of elements a projection's chunk selection reads (None: unknown)."""
    n = 1
    arrays = [s for s in selection if isinstance(s, np.ndarray)]
    if arrays:
        try:
            n = int(np.prod(np.broadcast_shapes(*(a.shape for a in arrays)), dtype=np.int64))
        except ValueError:
            return None
    for s, dim in zip(selection, shape, strict=True):
        if isinstance(s, slice):
            n *= len(range(*s.indices(dim)))
    return n
