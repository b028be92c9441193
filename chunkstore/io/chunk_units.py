"""The write units of a batch of chunks, each made when a run of ``commit_units`` takes
it.

A write of many small chunks made every unit (and every projection) of its batch before
committing the first. Those objects then outlived several young garbage collections,
and thousands of them reaching the oldest generation made the interpreter collect the
whole heap during the write (a third of a 10,000-chunk write's garbage-collection time,
and more the larger the process). :class:`ChunkUnits` is a sequence whose items are
made on demand, from projections that may themselves be made on demand (an indexer):
a run holds its units only while it commits them.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from chunkstore.indexing import ChunkProjection
from chunkstore.io.chunk_codec import ChunkCodec
from chunkstore.io.layout import ChunkLayout
from chunkstore.io.rmw import WriteUnit


class ChunkUnits(Sequence[WriteUnit]):
    """The write units of ``value``'s parts in the chunks of ``projections``, each
    projection seen as a write sees it (``layout.for_write``). ``scalar_cache``: a dict shared by the
    batches of a scalar write (whole chunks of one edge shape encode the same), else
    None. ``strided_ok``: the store writes strided raw blocks itself."""

    def __init__(self, projections: Sequence[ChunkProjection], layout: ChunkLayout,
                 codec: ChunkCodec, value: np.ndarray, scalar_cache: dict | None,
                 strided_ok: bool, label: str, max_bytes: int | None) -> None:
        self.projections, self.layout, self.codec, self.value = (projections, layout, codec,
                                                                 value)
        self.scalar_cache, self.strided_ok = scalar_cache, strided_ok
        self.label, self.max_bytes = label, max_bytes
        self.key_of = layout.unit_key
        self._fallback = codec.fill_encoded

    def __len__(self) -> int:
        return len(self.projections)

    def __getitem__(self, i: int) -> WriteUnit:  # type: ignore[override]
        proj = self.layout.for_write(self.projections[i])
        key = self.key_of(proj.chunk_coords)
        if proj.is_complete and self.scalar_cache is not None:
            build = functools.partial(_scalar, self.codec, self.scalar_cache, proj, key,
                                      self.value)
        else:  # a partial, not a closure: fewer objects per chunk for the GC to track
            build = functools.partial(_rebuild, self.codec, self.strided_ok, proj, key,
                                      self.value)
        return WriteUnit(key, build, not proj.is_complete, self._fallback, self.label,
                         self.max_bytes)

    def keys(self) -> Iterator[str]:
        """Every unit's key (without making the units), as they are asked for."""
        return (self.key_of(p.chunk_coords) for p in self.projections)

    def all_whole(self) -> bool:
        """Whether every unit replaces its chunk whole (none reads the old one)."""
        return all(self.layout.for_write(p).is_complete for p in self.projections)


def _rebuild(codec: ChunkCodec, strided_ok: bool, proj: ChunkProjection, key: str,
             value: np.ndarray, old: Any) -> Any:
    """A chunk's new encoding: ``value``'s part written over its ``old`` bytes."""
    return codec.encode(codec.assemble(proj, key, old, value), strided_ok)


def _scalar(codec: ChunkCodec, cache: dict, proj: ChunkProjection, key: str,
            value: np.ndarray, _old: Any) -> Any:
    """A whole chunk of a scalar: every chunk of one edge shape encodes the same."""
    edge = tuple((s.start, s.stop) for s in proj.chunk_selection if isinstance(s, slice))
    if edge not in cache:
        cache[edge] = codec.encode(codec.assemble(proj, key, None, value))
    return cache[edge]
