"""A transposed view of a stored array, and the copy of one block that a rechunk task does.

``copy_block`` is what every copy task of a plan runs (``graph._copy_blocks``): it reads
whole source chunks into one decoded block, piece by piece, and writes whole target
chunks from it, piece by piece (see ``planner``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from chunkstore.array.array import Array
from chunkstore.dask.permute import copy_permuted
from chunkstore.rechunk.planner import pieces_of
from chunkstore.runtime import buffers as buffer_pool
from chunkstore.runtime import scratch


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
        return tuple(self.array.chunks[a] for a in self.axes)

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
        buf = buffer_pool.borrow(tuple(s.stop - s.start for s in source_region), self.dtype)
        try:
            self.array.get_basic_selection(source_region, out=buf)
            copy_permuted(out, buf.transpose(self.axes))
        except BaseException:
            buffer_pool.give_back(buf, reuse=False)
            raise
        buffer_pool.give_back(buf)
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
    block = buffer_pool.borrow(shape, target.dtype)

    def local(piece: tuple[slice, ...]) -> tuple[Any, ...]:
        # Ellipsis keeps a view even of a 0-d block (block[()] would be a scalar copy)
        return (*(slice(p.start - r.start, p.stop - r.start)
                  for p, r in zip(piece, region, strict=True)), Ellipsis)

    try:
        for piece in pieces_of(region, read_piece):
            read_into(source, piece, block[local(piece)])
        for piece in pieces_of(region, write_piece):
            target.write_region(piece, block[local(piece)])
    except BaseException:
        buffer_pool.give_back(block, reuse=False)  # a traceback may hold views of it
        raise
    else:
        buffer_pool.give_back(block)
    finally:
        del block
        scratch.release_all()  # an idle worker's codec threads hold no chunk buffers
