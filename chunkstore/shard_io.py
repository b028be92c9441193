"""Chunk IO of sharded arrays: read only the shard index and the needed inner chunks.

The array layer sees inner chunks (``Array.chunks``) and hands this engine projections
on the inner chunk grid. The engine groups them by shard and, per batch of shards:

* reads: fetches the indexes of all touched shards with one ``get_ranges`` (a suffix
  range when the index is at the end; parsed indexes are cached per open array),
  then the byte ranges of just the needed inner chunks with one more ``get_ranges``
  (neighbouring chunks of a shard merged into one range), and decodes them in the
  pool straight into the output;
* writes: a shard whose inner chunks are all covered is encoded without reading
  anything; a partly covered shard is read, the touched inner chunks are
  re-encoded (untouched ones are copied as stored bytes) and the shard is written
  back — under the shard's lock when a synchronizer is set. Inner chunks equal to
  the fill value are left out; a shard left without inner chunks is deleted.

Parsed indexes are cached per open array (updated by its own writes). A cached index
is never trusted blindly: the read that uses it fetches the index bytes again in the
*same* batched call as the chunk ranges (no extra round trip) and, if another writer
has replaced the shard meanwhile, the batch is redone with the new index.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from .chunk_io import BATCH_BYTES, ChunkEngine
from .codecs.pipeline import CodecPipeline, Pipeline
from .codecs.sharding import EMPTY, ShardingCodec
from .concurrency import run_batched
from .errors import ChunkDecodeError, ChunkstoreError, UnsupportedError
from .indexing import ChunkProjection
from .storage.base import Store

#: inner chunks of one shard closer than this many bytes are fetched as one range
MERGE_GAP = 4096

Group = tuple[tuple[int, ...], list[tuple[ChunkProjection, int]]]


class _StaleIndex(Exception):
    """A cached index no longer matches the stored shard."""

    def __init__(self, keys: list[str]) -> None:
        super().__init__(keys)
        self.keys = keys


def is_sharded(pipeline: Pipeline) -> bool:
    """True when the array's codec chain is a ``sharding_indexed`` codec."""
    return isinstance(pipeline, CodecPipeline) and isinstance(pipeline.array_bytes, ShardingCodec)


