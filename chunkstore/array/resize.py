"""Changing an ``Array``'s shape: ``resize`` (clearing beyond the new edge, committed
only over the shape it cleared from) and ``append`` (rows reserved by one atomic update
of the stored shape, so concurrent appenders never share rows)."""

from __future__ import annotations

from typing import Any

import numpy as np

from chunkstore.errors import ConcurrentWriteError
from chunkstore.metadata import ArrayMetadata
from chunkstore.nodes.documents import read_node, update_node

RESIZE_ATTEMPTS = 64


class _ShapeMoved(Exception):
    """Another writer changed the stored shape between a resize's clear and its commit."""


def change_metadata(array: Any, change: Any) -> ArrayMetadata:
    """Read-modify-write the stored document (``change(current) -> new``, applied to what
    is stored at that moment, so concurrent changes are never lost)."""
    array._check_writable()
    meta = update_node(array.store, array.path, change, synchronizer=array.synchronizer,
                       zarr_format=array.zarr_format, kind="array")
    array._adopt_metadata(meta)  # type: ignore[arg-type]
    return meta  # type: ignore[return-value]


def resize(array: Any, shape: tuple[Any, ...]) -> None:
    """``Array.resize(*shape)``: chunks wholly outside the new shape are deleted; chunks
    cut by the new edge are cleared beyond it, so growing again shows fill_value."""
    array._check_writable()
    new_shape = tuple(int(s) for s in (shape[0] if len(shape) == 1 and
                                        not isinstance(shape[0], int | np.integer) else shape))
    if len(new_shape) != array.ndim or any(s < 0 for s in new_shape):
        raise ValueError(f"array {array.name!r}: cannot resize {array.shape} to {new_shape}")
    for _attempt in range(RESIZE_ATTEMPTS):
        # clear beyond the new edge from the shape as stored now (another handle may
        # have appended), and commit only over that very shape: a growth in between
        # means clearing again, so no stale rows survive for a later growth to show
        stored = read_node(array.store, array.path, array.zarr_format, kind="array")
        array._adopt_metadata(stored)  # type: ignore[arg-type]
        old = tuple(stored.shape)
        if any(n < o for n, o in zip(new_shape, old, strict=True)):
            array._engine.clear_outside(old, new_shape)

        def change(m: ArrayMetadata, old: tuple[int, ...] = old) -> ArrayMetadata:
            if tuple(m.shape) != old:
                raise _ShapeMoved
            return m.replace(shape=new_shape)

        try:
            change_metadata(array, change)
            return
        except _ShapeMoved:
            continue
    raise ConcurrentWriteError(f"array {array.name!r}: the shape kept changing under "
                               f"{RESIZE_ATTEMPTS} attempts to resize to {new_shape}")


def append(array: Any, data: Any, axis: int = 0) -> tuple[int, ...]:
    """``Array.append``: grow along ``axis`` and write ``data`` there; the new shape."""
    array._check_writable()
    data = np.asarray(data, dtype=array.dtype)
    axis = axis + array.ndim if axis < 0 else axis
    if data.ndim != array.ndim or not 0 <= axis < array.ndim:
        raise ValueError(f"array {array.name!r}: cannot append data of shape {data.shape} "
                         f"to shape {array.shape} along axis {axis}")
    start: list[int] = []

    def grow(meta: ArrayMetadata) -> ArrayMetadata:
        old = tuple(meta.shape)
        if any(d != s for i, (d, s) in enumerate(zip(data.shape, old, strict=True))
               if i != axis):
            raise ValueError(f"array {array.name!r}: cannot append data of shape "
                             f"{data.shape} to shape {old} along axis {axis}")
        start[:] = [old[axis]]
        return meta.replace(shape=tuple(s + data.shape[axis] if i == axis else s
                                        for i, s in enumerate(old)))

    new_shape = tuple(change_metadata(array, grow).shape)
    region = tuple(slice(start[0], start[0] + data.shape[axis]) if i == axis
                   else slice(None) for i in range(array.ndim))
    array[region] = data
    return new_shape
