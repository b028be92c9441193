"""Shrinking an array: the write units outside the new shape go, and the parts of the
kept units beyond the new edge are reset to fill_value (so growing again shows fill).

A grid of few write units is worked out from the shape; a larger one (a sparse array of
millions of chunks) from the units its store holds, listed once: time and memory then
follow what is stored, not the size of the grid."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from chunkstore.indexing import OrthogonalIndexer
from chunkstore.io.layout import ChunkLayout


def clear_outside(engine: Any, layout: ChunkLayout, old_shape: tuple[int, ...],
                  new_shape: tuple[int, ...]) -> None:
    """``Engine.clear_outside``: whole write units outside go, and the bands of
    the kept units beyond the new edge are written with fill_value (read-modify-writes)."""
    grid = layout.write_grid
    # per axis, the end of the last unit starting inside the new shape (at most the old)
    kept = tuple(o if n >= o else min(o, grid.chunk_start(a, grid.chunk_of(a, n - 1) + 1))
                 if n else 0 for a, (o, n) in enumerate(zip(old_shape, new_shape, strict=True)))
    across = [len(grid.chunks_on_axis(a, 0, k)) for a, k in enumerate(kept)]  # kept units
    in_bands = sum(math.prod(across) // across[axis]
                   for axis, (n, k) in enumerate(zip(new_shape, kept, strict=True)) if k > n)
    if layout.count_outside(new_shape) + in_bands > ENUMERATE_MAX_UNITS:
        stored = [u for u in map(layout.unit_of_key,
                                 engine.store.list_prefix(layout.unit_prefix)) if u is not None]
        _delete(engine, layout, [u for u in stored if layout.unit_outside(u, new_shape)])
        for u in stored:  # each stored unit across the new edge, its part beyond it
            region = layout.unit_region(u)
            for axis, n in enumerate(new_shape):
                if region[axis].stop > n and not layout.unit_outside(u, new_shape):
                    band = tuple(slice(n, r.stop) if i == axis else r
                                 for i, r in enumerate(region))
                    _fill(engine, layout, band, kept)
        return
    _delete(engine, layout, layout.units_outside(new_shape))
    for axis, (n, k) in enumerate(zip(new_shape, kept, strict=True)):
        if k > n:
            _fill(engine, layout, tuple(slice(n, k) if i == axis else slice(0, kept[i])
                                        for i in range(len(old_shape))), kept)


#: above this many write units to delete or clear, the stored ones are listed instead
ENUMERATE_MAX_UNITS = 4096


def _delete(engine: Any, layout: ChunkLayout, units: Iterable[tuple[int, ...]]) -> None:
    doomed = [layout.unit_key(u) for u in units]
    try:
        engine.store.delete_many(doomed)
    finally:
        engine.forget(doomed)


def _fill(engine: Any, layout: ChunkLayout, band: tuple[slice, ...],
          kept: tuple[int, ...]) -> None:
    """Write fill_value over ``band`` (read-modify-writes of the units it cuts)."""
    indexer = OrthogonalIndexer(band, kept, layout.read_grid.axis_chunking, False)
    engine.write(indexer, np.full(indexer.shape, engine.read_fill, dtype=engine.dtype))
