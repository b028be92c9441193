"""One metadata document of an ``Array`` with what is derived from it (shape, chunks,
dtype and the IO engine), taken together.

Another thread may resize or append through the same ``Array`` at any moment, which
replaces its metadata. A write works its selection out from a shape and commits through
an engine: both must come from one document, or a selection of the old shape runs
through the new layout (an old edge chunk is then no longer an edge, looks wholly
overwritten, and is replaced without reading what was appended to it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from chunkstore.array.grids import read_grid
from chunkstore.codecs import build_pipeline
from chunkstore.io.engine import Engine, layout_of, open_engine
from chunkstore.metadata.nodes import describe


class Snapshot:
    """``meta`` with its chunk ``grid``, ``layout`` ((shape, chunks per axis as the
    indexers take them, dtype)) and ``engine`` (made on first use by ``make(meta)``)."""

    __slots__ = ("meta", "grid", "layout", "_engine", "_make")

    def __init__(self, meta: Any, make: Callable[[Any], Any]) -> None:
        self.meta = meta
        self.grid = read_grid(meta)
        self.layout = (tuple(meta.shape), self.grid.axis_chunking, np.dtype(meta.dtype))
        self._engine: Any = None
        self._make = make

    @property
    def shape(self) -> tuple[int, ...]:
        return self.layout[0]

    @property
    def engine(self) -> Any:
        if self._engine is None:  # two threads may both make it: either one will do
            self._engine = self._make(self.meta)
        return self._engine


def open_engine_of(store: Any, path: str, synchronizer: Any, write_empty_chunks: bool,
                   allow_unsafe: bool, cache: Any, meta: Any) -> Engine:
    """The IO engine of the array at ``path`` of ``store`` as ``meta`` describes it."""
    doc = "zarr.json" if meta.zarr_format == 3 else ".zarray"
    pipeline = build_pipeline(meta, describe(store, path, doc), allow_unsafe)
    return open_engine(store, layout_of(meta, path), pipeline, meta, "/" + path,
                       synchronizer, write_empty_chunks, cache)
