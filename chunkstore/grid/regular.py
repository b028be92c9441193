"""The regular chunk grid: every chunk of one shape (``grid.base`` says what a grid
answers)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from functools import cached_property

import numpy as np


class RegularGrid:
    """Chunks of one shape; the last along an axis may reach past the array's edge."""

    is_regular = True

    def __init__(self, shape: Sequence[int], chunk_shape: Sequence[int]) -> None:
        self.shape, self.regular_chunks = tuple(shape), tuple(chunk_shape)

    def __repr__(self) -> str:
        return f"RegularGrid(shape={self.shape}, chunks={self.regular_chunks})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, RegularGrid) and other.shape == self.shape
                and other.regular_chunks == self.regular_chunks)

    def __hash__(self) -> int:
        return hash((self.shape, self.regular_chunks))

    @cached_property
    def grid_shape(self) -> tuple[int, ...]:
        """Number of chunks along each axis."""
        return tuple(math.ceil(n / c) if c else 0
                     for n, c in zip(self.shape, self.regular_chunks, strict=True))

    @property
    def axis_chunking(self) -> tuple[int | np.ndarray, ...]:
        """Per axis what the indexers take: the chunk length."""
        return self.regular_chunks

    @cached_property
    def chunks(self) -> tuple[tuple[int, ...], ...]:
        """Per axis, the length of each chunk inside the array (dask's ``chunks``)."""
        return tuple(tuple(min(c, n - i * c) for i in range(g)) if g else (0,)
                     for n, c, g in zip(self.shape, self.regular_chunks, self.grid_shape,
                                        strict=True))

    def chunk_region(self, coords: Sequence[int]) -> tuple[slice, ...]:
        """The slices of the array a chunk covers (clipped at the array's edge)."""
        return tuple(slice(c * cl, min(n, (c + 1) * cl))
                     for c, n, cl in zip(coords, self.shape, self.regular_chunks, strict=True))

    def chunk_shape(self, coords: Sequence[int]) -> tuple[int, ...]:
        """The shape of a chunk's buffer (unclipped)."""
        return self.regular_chunks

    def chunk_of(self, axis: int, index: int) -> int:
        """The chunk along ``axis`` holding element ``index``."""
        return index // self.regular_chunks[axis]

    def chunk_start(self, axis: int, chunk: int) -> int:
        """Where chunk ``chunk`` starts along ``axis``."""
        return chunk * self.regular_chunks[axis]

    def chunks_on_axis(self, axis: int, start: int, stop: int) -> range:
        """The chunks along ``axis`` that elements ``start:stop`` touch."""
        if stop <= start:
            return range(0)
        c = self.regular_chunks[axis]
        return range(start // c, (stop - 1) // c + 1)

    def all_coords(self) -> Iterator[tuple[int, ...]]:
        """Every chunk's grid coordinates in C order."""
        return itertools.product(*(range(g) for g in self.grid_shape))
