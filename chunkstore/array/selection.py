"""How ``Array`` reads and writes: a selection (checked, converted, broadcast) or a whole
chunk (edge-clipped) to the engine and back; the ``oindex`` / ``vindex`` / ``blocks``
views; values written block by block (another array, an h5py dataset)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from chunkstore import indexing as ix
from chunkstore.array.copy import copy_value, note_read
from chunkstore.array.hdf5_files import check_value
from chunkstore.errors import ChunkNotFoundError
from chunkstore.indexing import BASIC, COORDINATE


class UnstorableValueError(ValueError, TypeError):
    """A value that cannot be converted to the array's dtype: a ValueError, as NumPy and
    zarr-python raise for ``"abc"`` into ints, and a TypeError, as chunkstore raised."""


class SelectionView:
    """``a.oindex``, ``a.vindex`` and ``a.blocks``: ``view[sel]`` / ``view[sel] = v``."""

    def __init__(self, array: Any, kind: str) -> None:
        self._array, self._kind = array, kind

    def __getitem__(self, selection: Any) -> Any:
        a = self._array
        if self._kind == "orthogonal":
            return a.get_orthogonal_selection(selection)
        if self._kind == "block":
            return a.get_block_selection(selection)
        return a.get_coordinate_selection(selection)

    def __setitem__(self, selection: Any, value: Any) -> None:
        a = self._array
        if self._kind == "orthogonal":
            a.set_orthogonal_selection(selection, value)
        elif self._kind == "block":
            a.set_block_selection(selection, value)
        else:
            a.set_coordinate_selection(selection, value)


def as_mask(mask: Any, array: Any) -> np.ndarray:
    """``mask`` as a bool array of the array's shape, or an IndexError naming the array."""
    mask = np.asarray(mask)
    if mask.dtype != bool or mask.shape != array.shape:
        raise IndexError(f"array {array.name!r}: a mask selection needs a bool array of shape "
                         f"{array.shape}, got {mask.dtype} {mask.shape}")
    return mask


def is_lazy_array(value: Any) -> bool:
    """An array-like that reads on slicing (not an ndarray): copied block by block."""
    return (not isinstance(value, np.ndarray) and hasattr(value, "shape")
            and hasattr(value, "dtype") and hasattr(value, "__getitem__") and len(value.shape) > 0)


def as_region(selection: Any, shape: tuple[int, ...]) -> tuple[slice, ...] | None:
    """``selection`` as unit-step slices per axis, or None when it is anything else."""
    items = selection if isinstance(selection, tuple) else (selection,)
    if sum(1 for s in items if s is Ellipsis) > 1 or not all(
            s is Ellipsis or isinstance(s, slice) for s in items):
        return None
    if Ellipsis in items:
        i = items.index(Ellipsis)
        items = items[:i] + (slice(None),) * (len(shape) - len(items) + 1) + items[i + 1:]
    items = items + (slice(None),) * (len(shape) - len(items))
    region = []
    for s, n in zip(items, shape, strict=True):
        start, stop, step = s.indices(n)
        if step != 1:
            return None
        region.append(slice(start, max(start, stop)))
    return tuple(region)


def read_selection(array: Any, selection: Any, kind: str, out: np.ndarray | None = None
                   ) -> Any:
    """``array``'s elements at ``selection`` (run as ``kind``), into ``out`` if given."""
    note_read(array)
    snap = array._snapshot()
    indexer = array._indexer(selection, kind, snap)
    shape = indexer.shape
    if not array.config.read_missing_chunks:
        require_stored(array, snap.engine, indexer)
    if out is None:
        # as zarr-python: the config's order, and an order-"F" v2 array's (not for points)
        f_order = kind != COORDINATE and (array.config.order == "F" or (
            snap.meta.zarr_format == 2 and snap.meta.order == "F"))
        result = np.empty(shape, dtype=snap.layout[2], order="F" if f_order else "C")
    else:
        if out.shape != shape:
            raise ValueError(f"array {array.name!r}: out has shape {out.shape}, the selection "
                             f"has {shape}")
        result = out
    target = result.reshape(-1) if kind == COORDINATE else result
    snap.engine.read(indexer, target)
    if kind == COORDINATE:
        return result
    return result[()] if result.ndim == 0 and out is None else result


def require_stored(array: Any, engine: Any, projections: Any) -> None:
    """ChunkNotFoundError unless every stored object (chunk, or shard of a sharded array)
    that ``projections`` touch exists: the check of ``read_missing_chunks=False``, made
    with one batched read of a byte of each."""
    keys = sorted({engine.layout.chunk_key(p.chunk_coords) for p in projections})
    if not keys:
        return
    found = array.store.get_ranges([(k, (0, 1)) for k in keys])
    missing = [k for k, v in zip(keys, found, strict=True) if v is None]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ChunkNotFoundError(f"array {array.name!r}: chunk {missing[0]!r}{more} is not "
                                 f"stored in {array.store!r}, and the array's config has "
                                 "read_missing_chunks=False")


