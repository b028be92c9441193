"""The engine of an array: its chunk IO, from selections to stored bytes and back, and
the one place that builds an array's layout from its metadata.

One ``Engine`` serves every array. How its write units are read and written is a
``UnitIO``, chosen by the codec chain (sharding is an array->bytes codec like any
other): units stored whole, one encoded object each (``ChunkIO``: any chain, sharding
with codecs before or after it included, where a shard is the chunk the chain encodes
and decodes whole), or shards whose inner chunks are addressable in the stored bytes,
read and written in parts through the shard index (``ShardIO``: a chain that is
``sharding_indexed`` alone). The write unit itself is decided by ``ChunkLayout``.

A codec chain is resolved for one chunk shape, and a rectilinear grid's write units
differ in shape: its engine keeps one unit IO per shape, made on first use, and hands
each the projections of its units; they share the layout (grids and keys), the store
and the caches. A regular grid has one unit IO, made with the engine.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import numpy as np

from chunkstore.codecs.pipeline import Pipeline, build_pipeline
from chunkstore.codecs.sharding import inner_chunk_shape
from chunkstore.indexing import ChunkProjection
from chunkstore.io.layout import ChunkLayout
from chunkstore.io.plain import ChunkIO
from chunkstore.io.resize import clear_outside
from chunkstore.io.sharded import ShardIO, is_sharded
from chunkstore.runtime import current
from chunkstore.storage.base import Store

#: the most chunks of one shape for the groups of a read or write of a rectilinear grid
#: to go side by side on the pool (many small groups: a grid of many lengths)
SMALL_GROUP = 4


class UnitIO(Protocol):
    """How the write units of one shape of one array are read and written."""

    layout: ChunkLayout
    dtype: np.dtype
    read_fill: Any
    chunk_pipeline: Pipeline
    chunk_shape: tuple[int, ...]  # of a chunk, the read unit (inside a shard: inner)

    def read(self, projections: Iterable[ChunkProjection], out: np.ndarray) -> None: ...

    def read_chunk(self, coords: tuple[int, ...]) -> np.ndarray: ...

    def write(self, projections: Iterable[ChunkProjection], value: np.ndarray,
              scalar: bool = False) -> None: ...

    def forget(self, keys: Iterable[str]) -> None: ...


class Engine:
    """Chunk IO of one array: selections in, bytes through the store, values out.

    ``cache``: the decoded-chunk cache (``io.cache.chunk_cache.resolve``: None for the
    shared one, whose budget is ``config["cache.chunk_bytes"]``, off by default)."""

    def __init__(self, store: Store, layout: ChunkLayout, pipeline: Pipeline, metadata: Any,
                 name: str, synchronizer: Any = None, write_empty_chunks: bool = False,
                 cache: Any = None) -> None:
        self.store, self.layout, self.pipeline, self.name = store, layout, pipeline, name
        #: how the write units are read and written (``ChunkIO`` or ``ShardIO``)
        self.kind: type = ShardIO if is_sharded(pipeline) else ChunkIO
        self._metadata = metadata
        self._args = (synchronizer, write_empty_chunks, cache)
        self._ios: dict[tuple[int, ...], UnitIO] = {}
        self._lock = threading.Lock()
        # a regular grid: the one unit IO, with the chain as given
        self._regular: UnitIO | None = None
        if layout.edges is None:
            self._regular = self.kind(store, layout, pipeline, metadata.dtype,
                                      metadata.fill_value, name, *self._args)
        first = self.io_of()
        self.dtype, self.read_fill = first.dtype, first.read_fill
        #: the codec chain of one chunk (the read unit): the array's, or the one inside its
        #: shards when the array's chain is ``sharding_indexed`` alone (the same chain for
        #: every unit shape: only the shape it is resolved for differs)
        self.chunk_pipeline: Pipeline = first.chunk_pipeline

    # -- the unit IO of a write unit -----------------------------------------------------
    def _io_of_shape(self, shape: tuple[int, ...]) -> UnitIO:
        """The unit IO of the write units of ``shape`` of a rectilinear grid (made on
        first use)."""
        io = self._ios.get(shape)
        if io is None:
            with self._lock:
                io = self._ios.get(shape)
                if io is None:
                    meta = self._metadata
                    # the same codecs as ``pipeline``, which was admitted (allow_unsafe
                    # then applied): only the chunk shape they resolve for changes
                    pipeline = build_pipeline(meta.replace(chunk_shape=shape, chunk_edges=None),
                                              f"array {self.name!r}", allow_unsafe=True)
                    io = self.kind(self.store, self.layout.with_unit_shape(shape), pipeline,
                                   meta.dtype, meta.fill_value, self.name, *self._args)
                    self._ios[shape] = io
        return io

    def io_of(self, coords: Sequence[int] | None = None) -> UnitIO:
        """The unit IO of the chunk at ``coords`` (the first chunk by default)."""
        if self._regular is not None:
            return self._regular
        chunk = (0,) * len(self.layout.shape) if coords is None else tuple(coords)
        return self._io_of_shape(self.layout.unit_shape(self.layout.unit_of(chunk)))

    def _split(self, projections: Iterable[ChunkProjection]
               ) -> list[tuple[UnitIO, list[ChunkProjection]]]:
        """The projections of a rectilinear grid grouped by the shape of their unit."""
        groups: dict[tuple[int, ...], list[ChunkProjection]] = {}
        layout = self.layout
        for p in projections:
            shape = layout.unit_shape(layout.unit_of(tuple(p.chunk_coords)))
            groups.setdefault(shape, []).append(p)
        return [(self._io_of_shape(shape), group) for shape, group in groups.items()]

    @staticmethod
    def _side_by_side(groups: list[tuple[UnitIO, list[ChunkProjection]]]) -> bool:
        """Many small groups go side by side on the pool, each inline there; else one
        after the other, each spread over the pool. They hold distinct chunks."""
        return len(groups) > 1 and max(len(g) for _, g in groups) <= SMALL_GROUP

    # -- reads and writes ----------------------------------------------------------------
    def read(self, projections: Iterable[ChunkProjection], out: np.ndarray) -> None:
        """Fill ``out`` from every projected chunk (missing chunks read as fill_value)."""
        if self._regular is not None:
            self._regular.read(projections, out)
            return
        groups = self._split(projections)
        if self._side_by_side(groups):
            current().pool.run_batched(lambda item: item[0].read(item[1], out), groups)
            return
        for io, group in groups:
            io.read(group, out)

    def read_chunk(self, coords: tuple[int, ...]) -> np.ndarray:
        """The whole (unclipped) decoded chunk at ``coords``, fill_value if not stored."""
        return self.io_of(coords).read_chunk(coords)

    def write(self, projections: Iterable[ChunkProjection], value: np.ndarray,
              scalar: bool = False) -> None:
        """Write ``value`` (already broadcast to the selection shape) into the projected
        chunks: every write unit they touch is a write unit of ``io.rmw``."""
        if self._regular is not None:
            self._regular.write(projections, value, scalar)
            return
        groups = self._split(projections)
        if self._side_by_side(groups):
            current().pool.run_batched(lambda item: item[0].write(item[1], value, scalar),
                                       groups)
            return
        for io, group in groups:
            io.write(group, value, scalar)

    def write_chunk(self, coords: tuple[int, ...], chunk: np.ndarray) -> None:
        """Encode and store one whole chunk (deleted instead when it is all fill; an
        inner chunk's shard is read, modified and written back)."""
        io = self.io_of(coords)
        full = tuple(slice(0, n) for n in io.chunk_shape)
        io.write([ChunkProjection(tuple(coords), full, full, True)], chunk)

    def forget(self, keys: Iterable[str]) -> None:
        """After the write units ``keys`` were written or deleted behind the unit IOs:
        forget what they cached of them."""
        keys = list(keys)
        for io in [self._regular] if self._regular is not None else list(self._ios.values()):
            io.forget(keys)

    def clear_outside(self, old_shape: tuple[int, ...], new_shape: tuple[int, ...]) -> None:
        """Shrinking: delete the write units wholly outside ``new_shape`` and reset the
        part of the cut ones beyond it to fill_value (so growing again shows fill, never
        stale data)."""
        clear_outside(self, self.layout, old_shape, new_shape)


def layout_of(metadata: Any, path: str) -> ChunkLayout:
    """The layout of the array at ``path`` described by ``metadata``."""
    prefix = f"{path}/" if path else ""
    key_of = metadata.chunk_key
    inner = inner_chunk_shape(metadata)
    stored = tuple(metadata.chunk_shape)
    return ChunkLayout(tuple(metadata.shape), inner or stored,
                       stored if inner is not None else None,
                       lambda coords: prefix + key_of(coords),
                       metadata.chunk_edges)


def open_engine(store: Store, layout: ChunkLayout, pipeline: Pipeline, metadata: Any,
                name: str, synchronizer: Any = None, write_empty_chunks: bool = False,
                cache: Any = None) -> Engine:
    """The engine of an array (see ``Engine``)."""
    return Engine(store, layout, pipeline, metadata, name, synchronizer, write_empty_chunks,
                  cache)
