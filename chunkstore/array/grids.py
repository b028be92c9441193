"""The chunk grids an array's metadata describes, and how ``Array`` shows them:
``chunks`` / ``shards`` (regular only, as zarr-python 3.4), labels for ``info`` and
``repr``, and the creation arguments that make the same grid again."""

from __future__ import annotations

from typing import Any

from chunkstore.codecs.sharding import inner_chunk_shape
from chunkstore.grid.base import ChunkGrid
from chunkstore.grid.rectilinear import RectilinearGrid
from chunkstore.grid.regular import RegularGrid
from chunkstore.metadata.rectilinear import compress_runs


def read_grid(meta: Any) -> ChunkGrid:
    """The grid of the chunks (read units) ``meta`` describes: a sharded array's inner
    chunks are regular, whatever its shards."""
    inner = inner_chunk_shape(meta)
    edges = meta.chunk_edges
    if edges is not None and inner is None:
        return RectilinearGrid(meta.shape, edges)
    return RegularGrid(meta.shape, inner or tuple(meta.chunk_shape))


def write_grid(meta: Any) -> ChunkGrid:
    """The grid of the stored objects (shards, or chunks) ``meta`` describes."""
    edges = meta.chunk_edges
    if edges is not None:
        return RectilinearGrid(meta.shape, edges)
    return RegularGrid(meta.shape, tuple(meta.chunk_shape))


def regular_chunks(meta: Any, name: str) -> tuple[int, ...]:
    """``Array.chunks``: the chunk shape (inner chunks of a sharded array, always regular);
    NotImplementedError for a rectilinear grid of chunks, as zarr-python 3.4."""
    inner = inner_chunk_shape(meta)
    if inner is not None:
        return inner
    if meta.chunk_edges is not None:
        raise NotImplementedError(
            f"array {name!r}: `chunks` is only defined for a regular chunk grid; this array "
            "has a rectilinear one: use `read_chunk_sizes`")
    return tuple(meta.chunk_shape)


def regular_shards(meta: Any, name: str) -> tuple[int, ...] | None:
    """``Array.shards``: the shard shape (None: not sharded); NotImplementedError for
    rectilinear shards, as zarr-python 3.4."""
    if inner_chunk_shape(meta) is None:
        return None
    if meta.chunk_edges is not None:
        raise NotImplementedError(
            f"array {name!r}: `shards` is only defined for a regular grid of shards; this "
            "array has a rectilinear one: use `write_chunk_sizes`")
    return tuple(meta.chunk_shape)


def chunks_label(meta: Any) -> str:
    """The chunk shape as a repr or info table shows it: a rectilinear grid's lengths per
    axis run-length compressed (``[[10, 5], [5, 2]]`` is five 10s and two 5s)."""
    edges = meta.chunk_edges
    inner = inner_chunk_shape(meta)
    if edges is None or inner is not None:
        return str(inner or tuple(meta.chunk_shape))
    return "<variable> " + edges_label(edges)


def shards_label(meta: Any) -> str:
    """The shard shape as an info table shows it (``chunks_label``'s form)."""
    edges = meta.chunk_edges
    return str(tuple(meta.chunk_shape)) if edges is None else "<variable> " + edges_label(edges)


def edges_label(edges: Any) -> str:
    """Per axis a length, or the run-length compressed list of lengths."""
    return str([e if isinstance(e, int) else compress_runs(e) for e in edges])


def grid_arguments(meta: Any) -> tuple[Any, Any]:
    """``(chunks, shards)`` for ``create_array`` that make ``meta``'s grid again: a
    rectilinear axis as the lengths of its chunks that hold part of the array."""
    edges = meta.chunk_edges
    inner = inner_chunk_shape(meta)
    if edges is None:
        return (inner, tuple(meta.chunk_shape)) if inner else (tuple(meta.chunk_shape), None)
    counts = write_grid(meta).grid_shape
    spec = tuple(e if isinstance(e, int) or not n else e[:counts[a]]
                 for a, (e, n) in enumerate(zip(edges, meta.shape, strict=True)))
    return (inner, spec) if inner else (spec, None)


def chunk_sizes(grid: ChunkGrid) -> tuple[tuple[int, ...], ...]:
    """Per axis the length of every chunk inside the array, as zarr-python's
    ``read_chunk_sizes`` / ``write_chunk_sizes`` give them (an empty axis: no chunks)."""
    return tuple(sizes if n else () for sizes, n in zip(grid.chunks, grid.shape, strict=True))
