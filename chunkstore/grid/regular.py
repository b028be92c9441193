"""The regular chunk grid: chunks per axis, the region a chunk covers, every chunk's
coordinates."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence


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
