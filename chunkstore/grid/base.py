"""ChunkGrid: how an array's extent is cut into chunks, as every layer asks it.

``grid.regular.RegularGrid`` cuts every axis into chunks of one length (the last one may
reach past the edge). ``grid.rectilinear.RectilinearGrid`` (zarr's ``rectilinear`` chunk
grid) gives each axis either one length (regular along that axis) or the explicit length
of every chunk; the explicit lengths sum to at least the axis (a shrunk array keeps its
trailing chunks, as zarr-python does). A chunk's buffer has its full lengths
(``chunk_shape``); the part inside the array is ``chunk_region``.

Pure arithmetic: no IO, nothing imported from the layers above.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

#: one axis of a rectilinear grid: a regular length, or every chunk's length
AxisSpec = int | tuple[int, ...]


@runtime_checkable
class ChunkGrid(Protocol):
    """What every layer asks of a chunk grid."""

    shape: tuple[int, ...]

    @property
    def is_regular(self) -> bool: ...

    @property
    def grid_shape(self) -> tuple[int, ...]: ...

    @property
    def chunks(self) -> tuple[tuple[int, ...], ...]: ...

    @property
    def axis_chunking(self) -> tuple[int | np.ndarray, ...]: ...

    def chunk_region(self, coords: Sequence[int]) -> tuple[slice, ...]: ...

    def chunk_shape(self, coords: Sequence[int]) -> tuple[int, ...]: ...

    def chunk_of(self, axis: int, index: int) -> int: ...

    def chunk_start(self, axis: int, chunk: int) -> int: ...

    def chunks_on_axis(self, axis: int, start: int, stop: int) -> range: ...

    def all_coords(self) -> Iterator[tuple[int, ...]]: ...
