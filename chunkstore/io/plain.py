"""``ChunkIO``: the IO of write units stored whole, one encoded object per chunk (any
codec chain; with sharding in it, a shard is the chunk the chain encodes whole).

Reads: the keys of all touched chunks are fetched with one ``get_many`` per batch
(``get_views`` from remote stores: their downloaded buffers, not copies; bounded bytes),
decoded in the shared pool and scattered into the output. Stores with
zero-copy views (a local directory: memory maps) are read in place: each compressed
chunk is decoded straight from its view by the thread that fetched it, and uncompressed
chunks are indexed directly, only the selected elements being copied. Uncompressed
chunks of other stores of which only a little is needed are read as byte ranges.

Every whole-chunk read passes the store the largest legitimate size of an encoded chunk
(``Pipeline.stored_bound``) as ``max_bytes``, and every ranged read the exact size
of a raw chunk as ``object_size``: an object of another size (a sparse file of
gigabytes, a hostile upload) is a ChunkDecodeError naming the array and key, refused by
the store before it is read, not after.

Writes: every touched chunk is a write unit (``io.rmw``): a chunk covered whole is
encoded and committed without reading; a partly covered one is read with its
generation, assembled, encoded and committed only if unchanged (else redone). Chunks
that end up all fill_value are deleted instead of written.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from chunkstore.codecs import Pipeline
from chunkstore.codecs.bytes_codec import has_long_rows, long_rows
from chunkstore.errors import ChunkDecodeError
from chunkstore.indexing import ChunkProjection
from chunkstore.io.cache import chunk_cache
from chunkstore.io.chunk_codec import ChunkCodec, is_basic
from chunkstore.io.chunk_units import ChunkUnits
from chunkstore.io.layout import ChunkLayout
from chunkstore.io.prefetch import ahead
from chunkstore.io.ranges import RangePlanner
from chunkstore.io.rmw import commit_units
from chunkstore.runtime import current
from chunkstore.runtime.pool import INLINE_ITEM_BYTES, batches, interleaved, windows
from chunkstore.runtime.scratch import scratch_buffer
from chunkstore.storage.base import Reader, Store
from chunkstore.storage.bounds import (
    ObjectSizeError,
    bounded_get,
    bounded_get_many,
    bounded_get_views,
    sized_get_ranges,
)

BATCH_BYTES = 256 * 2**20  # decoded bytes per write batch: bounds memory of huge writes
#: chunk bytes per read batch (at least two chunks per pool thread): a batch's fetched
#: values are held until decoded, so a read's peak is its output plus about this
READ_BATCH_BYTES = 64 * 2**20
# reads from remote stores: batches fetched ahead of the one decoding (at least), ...
REMOTE_READ_AHEAD = 4
REMOTE_READ_REQUESTS = 32  # ... chunk requests in flight at once (tensorstore: 32) ...
REMOTE_BATCH_BYTES = 4 * 2**20  # ... and the least a batch of small chunks weighs
MAP_COMPRESSED_BYTES = 2 * 2**20  # compressed chunks read through maps from this size
VIEW_GROUP = 64  # views held at once (a memory map holds a file descriptor) ...
VIEW_GROUP_BYTES = 16 * 2**20  # ... and at most this many mapped bytes (or 2 per thread)


class ChunkIO:
    """Reads and writes of an array's chunks of one shape, each stored as one object (a
    ``UnitIO`` of ``io.engine.Engine``)."""

    def __init__(self, store: Store, layout: ChunkLayout, pipeline: Pipeline, dtype: np.dtype,
                 fill_value: Any, name: str, synchronizer: Any = None,
                 write_empty_chunks: bool = False, cache: Any = None) -> None:
        self.store, self.layout, self.pipeline, self.name = store, layout, pipeline, name
        self.chunk_pipeline = pipeline  # a chunk is its stored object
        # decoded chunks kept between calls (``chunk_cache``; off unless a budget is set)
        self.cache = chunk_cache.resolve(cache)
        self.synchronizer = synchronizer
        self.codec = ChunkCodec(pipeline, layout.chunks, dtype, fill_value, name,
                                write_empty_chunks)
        self.chunk_shape, self.dtype = self.codec.chunk_shape, self.codec.dtype
        self.read_fill, self.chunk_nbytes = self.codec.read_fill, self.codec.nbytes
        self.key_of = layout.unit_key
        self._label = f"array {name!r}"  # names the array in a write unit's errors
        # the store writes strided blocks' rows itself (raw chunks: no copy first)
        capabilities = store.capabilities
        self._strided_ok = capabilities.writes_arrays
        # ... and reads whole raw chunks straight into the output's rows
        self._reads_rows = capabilities.reads_arrays
        # a remote store's views are the buffers it downloaded (no maps, no descriptors
        # held while a batch waits to be decoded): decoded from, they need no copy first
        self._remote_views = capabilities.remote
        #: the largest a stored chunk may be (None: unknown, e.g. variable-length items)
        self.max_stored = pipeline.stored_bound
        # chunks stored as raw C-ordered bytes: read in place through views of a
        # zero-copy store, else just the byte ranges a small selection needs
        self.raw_dtype: np.dtype | None = None
        self.ranges: RangePlanner | None = None
        if pipeline.fixed_size and self.dtype.kind != "O":
            self.raw_dtype = (pipeline.array_bytes._stored_dtype(self.dtype)
                              if pipeline.zarr_format == 3 else self.dtype)
            if not capabilities.zero_copy_views and capabilities.partial_reads:
                # where two requests may see two versions of a chunk, one range per chunk
                cost = (capabilities.request_cost_bytes if capabilities.snapshot_ranges
                        else self.chunk_nbytes)
                self.ranges = RangePlanner(tuple(self.chunk_shape), self.raw_dtype, cost)
        # whole raw chunks of long rows are handed to such a store as views of the
        # written array (``raw_bytes``): built, they hold no memory of their own
        self._builds_views = (self._strided_ok and self.raw_dtype == self.dtype
                              and long_rows(self.chunk_shape, self.dtype))

    @functools.cached_property
    def _sid(self) -> Any:
        """This array's place in the decoded-chunk cache (None: no cache), worked out on
        first use: a read while the cache is off never needs it."""
        if self.cache is None:
            return None
        return chunk_cache.store_id(self.store, chunk_cache.fingerprint(
            self.pipeline, self.dtype, self.layout.chunks))

    def _batches(self, projections: Iterable[ChunkProjection], batch_bytes: int = BATCH_BYTES
                 ) -> Iterator[list[ChunkProjection]]:
        return batches(projections, max(1, batch_bytes // self.chunk_nbytes))

    # -- reads ---------------------------------------------------------------------------
    def read(self, projections: Iterable[ChunkProjection], out: np.ndarray) -> None:
        """Fill ``out`` from every projected chunk (missing chunks read as fill_value)."""
        cached = self.cache is not None and self.cache.active() and self._sid is not None
        if cached:
            batch_bytes = max(READ_BATCH_BYTES, 2 * current().budgets.max_workers * self.chunk_nbytes)
            for batch in self._batches(projections, batch_bytes):
                self._read_cached(batch, out)
            return
        self._read_direct(projections, out)

    def _read_direct(self, projections: Iterable[ChunkProjection], out: np.ndarray) -> None:
        """Fill ``out`` from the projected chunks without the decoded-chunk cache."""
        if self.store.capabilities.zero_copy_views:
            self._read_in_place(projections, out)
            return
        # other stores: later batches are fetched while this one decodes
        per_batch = 2 * current().pool.threads(True)
        if self.store.capabilities.remote:
            # remote ones keep many small batches in flight (two chunks per decoding
            # thread, or REMOTE_BATCH_BYTES of small chunks): decoding starts as soon as
            # the first few chunks arrive and follows the fetches closely, where a large
            # batch's decoding waited for its slowest request and the last one's ran after
            # every fetch (36 MiB on moto: 12-chunk batches 0.8-1.0x tensorstore, 4-chunk
            # ones 1.15-1.4x); the batches held at once weigh about READ_BATCH_BYTES
            per_batch = max(per_batch, REMOTE_BATCH_BYTES // self.chunk_nbytes)
            size = per_batch * self.chunk_nbytes
            depth = max(REMOTE_READ_AHEAD, min(REMOTE_READ_REQUESTS // per_batch,
                                               READ_BATCH_BYTES // size - 1))
        else:
            depth = 1
            size = max(READ_BATCH_BYTES // 2, per_batch * self.chunk_nbytes)
        for _batch, fetched in ahead(self._batches(projections, size), self._fetch, depth):
            self._place(fetched, out)

    def _fetch(self, batch: list[ChunkProjection]) -> tuple[list, list, list, list]:
        """The stored values a batch needs: whole chunks, and the byte ranges of the
        chunks of which little is read (``_place`` decodes them)."""
        whole, ranged = batch, []
        if self.ranges is not None:
            whole = []
            for p in batch:
                plan = None if p.is_complete else self.ranges.plan(p.chunk_selection)
                if plan is None:
                    whole.append(p)
                else:
                    ranged.append((p, plan))
        keys = [self.key_of(p.chunk_coords) for p in whole]
        get = bounded_get_views if self._remote_views else bounded_get_many
        with self._named():
            blobs = get(self.store, keys, self.max_stored) if keys else []
            return whole, keys, blobs, self._fetch_ranged(ranged) if ranged else []

    @contextlib.contextmanager
    def _named(self) -> Iterator[None]:
        """A store's refusal of an object of the wrong size, naming this array too."""
        try:
            yield
        except ObjectSizeError as e:
            raise ChunkDecodeError(f"array {self.name!r}: cannot decode chunk {e.key!r}: "
                                   f"{e}") from e

    def _place(self, fetched: tuple[list, list, list, list], out: np.ndarray) -> None:
        whole, keys, blobs, ranged = fetched
        if whole:
            current().pool.run_batched(lambda item: self.codec.read_into(out, *item),
                        list(zip(whole, keys, blobs, strict=True)),
                        item_bytes=self.chunk_nbytes, cpu_bound=True)
        if ranged:
            self._place_ranged(ranged, out)

    def _read_cached(self, batch: list[ChunkProjection], out: np.ndarray) -> None:
        """Chunks from the decoded-chunk cache (validated where the store can say cheaply
        which version it holds); the misses are read whole, decoded, kept and scattered."""
        cache, sid, store, codec = self.cache, self._sid, self.store, self.codec
        keys = [self.key_of(p.chunk_coords) for p in batch]
        since = cache.epoch()  # before the tokens and the reads: see ChunkCache.put
        toks = chunk_cache.tokens(store, keys, cache)
        check = toks is not None
        hits, misses, passing = [], [], []
        for i, (p, key) in enumerate(zip(batch, keys, strict=True)):
            chunk = cache.get(sid, key, toks[i] if check else None, check)
            if chunk is not None:
                hits.append((p, chunk))
            elif check and not chunk_cache.keepable(toks[i]):
                # a version the cache may not keep (a file changed a moment ago): read
                # the plain way, in place, not decoded into a new array for nothing
                passing.append(p)
            else:
                misses.append(i)
        if passing:
            self._read_direct(passing, out)
        if misses:
            with self._named():
                blobs = bounded_get_many(store, [keys[i] for i in misses], self.max_stored)

            def decode(j: int) -> tuple[ChunkProjection, Any]:
                i, blob = misses[j], blobs[j]
                if blob is None:
                    chunk: Any = chunk_cache.FILL
                else:
                    chunk = codec.decode(keys[i], blob)  # a new array (no scratch buffer)
                cache.put(sid, keys[i], toks[i] if check else None, chunk, since)
                return batch[i], chunk

            hits += current().pool.run_batched(decode, range(len(misses)), item_bytes=self.chunk_nbytes,
                                cpu_bound=True)
        chunk_cache.scatter(hits, out, self.read_fill, self.chunk_nbytes)

    def _read_in_place(self, projections: Iterable[ChunkProjection], out: np.ndarray) -> None:
        """Chunks read without a copy of the stored bytes (views, or straight into
        ``out``). Sizeable chunks stream through the pool, each fetched by the thread
        that decodes it: fetching overlaps decoding, and no thread waits for the others
        at the end of a batch. Tiny chunks, and raw ones of which only a few elements
        are read, are fetched a group at a time with one store call."""
        stream = iter(projections)
        first = next(stream, None)
        if first is None:
            return
        stream = itertools.chain((first,), stream)
        if self.chunk_nbytes < INLINE_ITEM_BYTES or (self.raw_dtype is not None
                                                     and not first.is_complete):
            for batch in self._batches(stream, READ_BATCH_BYTES):
                self._read_views(batch, out)
            return
        kept_maps = bool(current().budgets.map_bytes)  # maps kept between reads: use them
        # chunks placed at once lie far apart in ``out``: threads faulting in the same
        # huge page at once each zero one, and all but one are thrown away
        with self.store.read_session() as reader:
            current().pool.run_streamed(functools.partial(self._read_one, out, reader, kept_maps),
                         interleaved(stream, 2 * current().pool.threads(True)))

    def _read_views(self, batch: list[ChunkProjection], out: np.ndarray) -> None:
        """``batch`` as groups of views, one store call each (mapped pages touched count
        in RSS until the map is dropped: few at once)."""
        if self.raw_dtype is not None:  # a few elements, or whole chunks
            read = self._read_view
            size = self.chunk_nbytes if any(p.is_complete for p in batch) else 0
        else:
            read, size = self.codec.read_into, self.chunk_nbytes
        per_group = min(VIEW_GROUP, max(2 * current().budgets.max_workers,
                                        VIEW_GROUP_BYTES // self.chunk_nbytes))
        for start in range(0, len(batch), per_group):
            group = batch[start:start + per_group]
            keys = [self.key_of(p.chunk_coords) for p in group]
            with self._named():
                views = bounded_get_views(self.store, keys, self.max_stored)
            items = list(zip(group, keys, views, strict=True))
            current().pool.run_batched(lambda item: read(out, *item), items, item_bytes=size,
                        cpu_bound=True)

    def _read_one(self, out: np.ndarray, reader: Reader, kept_maps: bool,
                  proj: ChunkProjection) -> None:
        """One sizeable chunk into ``out``: a raw one read straight into its place when
        that is a block of long rows (``Store.read_session``), else through a view."""
        key = self.key_of(proj.chunk_coords)
        if self.raw_dtype is None:
            # a small compressed chunk is read, not mapped: mapping, faulting and
            # unmapping (TLB shootdowns across the pool's cores) cost more than the copy,
            # unless the maps are kept between reads (``cache.map_bytes``)
            with self._named():
                view = (bounded_get_views(self.store, (key,), self.max_stored)[0]
                        if kept_maps or self.chunk_nbytes >= MAP_COMPRESSED_BYTES
                        else reader.get(key, self.max_stored))
            self.codec.read_into(out, proj, key, view)
            return
        if self._reads_rows and not kept_maps and proj.is_complete and is_basic(
                proj.out_selection):
            dest = out[(*proj.out_selection, Ellipsis)]
            if dest.shape == self.chunk_shape and dest.dtype == self.raw_dtype and (
                    dest.flags.c_contiguous or has_long_rows(dest)):
                with self._named():
                    if not reader.read_into(key, dest):
                        dest[...] = self.read_fill
                return
        with self._named():
            view = bounded_get_views(self.store, (key,), self.max_stored)[0]
        self._read_view(out, proj, key, view)

    def _read_view(self, out: np.ndarray, proj: ChunkProjection, key: str, view: Any) -> None:
        if view is None:
            out[proj.out_selection] = self.read_fill
            return
        n = memoryview(view).nbytes
        if n != self.chunk_nbytes:
            raise ChunkDecodeError(f"array {self.name!r}: cannot decode chunk {key!r}: chunk "
                                   f"has {n} bytes, expected {self.chunk_nbytes} for shape "
                                   f"{self.chunk_shape} {self.dtype}")
        chunk = np.frombuffer(view, self.raw_dtype).reshape(self.chunk_shape)
        out[proj.out_selection] = chunk[proj.chunk_selection]

    def _fetch_ranged(self, items: list) -> list:
        """``(key, projection, plan, parts)`` of chunks read as byte ranges."""
        keys = [self.key_of(p.chunk_coords) for p, _ in items]  # once per chunk, not range
        requests = [(key, r) for key, (_, plan) in zip(keys, items, strict=True)
                    for r in plan.ranges]
        # a missing chunk answers None to every range; a stored one must have the exact
        # size of a raw chunk (a range inside a truncated or oversized one is no answer)
        size = self.ranges.nelements * self.ranges.itemsize
        with self._named():
            parts = sized_get_ranges(self.store, requests, size) if requests else []
        found, pos = [], 0
        for key, (proj, plan) in zip(keys, items, strict=True):
            n = len(plan.ranges)
            found.append((key, proj, plan, parts[pos:pos + n]))
            pos += n
        return found

    def _place_ranged(self, found: list, out: np.ndarray) -> None:
        planner = self.ranges
        for key, proj, plan, got in found:
            if plan.ranges and got[0] is None:
                out[proj.out_selection] = self.read_fill
                continue
            flat = scratch_buffer((planner.nelements,), planner.stored_dtype)
            try:
                values = planner.gather(plan, got, flat)
            except ValueError as e:
                raise ChunkDecodeError(f"array {self.name!r}: cannot decode chunk {key!r}: {e}"
                                       ) from e
            out[proj.out_selection] = values

    def read_chunk(self, coords: tuple[int, ...]) -> np.ndarray:
        """The whole (unclipped) decoded chunk, fill_value if it is not stored."""
        key = self.key_of(coords)
        with self._named():
            blob = bounded_get(self.store, key, self.max_stored)
        if blob is None:
            return self.codec.fill_chunk()
        chunk = self.codec.decode(key, blob)
        return chunk if chunk.flags.writeable else chunk.copy()

    # -- writes --------------------------------------------------------------------------
    def write(self, projections: Iterable[ChunkProjection], value: np.ndarray,
              scalar: bool = False) -> None:
        """Write ``value`` (already broadcast to the selection shape) into every chunk."""
        scalar_cache: dict[Any, Any] | None = {} if scalar else None
        # a remote store holds a batch's encoded chunks until they are sent: smaller batches
        per_batch = max(1, (self.store.capabilities.write_batch_bytes or BATCH_BYTES)
                        // self.chunk_nbytes)
        # an indexer makes its projections on demand: a batch is a window of it
        parts = (windows(projections, per_batch) if isinstance(projections, Sequence)
                 else batches(projections, per_batch))
        for batch in parts:
            units = ChunkUnits(batch, self.layout, self.codec, value, scalar_cache,
                               self._strided_ok, self._label, self.max_stored)
            views = self._builds_views and not scalar and units.all_whole()
            try:
                commit_units(self.store, units, synchronizer=self.synchronizer,
                             item_bytes=self.chunk_nbytes, keep_values=False,
                             built_bytes=0 if views else None)
            finally:
                self.forget(units.keys())

    def forget(self, keys: Iterable[str]) -> None:
        """Drop ``keys`` from the decoded-chunk cache (after they were written)."""
        if self._sid is not None:
            self.cache.invalidate(self._sid, keys)
