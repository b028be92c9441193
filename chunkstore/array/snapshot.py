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

from chunkstore.codecs import build_pipeline
from chunkstore.codecs.sharding import inner_chunk_shape
from chunkstore.grid.grid import RectilinearGrid, RegularGrid
from chunkstore.io.engine import Engine, layout_of, open_engine
from chunkstore.metadata.nodes import describe
from chunkstore.metadata.rectilinear import compress_runs


def read_grid(meta: Any) -> RegularGrid | RectilinearGrid:
    """The grid of the chunks (read units) ``meta`` describes: a sharded array's inner
    chunks are regular, whatever its shards."""
    inner = inner_chunk_shape(meta)
    edges = getattr(meta, "chunk_edges", None)
    if edges is not None and inner is None:
        return RectilinearGrid(meta.shape, edges)
    return RegularGrid(meta.shape, inner or tuple(meta.chunk_shape))


def write_grid(meta: Any) -> RegularGrid | RectilinearGrid:
    """The grid of the stored objects (shards, or chunks) ``meta`` describes."""
    edges = getattr(meta, "chunk_edges", None)
    if edges is not None:
        return RectilinearGrid(meta.shape, edges)
    return RegularGrid(meta.shape, tuple(meta.chunk_shape))


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


def regular_chunks(meta: Any, name: str) -> tuple[int, ...]:
    """``Array.chunks``: the chunk shape (inner chunks of a sharded array, always regular);
    NotImplementedError for a rectilinear grid of chunks, as zarr-python 3.4."""
    inner = inner_chunk_shape(meta)
    if inner is not None:
        return inner
    if getattr(meta, "chunk_edges", None) is not None:
        raise NotImplementedError(
            f"array {name!r}: `chunks` is only defined for a regular chunk grid; this array "
            "has a rectilinear one: use `read_chunk_sizes`")
    return tuple(meta.chunk_shape)


def regular_shards(meta: Any, name: str) -> tuple[int, ...] | None:
    """``Array.shards``: the shard shape (None: not sharded); NotImplementedError for
    rectilinear shards, as zarr-python 3.4."""
    if inner_chunk_shape(meta) is None:
        return None
    if getattr(meta, "chunk_edges", None) is not None:
        raise NotImplementedError(
            f"array {name!r}: `shards` is only defined for a regular grid of shards; this "
            "array has a rectilinear one: use `write_chunk_sizes`")
    return tuple(meta.chunk_shape)


def chunks_label(meta: Any) -> str:
    """The chunk shape as a repr or info table shows it: a rectilinear grid's lengths per
    axis run-length compressed (``[[10, 5], [5, 2]]`` is five 10s and two 5s)."""
    edges = getattr(meta, "chunk_edges", None)
    inner = inner_chunk_shape(meta)
    if edges is None or inner is not None:
        return str(inner or tuple(meta.chunk_shape))
    return "<variable> " + edges_label(edges)


def shards_label(meta: Any) -> str:
    """The shard shape as an info table shows it (``chunks_label``'s form)."""
    edges = getattr(meta, "chunk_edges", None)
    return str(tuple(meta.chunk_shape)) if edges is None else "<variable> " + edges_label(edges)


def edges_label(edges: Any) -> str:
    """Per axis a length, or the run-length compressed list of lengths."""
    return str([e if isinstance(e, int) else compress_runs(e) for e in edges])
