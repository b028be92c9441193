"""The engine protocol (what the array layer calls) and the one place that picks an
engine and builds an array's layout from its metadata."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

import numpy as np

from chunkstore.codecs.pipeline import Pipeline
from chunkstore.codecs.sharding import inner_chunk_shape
from chunkstore.indexing import ChunkProjection
from chunkstore.io.layout import ChunkLayout
from chunkstore.io.plain import PlainEngine
from chunkstore.io.rectilinear import RectilinearEngine
from chunkstore.io.sharded import ShardEngine, is_sharded
from chunkstore.storage.base import Store


class Engine(Protocol):
    """Chunk IO of one array: selections in, bytes through the store, values out."""

    store: Store
    layout: ChunkLayout
    pipeline: Pipeline
    #: the codec chain of one chunk (the read unit): the array's, or the one inside its
    #: shards when the array's chain is ``sharding_indexed`` alone
    chunk_pipeline: Pipeline
    dtype: np.dtype
    read_fill: Any

    def read(self, projections: Iterable[ChunkProjection], out: np.ndarray) -> None: ...

    def read_chunk(self, coords: tuple[int, ...]) -> np.ndarray: ...

    def decode_unit(self, key: str, blob: Any) -> np.ndarray: ...

    def write(self, projections: Iterable[ChunkProjection], value: np.ndarray,
              scalar: bool = False) -> None: ...

    def write_chunk(self, coords: tuple[int, ...], chunk: np.ndarray) -> None: ...

    def clear_outside(self, old_shape: tuple[int, ...], new_shape: tuple[int, ...]) -> None: ...


def layout_of(metadata: Any, path: str) -> ChunkLayout:
    """The layout of the array at ``path`` described by ``metadata``."""
    prefix = f"{path}/" if path else ""
    key_of = metadata.chunk_key
    inner = inner_chunk_shape(metadata)
    stored = tuple(metadata.chunk_shape)
    return ChunkLayout(tuple(metadata.shape), inner or stored,
                       stored if inner is not None else None,
                       lambda coords: prefix + key_of(coords),
                       getattr(metadata, "chunk_edges", None))


def open_engine(store: Store, layout: ChunkLayout, pipeline: Pipeline, metadata: Any,
                name: str, synchronizer: Any = None, write_empty_chunks: bool = False,
                cache: Any = None) -> Engine:
    """The engine for an array: sharded when its codec chain is ``sharding_indexed``.
    ``cache``: the decoded-chunk cache (``io.chunk_cache.resolve``: None for the shared
    one, whose budget is ``config["cache.chunk_bytes"]``, off by default)."""
    cls: Any = ShardEngine if is_sharded(pipeline) else PlainEngine
    if layout.edges is not None:
        return RectilinearEngine(cls, store, layout, pipeline, metadata, name,
                                 synchronizer, write_empty_chunks, cache)
    return cls(store, layout, pipeline, metadata.dtype, metadata.fill_value, name,
               synchronizer, write_empty_chunks, cache)
