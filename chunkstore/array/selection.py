"""Helpers of ``Array``'s reads and writes: the parts of a selection checked (a mask,
blocks, chunk coordinates), a value converted and broadcast to a selection, the check of
``read_missing_chunks=False``; and the ``oindex`` / ``vindex`` / ``blocks`` views."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from chunkstore import indexing as ix
from chunkstore.errors import ChunkNotFoundError
from chunkstore.indexing import ChunkProjection
from chunkstore.io.layout import ChunkLayout
from chunkstore.storage.base import Store

if TYPE_CHECKING:
    from chunkstore.grid.base import ChunkGrid


class UnstorableValueError(ValueError, TypeError):
    """A value that cannot be converted to the array's dtype: a ValueError, as NumPy and
    zarr-python raise for ``"abc"`` into ints, and a TypeError, as chunkstore raised."""


class SelectionView:
    """``a.oindex``, ``a.vindex`` and ``a.blocks``: ``view[sel]`` / ``view[sel] = v``, as
    the array's ``get_*_selection`` / ``set_*_selection`` of that kind (``getter``,
    ``setter``)."""

    def __init__(self, getter: Callable[[Any], Any], setter: Callable[[Any, Any], None]
                 ) -> None:
        self._get, self._set = getter, setter

    def __getitem__(self, selection: Any) -> Any:
        return self._get(selection)

    def __setitem__(self, selection: Any, value: Any) -> None:
        self._set(selection, value)


def checked_mask(mask: Any, shape: tuple[int, ...], name: str) -> np.ndarray:
    """``mask`` as a bool array of ``shape``, or an IndexError naming the array ``name``."""
    mask = np.asarray(mask)
    if mask.dtype != bool or mask.shape != shape:
        raise IndexError(f"array {name!r}: a mask selection needs a bool array of shape "
                         f"{shape}, got {mask.dtype} {mask.shape}")
    return mask


def block_slices(selection: Any, shape: tuple[int, ...], chunks: tuple[int, ...], name: str
                 ) -> tuple[slice, ...]:
    """A block selection (in units of chunks) as element slices; IndexError names ``name``."""
    try:
        return ix.block_selection_to_basic(selection, shape, chunks)
    except IndexError as e:
        raise IndexError(f"array {name!r}: {e}") from None


def checked_coords(coords: Any, grid: tuple[int, ...], name: str) -> tuple[int, ...]:
    """Chunk coordinates as ints, or an IndexError when they are outside ``grid``."""
    coords = tuple(int(c) for c in coords)
    if len(coords) != len(grid) or any(not 0 <= c < g for c, g in zip(coords, grid, strict=True)):
        raise IndexError(f"array {name!r}: chunk coordinates {coords} outside the "
                         f"chunk grid {grid}")
    return coords


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


def as_values(value: Any, dtype: np.dtype, name: str) -> np.ndarray:
    """``value`` as an array of ``dtype``; UnstorableValueError names the array ``name``."""
    try:
        return np.asarray(value, dtype=dtype)
    except (ValueError, TypeError) as e:
        raise UnstorableValueError(f"array {name!r}: cannot store "
                                   f"{type(value).__name__} as {dtype}: {e}") from None


def broadcast_value(arr: np.ndarray, shape: tuple[int, ...], name: str) -> np.ndarray:
    """``arr`` broadcast to a selection's ``shape``; ValueError names the array ``name``."""
    try:
        return np.broadcast_to(arr, shape)
    except ValueError:
        raise ValueError(f"array {name!r}: value of shape {arr.shape} cannot be "
                         f"assigned to a selection of shape {shape}") from None


def chunk_extent(coords: tuple[int, ...], grid: ChunkGrid) -> tuple[int, ...]:
    """The shape of the chunk at ``coords`` of ``grid`` clipped to the array's bounds."""
    return tuple(s.stop - s.start for s in grid.chunk_region(coords))


def require_stored(store: Store, layout: ChunkLayout, projections: Iterable[ChunkProjection],
                   name: str) -> None:
    """ChunkNotFoundError unless every stored object (chunk, or shard of a sharded array)
    that ``projections`` touch exists: the check of ``read_missing_chunks=False``, made
    with one batched read of a byte of each."""
    keys = sorted({layout.chunk_key(p.chunk_coords) for p in projections})
    if not keys:
        return
    found = store.get_ranges([(k, (0, 1)) for k in keys])
    missing = [k for k, v in zip(keys, found, strict=True) if v is None]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ChunkNotFoundError(f"array {name!r}: chunk {missing[0]!r}{more} is not "
                                 f"stored in {store!r}, and the array's config has "
                                 "read_missing_chunks=False")