def write_selection(array: Any, selection: Any, value: Any, kind: str) -> None:
    """Store ``value`` (broadcast to the selection) at ``selection`` of ``array``."""
    array._check_writable()
    check_value(value)  # an h5py dataset whose bytes are in other files is refused
    snap = array._snapshot()
    indexer = array._indexer(selection, kind, snap)
    if kind == BASIC and is_lazy_array(value) and tuple(value.shape) == indexer.shape:
        region = as_region(selection, snap.shape)
        if region is not None:  # another Array, an h5py dataset...: block by block
            copy_value(value, array, region)
            return
    scalar = np.ndim(value) == 0
    try:
        arr = np.asarray(value, dtype=array.dtype)
    except (ValueError, TypeError) as e:
        raise UnstorableValueError(f"array {array.name!r}: cannot store "
                                   f"{type(value).__name__} as {array.dtype}: {e}") from None
    if array._snapshot() is not snap:  # resized (by the value's conversion, or a thread)
        snap = array._snapshot()
        indexer = array._indexer(selection, kind, snap)
    try:
        arr = np.broadcast_to(arr, indexer.shape)
    except ValueError:
        raise ValueError(f"array {array.name!r}: value of shape {arr.shape} cannot be "
                         f"assigned to a selection of shape {indexer.shape}") from None
    if kind == COORDINATE:
        arr = arr.reshape(-1)
    snap.engine.write(indexer, arr, scalar=scalar)


def block_slices(array: Any, selection: Any) -> tuple[slice, ...]:
    """A block selection (in units of chunks) of ``array`` as element slices."""
    try:
        snap = array._snapshot()
        return ix.block_selection_to_basic(selection, snap.shape, snap.layout[1])
    except IndexError as e:
        raise IndexError(f"array {array.name!r}: {e}") from None


def as_numpy(array: Any, dtype: Any = None, copy: Any = None) -> np.ndarray:
    """``np.asarray(array)``: all of it, always a copy."""
    if copy is False:  # NumPy 2's protocol, as zarr-python: the data is always a copy
        raise ValueError(f"array {array.name!r}: cannot give a NumPy view without a copy "
                         "(the data lives in a store); use np.asarray(a) or a[...]")
    data = np.asarray(array[...])
    return data if dtype is None else data.astype(dtype, copy=False)


def iter_rows(array: Any) -> Iterator[Any]:
    """The items along the first axis, decoding each chunk row once."""
    if not array.shape:
        raise TypeError("iteration over a 0-d array")
    grid = array._snapshot().grid
    for c in range(grid.grid_shape[0]):
        rows = grid.chunk_region((c,) + (0,) * (array.ndim - 1))[0]
        yield from array[rows]


def _check_coords(array: Any, coords: Any) -> tuple[int, ...]:
    coords = tuple(int(c) for c in coords)
    grid = array.cdata_shape
    if len(coords) != len(grid) or any(not 0 <= c < g for c, g in zip(coords, grid, strict=True)):
        raise IndexError(f"array {array.name!r}: chunk coordinates {coords} outside the "
                         f"chunk grid {grid}")
    return coords


def read_chunk(array: Any, coords: tuple[int, ...]) -> np.ndarray:
    """The data of one chunk of ``array``, clipped to the array's bounds."""
    note_read(array)
    coords = _check_coords(array, coords)
    snap = array._snapshot()
    if not array.config.read_missing_chunks:
        require_stored(array, snap.engine, [ix.ChunkProjection(coords, (), (), True)])
    chunk = snap.engine.read_chunk(coords)
    region = snap.grid.chunk_region(coords)
    return chunk[tuple(slice(0, s.stop - s.start) for s in region)]


def write_chunk(array: Any, coords: tuple[int, ...], data: Any) -> None:
    """Replace one whole chunk of ``array``; ``data`` has the chunk's (edge-clipped) shape."""
    array._check_writable()
    coords = _check_coords(array, coords)
    grid = array._snapshot().grid
    region = grid.chunk_region(coords)
    expected = tuple(s.stop - s.start for s in region)
    data = np.asarray(data, dtype=array.dtype)
    if data.shape != expected:
        raise ValueError(f"array {array.name!r}: chunk {coords} needs data of shape "
                         f"{expected}, got {data.shape}")
    full_shape = grid.chunk_shape(coords)
    if expected != full_shape:
        full = np.full(full_shape, array._engine.read_fill, dtype=array.dtype)
        full[tuple(slice(0, n) for n in expected)] = data
        data = full
    array._engine.write_chunk(coords, data)
