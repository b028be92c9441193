"""Chunk-by-chunk copies with bounded memory, from any array-like into an Array."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from .array import Array

COPY_BLOCK_BYTES = 256 * 2**20


def block_regions(shape: tuple[int, ...], chunks: tuple[int, ...], itemsize: int,
                  max_bytes: int = COPY_BLOCK_BYTES) -> Iterator[tuple[slice, ...]]:
    """Chunk-aligned regions of at most ``max_bytes`` (at least one chunk) covering ``shape``.

    Whole chunk rows are grouped along the first axis, so each region is written
    without reading anything back.
    """
    if not shape:
        yield ()
        return
    row_bytes = math.prod(shape[1:]) * itemsize
    if row_bytes * chunks[0] <= max_bytes:
        rows = max(chunks[0], (max_bytes // max(1, row_bytes)) // chunks[0] * chunks[0])
        for start in range(0, shape[0], rows):
            yield (slice(start, min(shape[0], start + rows)),) + tuple(slice(0, n) for n in shape[1:])
        return
    # a chunk row is too big: walk chunk by chunk
    import itertools
    grids = [range(0, n, c) for n, c in zip(shape, chunks, strict=True)]
    for starts in itertools.product(*grids):
        yield tuple(slice(s, min(n, s + c)) for s, n, c in zip(starts, shape, chunks, strict=True))


def copy_into(source: Any, target: Array, max_bytes: int = COPY_BLOCK_BYTES) -> None:
    """Copy an array-like (ndarray, memmap, h5py dataset, Array) into ``target``."""
    if tuple(source.shape) != target.shape:
        raise ValueError(f"cannot copy shape {tuple(source.shape)} into array {target.name!r} "
                         f"of shape {target.shape}")
    unit = target.shards or target.chunks  # whole shards: no shard is read back
    for region in block_regions(target.shape, unit, target.dtype.itemsize, max_bytes):
        target[region] = source[region]


def copy_into_region(source: Any, target: Array, region: tuple[slice, ...],
                     max_bytes: int = COPY_BLOCK_BYTES) -> None:
    """``target[region] = source`` one bounded block at a time (``source`` fills the region)."""
    shape = tuple(s.stop - s.start for s in region)
    for block in block_regions(shape, target.chunks, target.dtype.itemsize, max_bytes):
        dest = tuple(slice(r.start + b.start, r.start + b.stop)
                     for r, b in zip(region, block, strict=True))
        target[dest] = np.asarray(source[block])
