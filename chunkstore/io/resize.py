"""Shrinking an array: the write units outside the new shape go, and the parts of the
kept units beyond the new edge are reset to fill_value (so growing again shows fill)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..indexing import OrthogonalIndexer
from .layout import ChunkLayout


def clear_outside(engine: Any, layout: ChunkLayout, old_shape: tuple[int, ...],
                  new_shape: tuple[int, ...]) -> None:
    """``clear_outside`` of either engine: whole write units outside go, and the bands of
    the kept units beyond the new edge are written with fill_value (read-modify-writes)."""
    doomed = [layout.unit_key(u) for u in layout.units_outside(new_shape)]
    try:
        engine.store.delete_many(doomed)
    finally:
        invalidate = getattr(engine, "_invalidate", None)
        if invalidate is not None:
            invalidate(doomed)
    unit = layout.write_shape
    kept = tuple(min(o, -(-n // w) * w) for o, n, w in zip(old_shape, new_shape, unit,
                                                          strict=True))
    for axis, (n, k) in enumerate(zip(new_shape, kept, strict=True)):
        if k <= n:
            continue
        band = tuple(slice(n, k) if i == axis else slice(0, kept[i])
                     for i in range(len(old_shape)))
        indexer = OrthogonalIndexer(band, kept, layout.chunks, False)
        fill = np.full(indexer.shape, engine.read_fill, dtype=engine.dtype)
        engine.write(indexer, fill)
