"""Partial reads inside uncompressed chunks: fetch only the byte ranges a selection needs.

When a chunk is stored as raw C-ordered bytes (the codec chain is only ``bytes``, or a v2
array without filters/compressor), element ``i`` of the chunk lives at byte
``i * itemsize``. A selection touching a small part of a chunk then needs a few byte
ranges (coalesced when close together) instead of the whole chunk — what h5py does
for contiguous/uncompressed data, and zarr-python and tensorstore do not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

#: read the whole chunk instead when the selection needs more than this fraction of it
MAX_FRACTION = 0.25
#: ... or would need more than this many separate ranges
MAX_RANGES = 64
#: ranges closer than this many bytes are merged into one request
MERGE_GAP = 4096


@dataclass
class RangePlan:
    """Byte ranges ``[(start, stop), ...]`` of one chunk and how to pick the values."""

    ranges: list[tuple[int, int]]
    offsets: np.ndarray  # element offsets in the chunk, shaped like chunk[chunk_selection]


class RangePlanner:
    """Plans ranged reads for one array's chunk shape and stored dtype."""

    def __init__(self, chunk_shape: tuple[int, ...], stored_dtype: np.dtype) -> None:
        self.chunk_shape, self.stored_dtype = chunk_shape, stored_dtype
        self.itemsize = stored_dtype.itemsize
        self.nelements = int(np.prod(chunk_shape, dtype=np.int64))
        self._grid: np.ndarray | None = None

    @property
    def grid(self) -> np.ndarray:
        """Element offsets of the chunk, shaped like it (indexing it mirrors the data)."""
        if self._grid is None:
            dtype = np.int32 if self.nelements < 2**31 else np.int64
            self._grid = np.arange(self.nelements, dtype=dtype).reshape(self.chunk_shape)
            self._grid.flags.writeable = False
        return self._grid

    def plan(self, chunk_selection: tuple[Any, ...]) -> RangePlan | None:
        """The ranges for ``chunk[chunk_selection]``, or None when a whole read is better."""
        if all(isinstance(s, int | np.integer) for s in chunk_selection):  # one element
            offset = int(np.ravel_multi_index(chunk_selection, self.chunk_shape)) if (
                chunk_selection) else 0
            return RangePlan([(offset * self.itemsize, (offset + 1) * self.itemsize)],
                             np.array(offset))
        count = _selection_size(chunk_selection, self.chunk_shape)
        if count is None or count > MAX_FRACTION * self.nelements:
            return None
        offsets = np.asarray(self.grid[chunk_selection])
        flat = np.unique(offsets.reshape(-1))
        if flat.size == 0:
            return RangePlan([], offsets)
        breaks = np.flatnonzero(np.diff(flat) * self.itemsize > MERGE_GAP) + 1
        starts = flat[np.concatenate(([0], breaks))]
        stops = flat[np.concatenate((breaks - 1, [flat.size - 1]))] + 1
        if starts.size > MAX_RANGES:
            return None
        size = self.itemsize
        ranges = [(int(a) * size, int(b) * size) for a, b in zip(starts, stops, strict=True)]
        return RangePlan(ranges, offsets)

    def gather(self, plan: RangePlan, parts: list[bytes], flat_buffer: np.ndarray) -> np.ndarray:
        """Values of the selection from the fetched ranges (``flat_buffer``: scratch of the
        chunk's element count and stored dtype)."""
        raw = flat_buffer.view(np.uint8)
        for (start, stop), data in zip(plan.ranges, parts, strict=True):
            if len(data) != stop - start:
                raise ValueError(f"range {start}-{stop} returned {len(data)} bytes (truncated chunk)")
            raw[start:stop] = np.frombuffer(data, dtype=np.uint8)
        return flat_buffer[plan.offsets]


def _selection_size(selection: tuple[Any, ...], shape: tuple[int, ...]) -> int | None:
    """Number of elements a projection's chunk selection reads (None: unknown)."""
    if any(isinstance(s, np.ndarray) for s in selection):
        arrays = [s for s in selection if isinstance(s, np.ndarray)]
        try:
            n = int(np.prod(np.broadcast_shapes(*(a.shape for a in arrays)), dtype=np.int64))
        except ValueError:
            return None
        for s, dim in zip(selection, shape, strict=True):
            if isinstance(s, slice):
                n *= len(range(*s.indices(dim)))
        return n
    n = 1
    for s, dim in zip(selection, shape, strict=True):
        if isinstance(s, slice):
            n *= len(range(*s.indices(dim)))
    return n
