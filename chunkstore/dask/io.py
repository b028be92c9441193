"""from_store / to_store: Dask arrays over chunkstore Arrays, through the chunk primitives.

The Array handle is one key of the graph (it pickles as store description + path and
re-opens lazily on a worker); every block task refers to it instead of embedding it.
Store tasks return a one-element array, reduced to one value, so computing a write holds
no data on the workers (dask issue 10337). Store tasks form a blockwise layer that dask
fuses with blockwise producers: a block is made and written by one task.
"""

from __future__ import annotations

import math
from typing import Any

import dask
import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.delayed import Delayed, delayed
from dask.highlevelgraph import HighLevelGraph

from chunkstore.api import create_array, open_array
from chunkstore.array.array import Array
from chunkstore.array.sources import refuse_reader_of
from chunkstore.dask.memory import active_client, configure_workers, refuse_copied
from chunkstore.group.group import Group
from chunkstore.metadata import join_path
from chunkstore.nodes.paths import normalize_path
from chunkstore.rechunk.planner import (
    CODEC_THREADS,
    PIECES,
    PlanError,
    Stage,
    _piece,
    parse_bytes,
    pieces_of,
)
from chunkstore.runtime import scratch
from chunkstore.storage.resolve import resolve_store


def in_group(store: Any, path: str | None) -> tuple[Any, str | None]:
    """``(store, path)`` with a Group given as the store resolved to its own store and
    the member path below it."""
    if isinstance(store, Group):
        rel = normalize_path(path)
        return store.store, join_path(store.path, rel) if rel else store.path
    return store, path


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

    ``chunks`` defaults to the stored chunks; pass whole multiples of them for larger
    blocks (any chunks work, but unaligned ones decode some chunks more than once).

    >>> import chunkstore as cs
    >>> a = cs.array(np.arange(12).reshape(3, 4), chunks=(2, 2))
    >>> int(from_store(a).sum().compute())
    66
    """
    array = _open_source(store_or_array, path, storage_options)
    chunks = array.chunks if chunks is None else chunks
    name = name or f"from-store-{_metadata_token(array)}-{tokenize(chunks)}"
    return da.from_array(array, chunks=chunks, name=name, lock=False, asarray=False,
                         fancy=False, getitem=_read_block_getter, inline_array=False,
                         meta=np.empty((0,) * array.ndim, dtype=array.dtype))


def _read_block_getter(array: Array, region: Any) -> np.ndarray:
    """One block of a ``from_store`` graph, of the shape the graph was made with: after a
    shrink (seen by this handle, or by a worker opening the array anew), the part beyond
    the new edge reads as fill, as a growth back would show it (never a smaller block)."""
    region = tuple(region)
    block = array.read_region(region)
    want = tuple(s.stop - s.start for s in region)  # dask gives start and stop
    if block.shape == want:
        return block
    out = np.full(want, array._engine.read_fill, dtype=array.dtype)
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


def to_store(x: Any, store: Any, path: str | None = None, chunks: Any = None,
             compute: bool = True, region: tuple[slice, ...] | None = None, *,
             storage_options: dict | None = None, overwrite: bool = False,
             max_mem: int | str | None = None, **create_kwargs: Any) -> Array | Delayed:
    """Write a dask array into a new array (or into ``region`` of an existing one).

    Blocks that line up with the target's chunks are written without locks; unaligned
    dask chunks are first rechunked onto the target grid, so no two tasks ever write
    the same chunk (no lost updates). ``compute=False`` returns a Delayed.

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
        store = resolve_store(store, storage_options=storage_options)
        target_store, target_path = store, normalize_path(path)
    refuse_reader_of(x, target_store, target_path, "to_store")
    refuse_copied(target_store, f"to_store into {target_path or '/'!r}", x)
    if isinstance(store, Array):
        target = store
    elif region is not None:
        target = open_array(store, mode="r+", path=path)  # (resolved above, options used)
    else:
        target = create_array(store, normalize_path(path), shape=x.shape, dtype=x.dtype,
                              chunks=chunks if chunks is not None else _regular_chunks(x),
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
    unit = target.layout.write_shape  # the write unit: one task per shard if sharded
    if not is_aligned(x.chunks, offsets, unit):
        x = x.rechunk(aligned_chunks(x.shape, offsets, unit))
    if max_mem is not None:
        need = store_task_memory(x, target)
        if need > parse_bytes(max_mem):
            raise PlanError(f"array {target.name!r}: writing a block of {_largest_block(x)} "
                            f"holds about {need} bytes (the block, its encoded pieces and "
                            f"codec buffers) but max_mem is {parse_bytes(max_mem)}: use "
                            "smaller dask chunks")
    piece = write_piece(x, target)
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


def write_piece(x: da.Array, target: Array) -> tuple[int, ...]:
    """Sub-blocks a store task writes at once: whole write units, about a ``PIECES``-th
    of the largest block (so only that much encoded data is in flight)."""
    block = _largest_block(x)
    if not all(block):
        return tuple(max(1, b) for b in block)
    unit = tuple(min(u, b) for u, b in zip(target.layout.write_shape, block, strict=True))
    return _piece(block, unit, x.dtype.itemsize, math.prod(block) * x.dtype.itemsize // PIECES)


def store_task_memory(x: da.Array, target: Array, codec_threads: int = CODEC_THREADS) -> int:
    """Modelled peak bytes of one ``to_store`` task writing the largest block of ``x``
    (the block, one piece's encoded bytes, codec buffers: ``planner.Stage.memory``). A
    block made by a task that dask cannot fuse with the write (not a blockwise layer, e.g.
    ``da.random``) waits in memory for it: one block more."""
    block = _largest_block(x)
    if not all(block):
        return 0
    unit = tuple(target.layout.write_shape)
    stage = Stage(block, block, unit, block, x.dtype.itemsize,
                  write_chunks=tuple(target.chunks), codec_threads=codec_threads)
    waiting = 0 if _fusable(x) else stage.block_bytes
    return stage.task_memory + waiting


def _fusable(x: da.Array) -> bool:
    from dask.blockwise import Blockwise
    return isinstance(x.dask.layers.get(x.name), Blockwise)


def _write_block(block: np.ndarray, array: Array, offsets: tuple[int, ...] = (),
                 piece: tuple[int, ...] = (), block_info: Any = None) -> np.ndarray:
    location = block_info[0]["array-location"]
    region = tuple(slice(off + a, off + b) for off, (a, b) in zip(offsets, location,
                                                                  strict=True))
    try:
        for part in pieces_of(region, piece):
            local = tuple(slice(p.start - r.start, p.stop - r.start)
                          for p, r in zip(part, region, strict=True))
            array.write_region(part, block[local])
    finally:
        scratch.release_all()  # an idle worker's codec threads hold no chunk buffers
    return np.ones((1,) * block.ndim, dtype=bool)
