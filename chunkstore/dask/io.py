"""from_store / to_store: Dask arrays over chunkstore Arrays, through the chunk primitives.

The Array handle is one key of the graph (it pickles as store description + path and
re-opens lazily on a worker); every block task refers to it instead of embedding it.
Store tasks return nothing, and one final task depends on them all, so computing a
write holds no data on the workers (dask issue 10337).
"""

from __future__ import annotations

import math
from typing import Any

import dask
import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph

from ..api import create_array, open_array
from ..array import Array
from ..hierarchy.group import Group
from ..hierarchy.paths import normalize_path
from ..io.overlap import refuse_onto_itself
from ..metadata import join_path
from ..storage.resolve import resolve_store


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
    return array.read_region(tuple(region))


def _write_block(array: Array, block: np.ndarray, region: tuple[slice, ...]) -> None:
    array.write_region(region, block)
    return None


def _done(*_: Any) -> None:
    return None


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


def stored_sources(x: da.Array) -> list[Array]:
    """The stored Arrays a dask array reads (those ``from_store`` put in its graph)."""
    found = []
    for name, layer in x.dask.layers.items():
        if name.startswith("original-"):
            found += [v for v in layer.values() if isinstance(v, Array)]
    return found


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
             **create_kwargs: Any) -> Array | Delayed:
    """Write a dask array into a new array (or into ``region`` of an existing one).

    Blocks that line up with the target's chunks are written without locks; unaligned
    dask chunks are first rechunked onto the target grid, so no two tasks ever write
    the same chunk (no lost updates). ``compute=False`` returns a Delayed.

    >>> import chunkstore as cs
    >>> x = da.ones((6, 6), chunks=3)
    >>> to_store(x, cs.MemoryStore())[0, 0]
    np.float64(1.0)
    """
    x = da.asarray(x)
    store, path = in_group(store, path)
    if any(math.isnan(c) for sizes in x.chunks for c in sizes):
        raise ValueError("to_store needs known chunk sizes; call x.compute_chunk_sizes() first")
    if region is None and not isinstance(store, Array):  # creating: never over a source
        store = resolve_store(store, storage_options=storage_options)
        for source in stored_sources(x):
            refuse_onto_itself(source, store, normalize_path(path), "to_store")
    if isinstance(store, Array):
        target = store
    elif region is not None:
        target = open_array(store, mode="r+", path=path, storage_options=storage_options)
    else:
        target = create_array(store, normalize_path(path), shape=x.shape, dtype=x.dtype,
                              chunks=chunks if chunks is not None else _regular_chunks(x),
                              overwrite=overwrite, storage_options=storage_options,
                              **create_kwargs)
    if region is None:
        region = tuple(slice(0, n) for n in target.shape)
    region = tuple(slice(*s.indices(n)[:2])
                   for s, n in zip(region, target.shape, strict=True))
    shape = tuple(s.stop - s.start for s in region)
    if shape != x.shape:
        raise ValueError(f"array {target.name!r}: region {region} has shape {shape}, the dask "
                         f"array has {x.shape}")
    offsets = tuple(s.start for s in region)
    unit = target.layout.write_shape  # the write unit: one task per shard if sharded
    if not is_aligned(x.chunks, offsets, unit):
        x = x.rechunk(aligned_chunks(x.shape, offsets, unit))
    token = tokenize(x.name, target.store, target.path, region)
    name, handle = f"to-store-{token}", f"to-store-array-{token}"
    layer: dict[Any, Any] = {handle: target}
    starts = [np.cumsum((0,) + sizes[:-1]) for sizes in x.chunks]
    keys = []
    for idx in np.ndindex(*x.numblocks):
        block_region = tuple(slice(off + int(st[i]), off + int(st[i]) + sizes[i])
                             for off, st, sizes, i in zip(offsets, starts, x.chunks, idx,
                                                          strict=True))
        key = (name, *idx)
        layer[key] = (_write_block, handle, (x.name, *idx), block_region)
        keys.append(key)
    final = f"{name}-done"
    layer[final] = (_done, *keys)
    graph = HighLevelGraph.from_collections(final, layer, dependencies=[x])
    result = Delayed(final, graph)
    if not compute:
        return result
    dask.compute(result)
    return target