class ShardEngine:
    """Reads and writes of a sharded array, in terms of its inner chunks."""

    def __init__(self, store: Store, key_of: Callable[[tuple[int, ...]], str],
                 pipeline: CodecPipeline, shard_shape: tuple[int, ...], dtype: np.dtype,
                 fill_value: Any, name: str, synchronizer: Any = None,
                 write_empty_chunks: bool = False, *, array_shape: tuple[int, ...]) -> None:
        codec = pipeline.array_bytes
        assert isinstance(codec, ShardingCodec) and codec.inner is not None
        if pipeline.array_array or pipeline.bytes_bytes:
            raise UnsupportedError(f"array {name!r}: codecs around 'sharding_indexed' are not "
                                   f"supported: {pipeline.to_json()}")
        self.store, self.key_of, self.pipeline, self.name = store, key_of, pipeline, name
        self.codec, self.inner_pipeline = codec, codec.inner
        self.shard_shape, self.chunk_shape = tuple(shard_shape), codec.chunk_shape
        self.array_shape, self.dtype = tuple(array_shape), np.dtype(dtype)
        self.synchronizer, self.write_empty_chunks = synchronizer, write_empty_chunks
        self.ratio = codec.chunks_per_shard
        # the per-inner-chunk decode/assemble/encode logic is the plain engine's
        self.inner = ChunkEngine(store, key_of, codec.inner, codec.chunk_shape, self.dtype,
                                 fill_value, name, None, write_empty_chunks)
        self.fill_value, self.read_fill = fill_value, self.inner.read_fill
        self.shard_nbytes = max(1, math.prod(shard_shape) * self.dtype.itemsize)
        self._index_cache: dict[str, tuple[bytes, np.ndarray]] = {}  # key -> (raw, parsed)
        self._cache_lock = threading.Lock()

    # -- grouping ------------------------------------------------------------------------------
    def _locate(self, coords: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
        """(shard coords, C-order number of the inner chunk in its shard)."""
        shard = tuple(c // r for c, r in zip(coords, self.ratio, strict=True))
        local = 0
        for c, r in zip(coords, self.ratio, strict=True):
            local = local * r + c % r
        return shard, local

    def _groups(self, projections: Iterable[ChunkProjection]) -> Iterator[list[Group]]:
        """Batches of ``(shard coords, [(projection, inner number), ...])``."""
        groups: dict[tuple[int, ...], list[tuple[ChunkProjection, int]]] = {}
        for p in projections:
            shard, local = self._locate(tuple(p.chunk_coords))
            groups.setdefault(shard, []).append((p, local))
        per_batch = max(1, BATCH_BYTES // self.shard_nbytes)
        items = list(groups.items())
        for i in range(0, len(items), per_batch):
            yield items[i:i + per_batch]

    def _label(self, key: str, local: int) -> str:
        coords = np.unravel_index(local, self.ratio) if self.ratio else ()
        return f"{key} (inner chunk {tuple(int(c) for c in coords)})"

    def _lock(self, key: str):
        if self.synchronizer is None:
            return contextlib.nullcontext()
        return self.synchronizer[key]

    # -- indexes ------------------------------------------------------------------------------
    def indexes(self, keys: Sequence[str], cached: set[str] | None = None
                ) -> list[np.ndarray | None]:
        """Parsed indexes of the shards ``keys`` (None: shard not stored), one batched
        ranged read for those not cached; the keys answered from the cache are added
        to ``cached``."""
        with self._cache_lock:
            found = {k: self._index_cache[k][1] for k in keys if k in self._index_cache}
        if cached is not None:
            cached.update(found)
        missing = list(dict.fromkeys(k for k in keys if k not in found))
        if missing:
            rng = self.codec.index_range
            parts = self.store.get_ranges([(k, rng) for k in missing])
            for key, part in zip(missing, parts, strict=True):
                found[key] = None if part is None else self._remember(key, part)
        return [found[k] for k in keys]

    def _remember(self, key: str, raw: Any) -> np.ndarray:
        index = self.codec.decode_index(raw, f"array {self.name!r}: shard {key!r}")
        with self._cache_lock:
            self._index_cache[key] = (bytes(raw), index)
        return index

    def _still_valid(self, key: str, raw: Any) -> bool:
        with self._cache_lock:
            entry = self._index_cache.get(key)
        return raw is not None and entry is not None and entry[0] == bytes(raw)

    def invalidate(self, keys: Iterable[str] | None = None) -> None:
        """Forget cached indexes (all of them by default)."""
        with self._cache_lock:
            if keys is None:
                self._index_cache.clear()
            for k in keys or ():
                self._index_cache.pop(k, None)

    # -- reads -----------------------------------------------------------------------------
    def read(self, projections: Iterable[ChunkProjection], out: np.ndarray) -> None:
        """Fill ``out`` from the projected inner chunks (missing ones read as fill)."""
        for batch in self._groups(projections):
            try:
                self._read_batch(batch, out)
            except _StaleIndex as e:  # another writer replaced a shard: re-read its index
                self.invalidate(e.keys)
                try:
                    self._read_batch(batch, out)
                except _StaleIndex as again:
                    raise ChunkDecodeError(
                        f"array {self.name!r}: shard {again.keys[0]!r} is shorter than its "
                        "index says (truncated or changing shard)") from None

    def _read_batch(self, batch: list[Group], out: np.ndarray) -> None:
        keys = [self.key_of(shard) for shard, _ in batch]
        cached: set[str] = set()
        indexes = self.indexes(keys, cached)
        requests: list[tuple[str, tuple[int, int]]] = []
        wanted: list[tuple[int, list[tuple[ChunkProjection, int, int, int]]]] = []
        fill_projs: list[ChunkProjection] = []
        for key, (_, items), index in zip(keys, batch, indexes, strict=True):
            if index is None:
                fill_projs.extend(p for p, _ in items)
                continue
            located = []
            for p, local in items:
                offset, nbytes = index[local]
                if nbytes == EMPTY:
                    fill_projs.append(p)
                else:
                    located.append((p, local, int(offset), int(nbytes)))
            for start, stop, members in _merge(located):
                wanted.append((len(requests), members))
                requests.append((key, (start, stop)))
        # cached indexes are re-read alongside the data (same call) to catch other writers
        recheck = [k for k in dict.fromkeys(keys) if k in cached]
        parts = self.store.get_ranges(
            requests + [(k, self.codec.index_range) for k in recheck]) if (
            requests or recheck) else []
        stale = [k for k, raw in zip(recheck, parts[len(requests):], strict=True)
                 if not self._still_valid(k, raw)]
        if stale:
            raise _StaleIndex(stale)
        for p in fill_projs:
            out[p.out_selection] = self.read_fill
        work = []
        for (pos, members), part in zip(wanted, parts[:len(requests)], strict=True):
            key, (start, stop) = requests[pos]
            if part is None or len(part) != stop - start:
                stale.append(key)
                continue
            for p, local, offset, nbytes in members:
                # bytes, not a memoryview: some numcodecs decoders need a real buffer object
                blob = part if len(members) == 1 else part[offset - start:offset - start + nbytes]
                work.append((p, self._label(key, local), blob))
        if stale:
            raise _StaleIndex(stale)
        run_batched(lambda item: self.inner._read_one(out, *item), work)

    def read_chunk(self, coords: tuple[int, ...]) -> np.ndarray:
        """One whole inner chunk (fill_value where it is not stored)."""
        out = np.empty(self.chunk_shape, dtype=self.dtype)
        full = tuple(slice(0, n) for n in self.chunk_shape)
        self.read([ChunkProjection(tuple(coords), full, full, True)], out)
        return out

    def decode(self, key: str, blob: Any) -> np.ndarray:
        """Decode one whole stored shard; errors name the array and key."""
        try:
            index = self.codec.parse(blob, f"array {self.name!r}: shard {key!r}")
        except ChunkstoreError as e:
            raise ChunkDecodeError(str(e)) from e
        shard = np.full(self.shard_shape, self.read_fill, dtype=self.dtype)
        for i, region in enumerate(self.codec.inner_regions()):
            data = self.codec.inner_bytes(blob, index, i)
            if data is not None:
                shard[region] = self.inner.decode(self._label(key, i), bytes(data))
        return shard

    # -- writes ------------------------------------------------------------------------------
    def _inner_in_array(self, shard: tuple[int, ...]) -> int:
        """How many inner chunks of ``shard`` intersect the array."""
        n = 1
        for s, r, c, size in zip(shard, self.ratio, self.chunk_shape, self.array_shape,
                                 strict=True):
            first = s * r
            n *= max(0, min(r, math.ceil(size / c) - first))
        return n

    def write(self, projections: Iterable[ChunkProjection], value: np.ndarray,
              scalar: bool = False) -> None:
        """Write ``value`` (broadcast to the selection shape) into the projected chunks."""
        scalar_cache: dict[Any, Any] | None = {} if scalar else None
        for batch in self._groups(projections):
            if self.synchronizer is not None:
                partial = [g for g in batch if not self._covered(g)]
                batch = [g for g in batch if self._covered(g)]
                run_batched(lambda g: self._write_locked(g, value, scalar_cache), partial,
                            min_parallel=1)
            if batch:
                self._write_batch(batch, value, scalar_cache)

    def _covered(self, group: Group) -> bool:
        shard, items = group
        complete = {local for p, local in items if p.is_complete}
        return len(complete) == self._inner_in_array(shard)

    def _write_locked(self, group: Group, value: np.ndarray, scalar_cache: dict | None) -> None:
        with self._lock(self.key_of(group[0])):
            self._write_batch([group], value, scalar_cache)

    def _write_batch(self, batch: list[Group], value: np.ndarray,
                     scalar_cache: dict | None) -> None:
        keys = [self.key_of(shard) for shard, _ in batch]
        partial = [i for i, g in enumerate(batch) if not self._covered(g)]
        old: dict[int, tuple[Any, np.ndarray]] = {}
        if partial:
            blobs = self.store.get_many([keys[i] for i in partial])
            for i, blob in zip(partial, blobs, strict=True):
                if blob is not None:
                    where = f"array {self.name!r}: shard {keys[i]!r}"
                    old[i] = (blob, self.codec.parse(blob, where))
        tasks = []
        for i, (_, items) in enumerate(batch):
            blob, index = old.get(i, (None, None))
            for p, local in items:
                inner = None
                if blob is not None and not p.is_complete:  # only partial chunks are decoded
                    found = self.codec.inner_bytes(blob, index, local)
                    inner = None if found is None else bytes(found)
                tasks.append((i, local, p, self._label(keys[i], local), inner))
        encoded = run_batched(
            lambda t: self.inner._encode_one(t[2], t[3], t[4], value, scalar_cache), tasks)
        parts: list[dict[int, Any]] = []
        for i in range(len(batch)):
            kept: dict[int, Any] = {}
            if i in old:  # untouched inner chunks keep their stored bytes
                blob, index = old[i]
                for local in np.flatnonzero(index[:, 1] != EMPTY):
                    kept[int(local)] = self.codec.inner_bytes(blob, index, int(local))
            parts.append(kept)
        for (i, local, *_), result in zip(tasks, encoded, strict=True):
            if result is None:
                parts[i].pop(local, None)
            else:
                parts[i][local] = result
        self._commit(keys, [self.codec.build(p) for p in parts])

    def _commit(self, keys: Sequence[str], built: Sequence[tuple[bytes, np.ndarray] | None]
                ) -> None:
        to_set = [(k, b[0]) for k, b in zip(keys, built, strict=True) if b is not None]
        to_delete = [k for k, b in zip(keys, built, strict=True) if b is None]
        self.invalidate(keys)
        try:
            if to_set:
                self.store.set_many(to_set)
            if to_delete:
                self.store.delete_many(to_delete)
        finally:
            with self._cache_lock:
                for k, b in zip(keys, built, strict=True):
                    if b is not None:
                        self._index_cache[k] = (bytes(self.codec.index_bytes_of(b[0])), b[1])

    def write_chunk(self, coords: tuple[int, ...], chunk: np.ndarray) -> None:
        """Replace one whole inner chunk (its shard is read, modified and written back)."""
        full = tuple(slice(0, n) for n in self.chunk_shape)
        self.write([ChunkProjection(tuple(coords), full, full, True)], chunk)


def _merge(located: list[tuple[ChunkProjection, int, int, int]]
           ) -> list[tuple[int, int, list[tuple[ChunkProjection, int, int, int]]]]:
    """Byte ranges covering the located inner chunks of one shard, close ones merged."""
    ranges: list[tuple[int, int, list]] = []
    for item in sorted(located, key=lambda t: t[2]):
        _, _, offset, nbytes = item
        if ranges and offset - ranges[-1][1] <= MERGE_GAP:
            start, stop, members = ranges[-1]
            ranges[-1] = (start, max(stop, offset + nbytes), [*members, item])
        else:
            ranges.append((offset, offset + nbytes, [item]))
    return ranges


def clear_outside(array: Any, new_shape: tuple[int, ...]) -> None:
    """Shrinking a sharded array: delete shards wholly outside ``new_shape`` and reset
    the part of the cut shards beyond it to fill_value (so growing again shows fill)."""
    from .indexing import all_chunk_coords, chunk_grid_shape
    old, shards = array.shape, array.shards
    new_grid = chunk_grid_shape(new_shape, shards)
    doomed = [array.chunk_key(tuple(c * r for c, r in zip(coords, array._engine.ratio,
                                                          strict=True)))
              for coords in all_chunk_coords(old, shards)
              if any(c >= g for c, g in zip(coords, new_grid, strict=True))]
    array.store.delete_many(doomed)
    array._engine.invalidate(doomed)
    kept = tuple(min(o, math.ceil(n / s) * s) for o, n, s in zip(old, new_shape, shards,
                                                                strict=True))
    for axis, (n, k) in enumerate(zip(new_shape, kept, strict=True)):
        if k > n:
            band = tuple(slice(n, k) if i == axis else slice(0, kept[i])
                         for i in range(len(old)))
            array[band] = array._engine.read_fill
