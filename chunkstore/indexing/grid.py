"""The chunk grid: chunks per axis, the region a chunk covers, every chunk's coordinates,
and block selections (in units of chunks) as element slices."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence

from .axes import Selection, expand_ellipsis, is_int, normalize_int


def block_selection_to_basic(selection: Selection, shape: Sequence[int],
                             chunks: Sequence[int]) -> tuple[slice, ...]:
    """Translate a selection in units of chunks (ints / step-1 slices) into element slices."""
    sel = expand_ellipsis(selection, len(shape))
    out = []
    for axis, (s, n, cl) in enumerate(zip(sel, shape, chunks, strict=True)):
        nblocks = math.ceil(n / cl)
        if is_int(s):
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
