"""Block-by-block copies with bounded memory, from any array-like into an array.

Blocks follow the target's write units (``ChunkLayout.aligned_blocks``): each block
covers whole shards (or chunks), so nothing is read back, and only the region's own
ends may be read-modify-writes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from chunkstore.io.layout import ChunkLayout

COPY_BLOCK_BYTES = 256 * 2**20


def copy_blocks(source: Any, write: Callable[[tuple[slice, ...], np.ndarray], None],
                layout: ChunkLayout, region: tuple[slice, ...], itemsize: int,
                max_bytes: int | None = None) -> None:
    """``write(block, source[part])`` for write-unit-aligned blocks tiling ``region`` of
    the target (at most ``max_bytes``, default ``COPY_BLOCK_BYTES``, decoded bytes each);
    ``source`` has the region's shape."""
    for block, part in block_parts(layout, region, itemsize, max_bytes):
        write(block, np.asarray(source[part]))


def block_parts(layout: ChunkLayout, region: tuple[slice, ...], itemsize: int,
                max_bytes: int | None = None
                ) -> Iterator[tuple[tuple[slice, ...], tuple[slice, ...]]]:
    """``(block, part)``: the blocks ``copy_blocks`` writes, each with the part of a source
    of the region's shape that goes there."""
    limit = COPY_BLOCK_BYTES if max_bytes is None else max_bytes
    for block in layout.aligned_blocks(region, itemsize, limit):
        yield block, tuple(slice(b.start - r.start, b.stop - r.start)
                           for b, r in zip(block, region, strict=True))


def copy_into(source: Any, target: Any, max_bytes: int | None = None) -> None:
    """Copy an array-like (ndarray, memmap, h5py dataset, Array) into the Array
    ``target`` of the same shape."""
    if tuple(source.shape) != tuple(target.shape):
        raise ValueError(f"cannot copy shape {tuple(source.shape)} into array {target.name!r} "
                         f"of shape {target.shape}")
    region = tuple(slice(0, n) for n in target.shape)
    copy_blocks(source, target.write_region, target.layout, region, target.dtype.itemsize,
                max_bytes)
