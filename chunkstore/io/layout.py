"""ChunkLayout: where an array's elements live in a store, as pure arithmetic.

Two units matter. The **read unit** is the chunk (``Array.chunks``): the smallest piece
that can be decoded. The **write unit** is the stored object holding it: the shard of a
sharded array, else the chunk itself. A write that covers a write unit whole replaces it
without reading; anything less is a read-modify-write of that unit. Every layer that
cuts work into pieces (the IO engines, copies, ``to_store``, the rechunk planner, the
synchronizer's locks) asks this object, so they all agree on what may be written
independently.

The grids are regular, or (zarr's ``rectilinear`` grid, ``edges``) give every chunk of an
unsharded array, or every shard of a sharded one, its own lengths; the inner chunks of
shards stay regular. Regular grids keep their arithmetic (no grid object on the hot paths).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from chunkstore.grid.base import AxisSpec, ChunkGrid
from chunkstore.grid.rectilinear import RectilinearGrid
from chunkstore.grid.regular import RegularGrid


@dataclass(frozen=True)
class ChunkLayout:
    """The chunk grid of one array and the store keys of its write units.

    >>> layout = ChunkLayout((100,), (10,), (50,), lambda c: "c/" + "/".join(map(str, c)))
    >>> layout.unit_of((7,)), layout.inner_index((7,)), layout.chunk_key((7,))
    ((1,), 2, 'c/1')
    """

    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    shards: tuple[int, ...] | None
    #: store key (relative to the store root) of a write unit's grid coordinates
    unit_key: Callable[[tuple[int, ...]], str]
    #: the write units' rectilinear grid (per axis a length or every unit's length); None:
    #: regular. ``chunks`` (unsharded) or ``shards`` then hold the largest unit's shape; a
    #: sharded array's inner chunks stay regular (every shard length is a multiple)
    edges: tuple[AxisSpec, ...] | None = None

    # -- grids ---------------------------------------------------------------------------
    @cached_property
    def read_grid(self) -> ChunkGrid:
        """The grid of the chunks (the read units)."""
        if self.edges is not None and self.shards is None:
            return RectilinearGrid(self.shape, self.edges)
        return RegularGrid(self.shape, self.chunks)

    @cached_property
    def write_grid(self) -> ChunkGrid:
        """The grid of the write units (shards, or chunks)."""
        if self.edges is not None:
            return RectilinearGrid(self.shape, self.edges)
        return RegularGrid(self.shape, self.write_shape)

    def unit_shape(self, unit: Sequence[int]) -> tuple[int, ...]:
        """The (unclipped) shape of the write unit at ``unit``."""
        return self.write_shape if self.edges is None else self.write_grid.chunk_shape(unit)

    def with_unit_shape(self, shape: Sequence[int]) -> ChunkLayout:
        """This rectilinear layout as seen by the unit IO of its units of ``shape``: the
        same grids and keys, ``chunks`` (or ``shards``) that shape."""
        shape = tuple(shape)
        if self.shards is None:
            out = ChunkLayout(self.shape, shape, None, self.unit_key, self.edges)
        else:
            out = ChunkLayout(self.shape, self.chunks, shape, self.unit_key, self.edges)
        # the same grids: shared, not worked out again per unit shape
        out.__dict__.update(read_grid=self.read_grid, write_grid=self.write_grid)
        return out

    # -- units ---------------------------------------------------------------------------
    @property
    def write_shape(self) -> tuple[int, ...]:
        """The shape of one write unit: the shard, or the chunk."""
        return self.shards if self.shards is not None else self.chunks

    @property
    def ratio(self) -> tuple[int, ...]:
        """Chunks per write unit along each axis (all 1 when not sharded)."""
        if self.shards is None:
            return (1,) * len(self.chunks)
        return tuple(s // c for s, c in zip(self.shards, self.chunks, strict=True))

    @property
    def chunks_per_unit(self) -> int:
        return math.prod(self.ratio)

    def unit_of(self, chunk: Sequence[int]) -> tuple[int, ...]:
        """Grid coordinates of the write unit holding the chunk at ``chunk``."""
        if self.shards is None:
            return tuple(chunk)
        if self.edges is not None:
            grid = self.write_grid
            return tuple(grid.chunk_of(a, c * n)
                         for a, (c, n) in enumerate(zip(chunk, self.chunks, strict=True)))
        return tuple(c // r for c, r in zip(chunk, self.ratio, strict=True))

    def inner_index(self, chunk: Sequence[int]) -> int:
        """C-order number of the chunk inside its write unit (0 when not sharded)."""
        local = 0
        if self.edges is not None:
            if self.shards is None:
                return 0
            grid = self.write_grid
            unit = self.unit_of(chunk)
            for a, (c, n, u) in enumerate(zip(chunk, self.chunks, unit, strict=True)):
                r = grid.chunk_shape(unit)[a] // n
                local = local * r + c - grid.chunk_start(a, u) // n
            return local
        for c, r in zip(chunk, self.ratio, strict=True):
            local = local * r + c % r
        return local

    def chunk_key(self, chunk: Sequence[int]) -> str:
        """Store key of the object holding the chunk at ``chunk``."""
        return self.unit_key(self.unit_of(chunk))

    def at_edge(self, chunk: Sequence[int]) -> bool:
        """True when the chunk reaches past the array's edge. Such a chunk is never
        replaced blind: the array may have grown meanwhile (another process appending),
        and the part past the edge this writer knows may hold its data."""
        for c, limit in zip(chunk, self._edge_limits, strict=True):
            if c >= limit:  # (c + 1) * size > n
                return True
        return False

    @cached_property
    def _edge_limits(self) -> tuple[float, ...]:
        """Per axis, the first chunk index that reaches past the edge."""
        grid = self.read_grid
        if not grid.is_regular:
            return tuple(_first_past(grid, a, n) for a, n in enumerate(self.shape))
        return tuple(n // size if size else math.inf
                     for n, size in zip(self.shape, self.chunks, strict=True))

    def for_write(self, projection: Any) -> Any:
        """``projection`` as a write sees it: a chunk at the edge is never complete."""
        if projection.is_complete and self.at_edge(projection.chunk_coords):
            return projection._replace(is_complete=False)
        return projection

    # -- grid shapes ---------------------------------------------------------------------
    @property
    def chunk_grid(self) -> tuple[int, ...]:
        if self.edges is not None:
            return self.read_grid.grid_shape
        return _grid(self.shape, self.chunks)

    @property
    def unit_grid(self) -> tuple[int, ...]:
        if self.edges is not None:
            return self.write_grid.grid_shape
        return _grid(self.shape, self.write_shape)

    def unit_region(self, unit: Sequence[int]) -> tuple[slice, ...]:
        """The part of the array a write unit covers (clipped at the array's edge)."""
        if self.edges is not None:
            return self.write_grid.chunk_region(unit)
        return tuple(slice(u * w, min(n, (u + 1) * w))
                     for u, w, n in zip(unit, self.write_shape, self.shape, strict=True))

    def unit_outside(self, unit: Sequence[int], new_shape: Sequence[int]) -> bool:
        """Whether the write unit at ``unit`` lies wholly outside ``new_shape``."""
        grid = self.write_grid
        return any(grid.chunk_start(a, u) >= n
                   for a, (u, n) in enumerate(zip(unit, new_shape, strict=True)))

    def _kept_units(self, new_shape: Sequence[int]) -> tuple[int, ...]:
        """Per axis, how many write units start inside ``new_shape``."""
        if self.edges is None:
            return tuple(min(g, n) for g, n in zip(self.unit_grid,
                                                   _grid(new_shape, self.write_shape),
                                                   strict=True))
        grid = self.write_grid
        return tuple(len(grid.chunks_on_axis(a, 0, min(n, o)))
                     for a, (n, o) in enumerate(zip(new_shape, self.shape, strict=True)))

    def units_outside(self, new_shape: Sequence[int]) -> Iterator[tuple[int, ...]]:
        """Write units of the current shape that lie wholly outside ``new_shape``."""
        kept = self._kept_units(new_shape)
        for unit in itertools.product(*(range(g) for g in self.unit_grid)):
            if any(u >= k for u, k in zip(unit, kept, strict=True)):
                yield unit

    def count_outside(self, new_shape: Sequence[int]) -> int:
        """How many write units ``units_outside`` yields (without making them)."""
        return math.prod(self.unit_grid) - math.prod(self._kept_units(new_shape))

    # -- keys ----------------------------------------------------------------------------
    @cached_property
    def unit_prefix(self) -> str:
        """The part all write-unit keys share, before the grid coordinates (e.g.
        ``"path/c/"``): what to list to find the stored units."""
        n = len(self.shape)
        zero = self.unit_key((0,) * n)
        return zero[:len(zero) - (2 * n - 1)] if n else zero

    def unit_of_key(self, key: str) -> tuple[int, ...] | None:
        """The grid coordinates of the write unit stored at ``key`` (None: ``key`` is not
        one of this grid's unit keys)."""
        return parse_unit_key(key, self.unit_key((0,) * len(self.shape)), self.unit_grid)

    # -- alignment -----------------------------------------------------------------------
    def is_aligned(self, region: Sequence[slice]) -> bool:
        """True when ``region`` covers every write unit it touches whole (its edges lie on
        write-unit edges or on the array's edge): writing it reads nothing back, and two
        such regions that do not overlap never share a write unit."""
        if self.edges is not None:
            grid = self.write_grid
            return all(_on_edge(grid, a, s.start, n) and _on_edge(grid, a, s.stop, n)
                       for a, (s, n) in enumerate(zip(region, self.shape, strict=True)))
        for s, w, n in zip(region, self.write_shape, self.shape, strict=True):
            if s.start % w or (s.stop % w and s.stop != n):
                return False
        return True

    def aligned_blocks(self, region: Sequence[slice], itemsize: int, max_bytes: int
                       ) -> Iterator[tuple[slice, ...]]:
        """Write-unit-aligned blocks of at most ``max_bytes`` (at least one write unit)
        that tile ``region`` of the array. Rows of whole units are grouped along the first
        axis; the region's own ends may cut a unit (those pieces are read-modify-writes).
        """
        region = tuple(region)
        if not region:
            yield ()
            return
        unit = self.write_shape
        # unit-grid edges inside the region, per axis, plus the region's own ends
        edges = []
        for a, (s, w) in enumerate(zip(region, unit, strict=True)):
            if self.edges is not None:
                grid = self.write_grid
                inner = [grid.chunk_start(a, c)
                         for c in grid.chunks_on_axis(a, s.start, s.stop)][1:]
            else:
                inner = range((s.start // w + 1) * w, s.stop, w)
            edges.append([s.start, *inner, s.stop] if s.stop > s.start else [s.start, s.stop])
        row_bytes = math.prod(s.stop - s.start for s in region[1:]) * itemsize
        first = edges[0]
        if row_bytes * unit[0] <= max_bytes:  # several unit rows per block
            rows_per_block = max(1, (max_bytes // max(1, row_bytes)) // unit[0])
            for i in range(0, len(first) - 1, rows_per_block):
                stop = first[min(len(first) - 1, i + rows_per_block)]
                yield (slice(first[i], stop), *region[1:])
            return
        pieces = [list(zip(e[:-1], e[1:], strict=True)) for e in edges]
        for parts in itertools.product(*pieces):
            yield tuple(slice(a, b) for a, b in parts)


def parse_unit_key(key: str, zero_key: str, grid: Sequence[int]) -> tuple[int, ...] | None:
    """The grid coordinates in ``key``, read the way ``zero_key`` (the key of unit
    (0, ..., 0)) spells them: its prefix, then one number per axis between its
    separators; None when ``key`` is not spelled so or lies outside ``grid``."""
    n = len(grid)
    if n == 0:
        return () if key == zero_key else None
    prefix = zero_key[:len(zero_key) - (2 * n - 1)]
    if not key.startswith(prefix):
        return None
    parts = key[len(prefix):].split(zero_key[len(prefix) + 1]) if n > 1 else [
        key[len(prefix):]]
    if len(parts) != n or not all(p.isascii() and p.isdigit() for p in parts):
        return None
    coords = tuple(int(p) for p in parts)
    return coords if all(c < g for c, g in zip(coords, grid, strict=True)) else None


def _first_past(grid: RectilinearGrid, axis: int, n: int) -> float:
    """The first chunk along ``axis`` that reaches past ``n``."""
    if not n:
        return 0
    c = grid.chunk_of(axis, n - 1)
    return c if grid.chunk_start(axis, c + 1) > n else c + 1


def _on_edge(grid: ChunkGrid, axis: int, x: int, n: int) -> bool:
    """Whether ``x`` is the start of a unit along ``axis`` or the array's end ``n``."""
    return x >= n or grid.chunk_start(axis, grid.chunk_of(axis, x)) == x


def _grid(shape: Sequence[int], unit: Sequence[int]) -> tuple[int, ...]:
    return tuple(math.ceil(n / u) if u else 0 for n, u in zip(shape, unit, strict=True))
