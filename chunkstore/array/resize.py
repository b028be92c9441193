"""The metadata side of changing an ``Array``'s shape: the requested shape checked,
``resize``'s change (committed only over the shape it cleared from) and ``append``'s
(rows reserved by one atomic update of the stored shape, so concurrent appenders never
share rows)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from chunkstore.codecs.sharding import inner_chunk_shape
from chunkstore.metadata import ArrayMetadata
from chunkstore.metadata.rectilinear import with_own_chunk

RESIZE_ATTEMPTS = 64


class ShapeMoved(Exception):
    """Another writer changed the stored shape between a resize's clear and its commit."""


def requested_shape(shape: tuple[Any, ...], current: tuple[int, ...], name: str
                    ) -> tuple[int, ...]:
    """``resize(*shape)``'s arguments (ints, or one sequence) as a shape of the array's
    number of dimensions; ValueError names the array ``name``."""
    new_shape = tuple(int(s) for s in (shape[0] if len(shape) == 1 and
                                        not isinstance(shape[0], int | np.integer) else shape))
    if len(new_shape) != len(current) or any(s < 0 for s in new_shape):
        raise ValueError(f"array {name!r}: cannot resize {current} to {new_shape}")
    return new_shape


def resized_from(stored: ArrayMetadata, new_shape: tuple[int, ...], name: str
                 ) -> Callable[[ArrayMetadata], ArrayMetadata]:
    """The change of a resize cleared from the stored metadata ``stored``: to
    ``new_shape``, or ShapeMoved when the shape stored at commit time is no longer
    ``stored``'s. A shape the grid cannot have (a rectilinear shard that is no multiple
    of the inner chunk) is a ValueError naming the array here, before anything is
    cleared."""
    old = tuple(stored.shape)
    try:
        stored.replace(shape=new_shape)
    except ValueError as e:
        raise ValueError(f"array {name!r}: {e}") from None

    def change(m: ArrayMetadata) -> ArrayMetadata:
        if tuple(m.shape) != old:
            raise ShapeMoved
        return m.replace(shape=new_shape)
    return change


def appended(data_shape: tuple[int, ...], axis: int, name: str, start: list[int],
             new_chunk: bool = False) -> Callable[[ArrayMetadata], ArrayMetadata]:
    """The change of an append of ``data_shape`` along ``axis``: the stored shape grown;
    ``start`` is set to the first reserved row. ValueError when the other axes differ.

    With ``new_chunk`` the rectilinear grid gets, in the same change, one chunk (shard)
    exactly covering the appended rows (``with_own_chunk``): the append then never
    touches a stored chunk. ValueError when the grid cannot have one there."""
    def grow(meta: ArrayMetadata) -> ArrayMetadata:
        old = tuple(meta.shape)
        if any(d != s for i, (d, s) in enumerate(zip(data_shape, old, strict=True))
               if i != axis):
            raise ValueError(f"array {name!r}: cannot append data of shape "
                             f"{data_shape} to shape {old} along axis {axis}")
        start[:] = [old[axis]]
        shape = tuple(s + data_shape[axis] if i == axis else s for i, s in enumerate(old))
        if not new_chunk:
            return meta.replace(shape=shape)
        edges = own_chunk_edges(meta, axis, data_shape[axis], name)
        return meta.replace(shape=shape, chunk_edges=edges)
    return grow


def own_chunk_edges(meta: ArrayMetadata, axis: int, length: int, name: str) -> Any:
    """The chunk edges of ``meta`` with the ``length`` rows appended along ``axis`` as a
    chunk of their own; ValueError for a regular grid, or a grid that cannot have it."""
    edges = meta.chunk_edges
    if edges is None:
        raise ValueError(f"array {name!r}: append(new_chunk=True) needs a rectilinear chunk "
                         "grid (zarr v3); this array's grid is regular")
    if not length:
        return edges
    inner = inner_chunk_shape(meta)
    if inner is not None and length % inner[axis]:
        raise ValueError(f"array {name!r}: a shard of {length} rows along axis {axis} is "
                         f"not a multiple of the inner chunk length {inner[axis]}")
    try:
        return with_own_chunk(edges, axis, meta.shape[axis], length)
    except ValueError as e:
        raise ValueError(f"array {name!r}: append(new_chunk=True): {e}") from None
