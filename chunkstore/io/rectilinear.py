"""The engine of an array with a rectilinear chunk grid (zarr's ``rectilinear``): its
write units (chunks, or shards) differ in shape, and a codec chain is resolved for one
shape. So one engine of the plain or sharded kind is made per write-unit shape, on first
use, and each is handed the projections of its units; they share the layout (grids and
keys), the store and the caches. A regular grid never comes here."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

import numpy as np

from chunkstore.codecs.pipeline import Pipeline, build_pipeline
from chunkstore.indexing import ChunkProjection
from chunkstore.io.layout import ChunkLayout
from chunkstore.io.resize import clear_outside
from chunkstore.runtime import current
from chunkstore.storage.base import Store

#: the most chunks of one shape for the groups of a read or write to go side by side
SMALL_GROUP = 4


class RectilinearEngine:
    """The engine of an array with a rectilinear grid: one engine of the plain or
    sharded kind per write-unit shape (its codecs resolved for that shape), each handed
    the projections of its units. A regular grid never comes here."""

    def __init__(self, cls: Any, store: Store, layout: ChunkLayout, pipeline: Pipeline,
                 metadata: Any, name: str, *args: Any) -> None:
        self.store, self.layout, self.pipeline, self.name = store, layout, pipeline, name
        self._cls, self._metadata, self._args = cls, metadata, args
        self._engines: dict[tuple[int, ...], Any] = {}
        self._lock = threading.Lock()
        first = self._engine_of(layout.unit_shape((0,) * len(layout.shape)))
        self.dtype, self.read_fill = first.dtype, first.read_fill
        # the same chain for every shape (only the shape it is resolved for differs)
        self.chunk_pipeline = first.chunk_pipeline

    def _engine_of(self, shape: tuple[int, ...]) -> Any:
        """The engine of the write units of ``shape`` (made on first use)."""
        engine = self._engines.get(shape)
        if engine is None:
            with self._lock:
                engine = self._engines.get(shape)
                if engine is None:
                    meta = self._metadata
                    # the same codecs as ``pipeline``, which was admitted (allow_unsafe
                    # then applied): only the chunk shape they resolve for changes
                    pipeline = build_pipeline(meta.replace(chunk_shape=shape, chunk_edges=None),
                                              f"array {self.name!r}", allow_unsafe=True)
                    engine = self._cls(self.store, self.layout.with_unit_shape(shape), pipeline,
                                       meta.dtype, meta.fill_value, self.name, *self._args)
                    self._engines[shape] = engine
        return engine

    def _shape_of(self, chunk: tuple[int, ...]) -> tuple[int, ...]:
        return self.layout.unit_shape(self.layout.unit_of(chunk))

    def _split(self, projections: Iterable[ChunkProjection]
               ) -> dict[tuple[int, ...], list[ChunkProjection]]:
        groups: dict[tuple[int, ...], list[ChunkProjection]] = {}
        for p in projections:
            groups.setdefault(self._shape_of(tuple(p.chunk_coords)), []).append(p)
        return groups

    def read(self, projections: Iterable[ChunkProjection], out: np.ndarray) -> None:
        """Fill ``out`` from every projected chunk, each through its shape's engine. Many
        small groups (a grid of many lengths) are read side by side on the pool, each
        inline there; otherwise one after the other, each spread over the pool."""
        groups = list(self._split(projections).items())
        if len(groups) > 1 and max(len(g) for _, g in groups) <= SMALL_GROUP:
            current().pool.run_batched(lambda item: self._engine_of(item[0]).read(item[1], out), groups)
            return
        for shape, group in groups:
            self._engine_of(shape).read(group, out)

    def read_chunk(self, coords: tuple[int, ...]) -> np.ndarray:
        """The whole (unclipped) decoded chunk at ``coords``."""
        return self._engine_of(self._shape_of(tuple(coords))).read_chunk(coords)

    def decode_unit(self, key: str, blob: Any) -> np.ndarray:
        """Decode one stored write unit; errors name the array and key."""
        unit = self.layout.unit_of_key(key)
        if unit is None:
            raise ValueError(f"array {self.name!r}: {key!r} is not a chunk key of its grid")
        return self._engine_of(self.layout.unit_shape(unit)).decode_unit(key, blob)

    def write(self, projections: Iterable[ChunkProjection], value: np.ndarray,
              scalar: bool = False) -> None:
        """Write ``value`` (broadcast to the selection shape) into the projected chunks
        (many small groups side by side, as ``read``: they hold distinct chunks)."""
        groups = list(self._split(projections).items())
        if len(groups) > 1 and max(len(g) for _, g in groups) <= SMALL_GROUP:
            current().pool.run_batched(lambda item: self._engine_of(item[0]).write(item[1], value, scalar),
                        groups)
            return
        for shape, group in groups:
            self._engine_of(shape).write(group, value, scalar)

    def write_chunk(self, coords: tuple[int, ...], chunk: np.ndarray) -> None:
        """Encode and store one whole chunk."""
        self._engine_of(self._shape_of(tuple(coords))).write_chunk(coords, chunk)

    def _invalidate(self, keys: Iterable[str]) -> None:
        keys = list(keys)
        for engine in list(self._engines.values()):
            engine._invalidate(keys)

    def clear_outside(self, old_shape: tuple[int, ...], new_shape: tuple[int, ...]) -> None:
        """Shrinking: delete the write units wholly outside ``new_shape`` and reset the
        part of the cut ones beyond it to fill_value."""
        clear_outside(self, self.layout, old_shape, new_shape)
