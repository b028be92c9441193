"""from_store / to_store: Dask arrays over chunkstore Arrays, through the chunk primitives.

The Array handle is one key of the graph (it pickles as store description + path and
re-opens lazily on a worker); every block task refers to it instead of embedding it.
Store tasks return a one-element array, reduced to one value, so computing a write holds
no data on the workers (dask issue 10337). Store tasks form a blockwise layer that dask
fuses with blockwise producers: a block is made and written by one task.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import dask
import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.delayed import Delayed, delayed
from dask.highlevelgraph import HighLevelGraph

from chunkstore.api.creation import create_array
from chunkstore.api.locations import in_group, resolve_location
from chunkstore.api.opening import open_array
from chunkstore.array.array import Array
from chunkstore.array.sources import refuse_reader_of
from chunkstore.dask.memory import active_client, configure_workers, refuse_copied
from chunkstore.dask.source import write_on_grid
from chunkstore.rechunk.planner import (
    CODEC_THREADS,
    PlanError,
    Stage,
    pieces_of,
)
from chunkstore.runtime import scratch
from chunkstore.sizes import parse_bytes


def _open_source(store_or_array: Any, path: str | None, storage_options: dict | None) -> Array:
    if isinstance(store_or_array, Array):
        return store_or_array
    store, path = in_group(store_or_array, path)
    return open_array(store, mode="r", path=path, storage_options=storage_options)


def _metadata_token(array: Array) -> str:
    return tokenize(array.store, array.path, array.metadata.to_json())


def from_store(store_or_array: Any, path: str | None = None, chunks: Any = None, *,
               storage_options: dict | None = None, name: str | None = None) -> da.Array:
    """A lazy dask array over a stored array; one task per block via ``read_region``.

    ``store_or_array``: an Array, a Group (with ``path`` naming the member), or anything
    ``open_array`` takes (a path, URL, Store or mapping, with ``path`` inside it).

    ``chunks`` defaults to the stored chunks (of a rectilinear grid: its chunk lengths
    per axis, ``read_chunk_sizes``, an empty axis as dask's ``(0,)``); pass whole
    multiples of them for larger blocks (any chunks work, but unaligned ones decode some
    chunks more than once).

    >>> import chunkstore as cs
    >>> a = cs.array(np.arange(12).reshape(3, 4), chunks=(2, 2))
    >>> int(from_store(a).sum().compute())
    66
    """
    array = _open_source(store_or_array, path, storage_options)
    chunks = stored_chunks(array) if chunks is None else chunks
    name = name or f"from-store-{_metadata_token(array)}-{tokenize(chunks)}"
    # dask asks ``source.chunks``, which a rectilinear array does not answer (as zarr)
    source = array if array.layout.read_grid.is_regular else _GridView(array)
    return da.from_array(source, chunks=chunks, name=name, lock=False, asarray=False,
                         fancy=False, getitem=_read_block_getter, inline_array=False,
                         meta=np.empty((0,) * array.ndim, dtype=array.dtype))


def stored_chunks(array: Array) -> Any:
    """The dask chunks of ``array``'s chunk grid: its chunk shape when regular, else the
    length of every chunk per axis (an empty axis as ``(0,)``, as dask spells it)."""
    if array.layout.read_grid.is_regular:
        return array.chunks
    return tuple(sizes or (0,) for sizes in array.read_chunk_sizes)


@dataclass(frozen=True)
class _GridView:
    """What ``da.from_array`` asks of an array with a rectilinear grid: its shape, dtype
    and chunk lengths per axis; blocks are read through the array."""

    array: Array

    shape = property(lambda self: self.array.shape)
    dtype = property(lambda self: self.array.dtype)
    ndim = property(lambda self: self.array.ndim)
    chunks = property(lambda self: stored_chunks(self.array))
    read_fill = property(lambda self: self.array.read_fill)

    def read_region(self, region: tuple[slice, ...]) -> np.ndarray:
        return self.array.read_region(region)


def _read_block_getter(array: Array | _GridView, region: Any) -> np.ndarray:
    """One block of a ``from_store`` graph, of the shape the graph was made with: after a
    shrink (seen by this handle, or by a worker opening the array anew), the part beyond
    the new edge reads as fill, as a growth back would show it (never a smaller block)."""
    region = tuple(region)
    block = array.read_region(region)
    want = tuple(s.stop - s.start for s in region)  # dask gives start and stop
    if block.shape == want:
        return block
    out = np.full(want, array.read_fill, dtype=array.dtype)
    out[tuple(slice(0, n) for n in block.shape)] = block
    return out


def aligned_chunks(shape: tuple[int, ...], offsets: tuple[int, ...], target: tuple[int, ...]
                   ) -> tuple[tuple[int, ...], ...]:
    """Dask chunks whose boundaries fall on the target chunk grid (given region offsets)."""
    out = []
    for n, off, c in zip(shape, offsets, target, strict=True):
        sizes, pos = [], 0
        first = min(n, (c - off % c) % c or c)
        if first:
            sizes.append(first)
            pos = first
        while pos < n:
            sizes.append(min(c, n - pos))
            pos += sizes[-1]
        out.append(tuple(sizes) if sizes else (0,))
    return tuple(out)


def is_aligned(chunks: tuple[tuple[int, ...], ...], offsets: tuple[int, ...],
               target: tuple[int, ...]) -> bool:
    """True when every edge between two blocks lies on a target chunk edge, so no two
    blocks share a chunk (the region's own ends may cut a chunk: one task owns it)."""
    for sizes, off, c in zip(chunks, offsets, target, strict=True):
        pos = off
        for s in sizes[:-1]:
            pos += s
            if pos % c:
                return False
    return True


def _regular_chunks(x: da.Array) -> tuple[int, ...] | None:
    """The dask chunk shape when all blocks but the last per axis are equal."""
    out = []
    for sizes in x.chunks:
        if len(sizes) > 1 and (len(set(sizes[:-1])) > 1 or sizes[-1] > sizes[0]):
            return None
        out.append(max(sizes[0], 1) if sizes else 1)
    return tuple(out)


def _new_chunks(x: da.Array, chunks: Any, path: str | None,
                create_kwargs: dict[str, Any]) -> Any:
    """The chunks of the array ``to_store`` creates for ``x``: ``chunks`` when given, the
    regular dask chunk shape, else (irregular dask chunks) every block's length per axis:
    a rectilinear grid (v3 only), unless sharded (then the default chunks, and the blocks
    are rechunked onto them)."""
    if chunks is not None:
        return chunks
    regular = _regular_chunks(x)
    if regular is not None or create_kwargs.get("shards") is not None:
        return regular
    if create_kwargs.get("zarr_format") == 2:
        raise ValueError(
            f"array {path or '/'!r}: the dask chunks {x.chunks} are irregular and a v2 array "
            "has a regular chunk grid only: pass zarr_format=3 (a rectilinear grid matching "
            "the dask chunks, one chunk per block) or chunks=... (a regular grid; the "
            "blocks are rechunked onto it)")
    # zero-length blocks hold no chunk; an empty axis gets one (unused) chunk length
    return tuple(tuple(c for c in sizes if c) or (1,) for sizes in x.chunks)


def _inner_starts(grid: Any, axis: int, start: int, stop: int) -> list[int]:
    """The starts of ``grid``'s chunks along ``axis`` strictly inside ``start:stop``."""
    return [grid.chunk_start(axis, c) for c in grid.chunks_on_axis(axis, start, stop)][1:]


def grid_aligned_chunks(shape: tuple[int, ...], offsets: tuple[int, ...], grid: Any
                        ) -> tuple[tuple[int, ...], ...]:
    """Dask chunks of a region (at ``offsets``, of ``shape``) cut at every chunk edge of
    ``grid`` (any chunk grid: ``grid.base.ChunkGrid``): one block per chunk."""
    out = []
    for axis, (n, off) in enumerate(zip(shape, offsets, strict=True)):
        edges = [off, *_inner_starts(grid, axis, off, off + n), off + n]
        sizes = tuple(b - a for a, b in zip(edges[:-1], edges[1:], strict=True) if b > a)
        out.append(sizes or (0,))
    return tuple(out)


def grid_aligned(chunks: tuple[tuple[int, ...], ...], offsets: tuple[int, ...], grid: Any
                 ) -> bool:
    """``is_aligned`` for any chunk grid: every edge between two blocks is a chunk edge."""
    for axis, (sizes, off) in enumerate(zip(chunks, offsets, strict=True)):
        pos = off
        for s in sizes[:-1]:
            pos += s
            if s and grid.chunk_start(axis, grid.chunk_of(axis, pos)) != pos:
                return False
    return True


def to_store(x: Any, store: Any, path: str | None = None, chunks: Any = None,
             compute: bool = True, region: tuple[slice, ...] | None = None, *,
             storage_options: dict | None = None, overwrite: bool = False,
             max_mem: int | str | None = None, **create_kwargs: Any) -> Array | Delayed:
    """Write a dask array into a new array (or into ``region`` of an existing one).

    Blocks that line up with the target's chunks are written without locks; unaligned
    dask chunks are first rechunked onto the target grid, so no two tasks ever write
    the same chunk (no lost updates). ``compute=False`` returns a Delayed.

    A new array gets ``chunks`` when given (a regular grid), else the dask chunks: a
    regular grid when they are regular (all blocks but the last per axis equal), else
    (irregular chunks, e.g. after ``da.concatenate`` or an "auto" rechunk) a v3
    ``rectilinear`` grid matching ``x.chunks`` exactly (zero-length blocks aside): one
    task per block, each writing its one chunk whole (``write_chunk``: no rechunk, no
    read-modify-write, no lock). A v2 array cannot store irregular chunks: ValueError
    (pass ``zarr_format=3`` or ``chunks=``). Into an existing rectilinear array (or a
    ``region`` of it) blocks are aligned with its grid the same way: a block that covers
    whole chunks writes them whole, the region's own ends are read-modify-writes.

    Each task writes its block in pieces of whole write units (about a quarter of the
    block each), so a task holds its block plus one piece's encoded bytes; the store
    tasks are fused with blockwise producers. ``max_mem``: refuse (``PlanError``) when
    one task would hold more (``store_task_memory``).

    >>> import chunkstore as cs
    >>> x = da.ones((6, 6), chunks=3)
    >>> to_store(x, cs.MemoryStore())[0, 0]
    np.float64(1.0)
    """
    x = da.asarray(x)
    store, path = in_group(store, path)
    if any(math.isnan(c) for sizes in x.chunks for c in sizes):
        raise ValueError("to_store needs known chunk sizes; call x.compute_chunk_sizes() first")
    # never over (or into) an array the computation reads: blocks would read data that
    # other blocks already overwrote, or a creation would delete the source first
    if isinstance(store, Array):
        target_store, target_path = store.store, store.path
    else:
        store, path = resolve_location(store, path, storage_options=storage_options)
        target_store, target_path = store, path
    refuse_reader_of(x, target_store, target_path, "to_store")
    refuse_copied(target_store, f"to_store into {target_path or '/'!r}", x)
    if isinstance(store, Array):
        target = store
        if target._from_snapshot:  # planned on its stored layout, not a stale snapshot's
            target._check_snapshot()
    elif region is not None:
        target = open_array(store, mode="r+", path=path)  # (resolved above, options used)
    else:
        target = create_array(store, path, shape=x.shape, dtype=x.dtype,
                              chunks=_new_chunks(x, chunks, path, create_kwargs),
                              overwrite=overwrite, **create_kwargs)
    if region is None:
        region = tuple(slice(0, n) for n in target.shape)
    if len(region) != target.ndim or not all(isinstance(s, slice) for s in region):
        raise ValueError(f"array {target.name!r}: region must be one slice per axis "
                         f"({target.ndim}), got {region!r}")
    steps = [s.indices(n) for s, n in zip(region, target.shape, strict=True)]
    if any(step != 1 for _, _, step in steps):
        raise ValueError(f"array {target.name!r}: region {region} has a step; to_store "
                         "writes contiguous regions (write a[::k] = x through the Array)")
    region = tuple(slice(start, max(start, stop)) for start, stop, _ in steps)
    shape = tuple(s.stop - s.start for s in region)
    if shape != x.shape:
        raise ValueError(f"array {target.name!r}: region {region} has shape {shape}, the dask "
                         f"array has {x.shape}")
    offsets = tuple(s.start for s in region)
    grid = target.layout.write_grid  # the write units: one task per shard if sharded
    if grid.is_regular:
        unit = target.layout.write_shape
        if not is_aligned(x.chunks, offsets, unit):
            x = x.rechunk(aligned_chunks(x.shape, offsets, unit))
    elif not grid_aligned(x.chunks, offsets, grid):
        x = x.rechunk(grid_aligned_chunks(x.shape, offsets, grid))
    if max_mem is not None:
        budget, need = parse_bytes(max_mem), store_task_memory(x, target)
        if need > budget:
            raise PlanError(f"array {target.name!r}: writing a block of {_largest_block(x)} "
                            f"holds about {need} bytes (the block, its encoded pieces and "
                            f"codec buffers) but max_mem is {budget}: use smaller dask "
                            "chunks")
    # a rectilinear grid's units differ in shape: a block is written unit by unit
    piece = write_piece(x, target) if grid.is_regular else None
    token = tokenize(x.name, target.store, target.path, region)
    handle = delayed(target, name=f"to-store-array-{token}", pure=False)
    # a blockwise layer: dask fuses it with blockwise producers (elementwise maths,
    # from_store...), so a block is made and written by one task and never waits in
    # a worker's memory between two tasks
    written = da.map_blocks(_write_block, x, handle, offsets=offsets, piece=piece,
                            chunks=tuple((1,) * len(c) for c in x.chunks), dtype=bool,
                            meta=np.empty((0,) * x.ndim, dtype=bool),
                            name=f"to-store-{token}")
    # optimized (the store tasks fused with their producers), then one task that waits
    # for all of them and returns None
    parts = written.to_delayed(optimize_graph=True).ravel()
    final = f"to-store-done-{token}"
    layer = {final: (_nothing, *[p.key for p in parts])}
    result = Delayed(final, HighLevelGraph.from_collections(final, layer,
                                                            dependencies=[parts[0]]))
    if not compute:
        return result
    client = active_client()
    if client is not None:
        configure_workers(client)
    dask.compute(result)
    return target


def _nothing(*_: Any) -> None:
    return None


def _largest_block(x: da.Array) -> tuple[int, ...]:
    return tuple(max(c) if c else 0 for c in x.chunks)


def _store_stage(x: da.Array, target: Array, codec_threads: int = CODEC_THREADS) -> Stage:
    """A ``to_store`` task as a one-block stage of the planner: its largest block,
    written in pieces of whole write units (the memory model and the pieces are the
    planner's)."""
    block = _largest_block(x)
    return Stage(block, block, tuple(target.layout.write_shape), block, x.dtype.itemsize,
                 write_chunks=tuple(target.layout.chunks), codec_threads=codec_threads)


def write_piece(x: da.Array, target: Array) -> tuple[int, ...]:
    """Sub-blocks a store task writes at once: whole write units, about a ``PIECES``-th
    of the largest block (so only that much encoded data is in flight)."""
    block = _largest_block(x)
    if not all(block):
        return tuple(max(1, b) for b in block)
    return _store_stage(x, target).write_piece


def store_task_memory(x: da.Array, target: Array, codec_threads: int = CODEC_THREADS) -> int:
    """Modelled peak bytes of one ``to_store`` task writing the largest block of ``x``
    (the block, one piece's encoded bytes, codec buffers: ``planner.Stage.memory``). A
    block made by a task that dask cannot fuse with the write (not a blockwise layer, e.g.
    ``da.random``) waits in memory for it, and the worker may make more blocks ahead
    (``blocks_made_ahead``). Not counted: a block dask moves to this worker from another
    (its scheduler moves tasks off a worker that falls behind), which comes on top."""
    if not all(_largest_block(x)):
        return 0
    stage = _store_stage(x, target, codec_threads)
    waiting = 0 if _fusable(x) else blocks_made_ahead() * stage.block_bytes
    return stage.task_memory + waiting


def blocks_made_ahead() -> int:
    """Blocks a worker thread may hold, made by tasks that are not fused with their store
    task, while it writes another: dask's scheduler sends each worker up to
    ``ceil(worker-saturation x threads)`` root tasks at once (2 per thread by default), so
    a thread can finish the next blocks before their store tasks reach it (measured: the
    writing task's block and two more)."""
    saturation = float(dask.config.get("distributed.scheduler.worker-saturation", 1.1))
    # inf turns root-task queuing off: nothing bounds it, the default's figure is kept
    return max(1, math.ceil(saturation)) if math.isfinite(saturation) else 2


def _fusable(x: da.Array) -> bool:
    from dask.blockwise import Blockwise
    return isinstance(x.dask.layers.get(x.name), Blockwise)


def _write_block(block: np.ndarray, array: Array, offsets: tuple[int, ...] = (),
                 piece: tuple[int, ...] | None = (), block_info: Any = None) -> np.ndarray:
    location = block_info[0]["array-location"]
    region = tuple(slice(off + a, off + b) for off, (a, b) in zip(offsets, location,
                                                                  strict=True))
    try:
        if piece is None:
            write_on_grid(block, array, region)
            return np.ones((1,) * block.ndim, dtype=bool)
        for part in pieces_of(region, piece):
            local = tuple(slice(p.start - r.start, p.stop - r.start)
                          for p, r in zip(part, region, strict=True))
            array.write_region(part, block[local])
    finally:
        scratch.release_all()  # an idle worker's codec threads hold no chunk buffers
    return np.ones((1,) * block.ndim, dtype=bool)

