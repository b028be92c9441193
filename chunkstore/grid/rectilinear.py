"""The rectilinear chunk grid: per axis one length or every chunk's length
(``grid.base`` says what a grid answers)."""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterator, Sequence
from functools import cached_property

import numpy as np

from chunkstore.grid.base import AxisSpec


class RectilinearGrid:
    """Per axis one chunk length (regular along it) or every chunk's length.

    >>> g = RectilinearGrid((25, 30), ((10, 10, 5), 15))
    >>> g.grid_shape, g.chunk_region((2, 1)), g.chunks
    ((3, 2), (slice(20, 25, None), slice(15, 30, None)), ((10, 10, 5), (15, 15)))
    """

    is_regular = False

    def __init__(self, shape: Sequence[int], specs: Sequence[AxisSpec]) -> None:
        self.shape = tuple(int(n) for n in shape)
        self.specs: tuple[AxisSpec, ...] = tuple(
            int(s) if isinstance(s, int | np.integer) else tuple(int(e) for e in s)
            for s in specs)
        if len(self.specs) != len(self.shape):
            raise ValueError(f"a rectilinear grid of {len(self.specs)} axes for a "
                             f"{len(self.shape)}-d shape")
        for axis, (s, n) in enumerate(zip(self.specs, self.shape, strict=True)):
            edges = (s,) if isinstance(s, int) else s
            if not edges or any(e < 1 for e in edges):
                raise ValueError(f"axis {axis}: chunk lengths must be positive integers, "
                                 f"got {s!r}")
            if not isinstance(s, int) and sum(s) < n:
                raise ValueError(f"axis {axis}: chunk lengths {list(s)} sum to {sum(s)}, "
                                 f"less than the axis length {n}")

    def __repr__(self) -> str:
        return f"RectilinearGrid(shape={self.shape}, specs={self.specs})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, RectilinearGrid) and other.shape == self.shape
                and other.specs == self.specs)

    def __hash__(self) -> int:
        return hash((self.shape, self.specs))

    @cached_property
    def _offsets(self) -> tuple[tuple[int, ...] | None, ...]:
        """Per explicit axis the start of every chunk and the end of the last (None for a
        regular axis)."""
        return tuple(None if isinstance(s, int) else (0, *itertools.accumulate(s))
                     for s in self.specs)

    @cached_property
    def grid_shape(self) -> tuple[int, ...]:
        """Number of chunks along each axis that hold part of the array."""
        out = []
        for s, off, n in zip(self.specs, self._offsets, self.shape, strict=True):
            if off is None:
                out.append(math.ceil(n / s))
            else:
                out.append(bisect.bisect_left(off, n) if n else 0)
        return tuple(out)

    @cached_property
    def axis_chunking(self) -> tuple[int | np.ndarray, ...]:
        """Per axis what the indexers take: the chunk length of a regular axis, else the
        chunk starts and the last chunk's end (an int64 array)."""
        return tuple(s if off is None else np.asarray(off, dtype=np.int64)
                     for s, off in zip(self.specs, self._offsets, strict=True))

    @cached_property
    def chunks(self) -> tuple[tuple[int, ...], ...]:
        """Per axis, the length of each chunk inside the array (dask's ``chunks``)."""
        out = []
        for axis, (n, g) in enumerate(zip(self.shape, self.grid_shape, strict=True)):
            if not g:
                out.append((0,))
                continue
            out.append(tuple(min(self._start(axis, i + 1), n) - self._start(axis, i)
                             for i in range(g)))
        return tuple(out)

    def _start(self, axis: int, chunk: int) -> int:
        off = self._offsets[axis]
        if off is None:
            return chunk * self.specs[axis]  # type: ignore[operator]
        return off[chunk]

    def chunk_start(self, axis: int, chunk: int) -> int:
        """Where chunk ``chunk`` starts along ``axis``."""
        return self._start(axis, chunk)

    def _length(self, axis: int, chunk: int) -> int:
        s = self.specs[axis]
        return s if isinstance(s, int) else s[chunk]

    def chunk_region(self, coords: Sequence[int]) -> tuple[slice, ...]:
        """The slices of the array a chunk covers (clipped at the array's edge)."""
        return tuple(slice(self._start(a, c), min(n, self._start(a, c + 1)))
                     for a, (c, n) in enumerate(zip(coords, self.shape, strict=True)))

    def chunk_shape(self, coords: Sequence[int]) -> tuple[int, ...]:
        """The shape of a chunk's buffer (its full lengths, unclipped)."""
        return tuple(self._length(a, c) for a, c in enumerate(coords))

    def chunk_of(self, axis: int, index: int) -> int:
        """The chunk along ``axis`` holding element ``index``."""
        off = self._offsets[axis]
        if off is None:
            return index // self.specs[axis]  # type: ignore[operator]
        return bisect.bisect_right(off, index) - 1

    def chunks_on_axis(self, axis: int, start: int, stop: int) -> range:
        """The chunks along ``axis`` that elements ``start:stop`` touch."""
        if stop <= start:
            return range(0)
        return range(self.chunk_of(axis, start), self.chunk_of(axis, stop - 1) + 1)

    def all_coords(self) -> Iterator[tuple[int, ...]]:
        """Every chunk's grid coordinates in C order."""
        return itertools.product(*(range(g) for g in self.grid_shape))
