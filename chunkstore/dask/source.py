"""A transposed view of a stored array, and the copy of one block that a rechunk task does.

``copy_block`` is what every copy task of a plan runs (``graph._copy_blocks``): it reads
whole source chunks into one decoded block, piece by piece, and writes whole target
chunks from it, piece by piece (see ``planner``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from chunkstore.array.array import Array
from chunkstore.dask.permute import copy_permuted
from chunkstore.rechunk.planner import pieces_of
from chunkstore.runtime import current, scratch


def planning_chunks(array: Array) -> tuple[int, ...]:
    """The regular chunk shape the planner works with: the chunks of a regular grid; of a
    rectilinear one its largest chunk length per axis (blocks are then not aligned with
    its chunks: a chunk cut by a block edge is decoded by both blocks, read through the
    grid-aware ``read_region``; the memory model's decoded chunk is the largest one)."""
    if array.layout.read_grid.is_regular:
        return tuple(array.chunks)
    return tuple(max(sizes, default=1) for sizes in array.read_chunk_sizes)


def chunk_spec(array: Array) -> tuple[Any, ...]:
    """``create_array``'s ``chunks`` making ``array``'s chunk grid again: the chunk shape
    of a regular grid, else every chunk's length per axis (an empty axis: one length)."""
    if array.layout.read_grid.is_regular:
        return tuple(array.chunks)
    return tuple(sizes or (1,) for sizes in array.read_chunk_sizes)


def snapped(region: tuple[slice, ...], target: Array) -> tuple[slice, ...]:
    """A plan's block ``region`` moved onto ``target``'s rectilinear grid of write units:
    each inner edge down to the start of the unit holding it, so the blocks still tile
    the array and no two share a unit (a block grows by less than the largest unit per
    axis: ``rechunk._plan_for`` plans for that). A regular grid: ``region`` itself."""
    grid = target.layout.write_grid
    if grid.is_regular:
        return region
    out = []
    for axis, (s, n) in enumerate(zip(region, target.shape, strict=True)):
        start = grid.chunk_start(axis, grid.chunk_of(axis, s.start)) if s.start else 0
        stop = grid.chunk_start(axis, grid.chunk_of(axis, s.stop)) if s.stop < n else n
        out.append(slice(start, stop))
    return tuple(out)


@dataclass(frozen=True)
class TransposedSource:
    """A read-only view of an Array with permuted axes (``np.transpose`` semantics)."""

    array: Array
    axes: tuple[int, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape[a] for a in self.axes)

    @property
    def chunks(self) -> tuple[int, ...]:
        """The source's chunk shape permuted (of a rectilinear grid: its planning unit,
        the largest chunk length per axis)."""
        chunks = planning_chunks(self.array)
        return tuple(chunks[a] for a in self.axes)

    @property
    def chunk_spec(self) -> tuple[Any, ...]:
        """The source's grid permuted, as ``create_array``'s ``chunks``."""
        spec = chunk_spec(self.array)
        return tuple(spec[a] for a in self.axes)

    @property
    def dtype(self) -> np.dtype:
        return self.array.dtype

    def _source_region(self, region: tuple[slice, ...]) -> tuple[slice, ...]:
        source_region = [slice(None)] * len(self.axes)
        for out_axis, src_axis in enumerate(self.axes):
            source_region[src_axis] = region[out_axis]
        return tuple(source_region)

    def read_into(self, region: tuple[slice, ...], out: np.ndarray) -> None:
        """Fill ``out`` (shaped like ``region`` of the view) with the view's values: the
        region is decoded in the source's order (chunks straight into place), then
        copied into ``out`` transposed, tile by tile (``permute.copy_permuted``: 4x
        faster than NumPy's strided copy of a large transposed array)."""
        source_region = self._source_region(region)
        buf = current().buffers.borrow(tuple(s.stop - s.start for s in source_region), self.dtype)
        try:
            self.array.get_basic_selection(source_region, out=buf)
            copy_permuted(out, buf.transpose(self.axes))
        except BaseException:
            current().buffers.give_back(buf, reuse=False)
            raise
        current().buffers.give_back(buf)
        del buf

    def read_region(self, region: tuple[slice, ...]) -> np.ndarray:
        out = np.empty(tuple(s.stop - s.start for s in region), dtype=self.dtype)
        self.read_into(region, out)
        return out


def read_into(source: Array | TransposedSource, region: tuple[slice, ...],
              out: np.ndarray) -> None:
    """``out[...] = source[region]`` without an intermediate array."""
    if isinstance(source, TransposedSource):
        source.read_into(region, out)
    else:
        source.get_basic_selection(region, out=out)


def copy_block(source: Any, target: Array, region: tuple[slice, ...],
               read_piece: tuple[int, ...], write_piece: tuple[int, ...]) -> None:
    """Copy ``region``: one decoded block, filled ``read_piece`` by ``read_piece`` (whole
    source chunks) and written ``write_piece`` by ``write_piece`` (whole target units),
    so only one piece's stored bytes are in flight at a time."""
    shape = tuple(s.stop - s.start for s in region)
    block = current().buffers.borrow(shape, target.dtype)

    def local(piece: tuple[slice, ...]) -> tuple[Any, ...]:
        # Ellipsis keeps a view even of a 0-d block (block[()] would be a scalar copy)
        return (*(slice(p.start - r.start, p.stop - r.start)
                  for p, r in zip(piece, region, strict=True)), Ellipsis)

    try:
        for piece in pieces_of(region, read_piece):
            read_into(source, piece, block[local(piece)])
        if target.layout.write_grid.is_regular:
            for piece in pieces_of(region, write_piece):
                target.write_region(piece, block[local(piece)])
        else:  # units of many shapes: one at a time, each whole (the block is snapped)
            write_on_grid(block, target, region)
    except BaseException:
        current().buffers.give_back(block, reuse=False)  # a traceback may hold views of it
        raise
    else:
        current().buffers.give_back(block)
    finally:
        del block
        scratch.release_all()  # an idle worker's codec threads hold no chunk buffers


def write_on_grid(block: np.ndarray, array: Array, region: tuple[slice, ...]) -> None:
    """Write ``region`` of an array with a rectilinear grid, one write unit at a time: a
    whole chunk by ``write_chunk`` (nothing read, no lock), anything less (the region's
    own ends, or a shard's part) by ``write_region``."""
    grid, layout = array.layout.write_grid, array.layout
    if not all(s.stop > s.start for s in region):
        return
    ranges = [grid.chunks_on_axis(a, s.start, s.stop) for a, s in enumerate(region)]
    for coords in itertools.product(*ranges):
        unit = grid.chunk_region(coords)
        part = tuple(slice(max(u.start, r.start), min(u.stop, r.stop))
                     for u, r in zip(unit, region, strict=True))
        local = tuple(slice(p.start - r.start, p.stop - r.start)
                      for p, r in zip(part, region, strict=True))
        if part == unit and layout.shards is None:
            array.write_chunk(coords, block[local])
        else:
            array.write_region(part, block[local])
