"""``ShardIO``: the IO of shards whose codec chain is ``sharding_indexed`` alone: read only
the shard index and the needed inner chunks; write whole shards, each a write unit of
``io.rmw``.

The array layer sees inner chunks (``Array.chunks``) and hands this unit IO projections
on the inner chunk grid; the layout groups them by shard.

* Reads fetch the indexes of all touched shards with one ``get_versioned_ranges``
  (parsed indexes are kept in a bounded cache, each with the generation of the shard it
  was read from), then the byte ranges of just the needed inner chunks with one more
  (neighbours merged by the store's request cost), and decode them in the pool straight
  into the output. An index is never trusted blindly (``shard_index``): on S3 the data
  ranges are pinned to its generation (``If-Match: <ETag>``); where it has none, each
  shard's data and index are read in one covering GET (a snapshot store: the same
  batched call re-reads the index bytes); if another writer has
  replaced the shard the batch is redone with the new index (a shard that keeps being
  replaced: read whole, one request). With a decoded-chunk cache
  budget (``chunk_cache``), inner chunks are first looked up there (``inner_cache``:
  checked against each shard's token), and those read are decoded, kept and scattered.
* A selection of step-1 slices on a regular grid (``a[...]``, ``a[10:500, :]``) is read
  shard by shard without a Python object per inner chunk: the same requests, bounds
  checks and index re-reads worked out with NumPy per shard, the shard's inner chunks
  decoded into one stack (blosc: one loop of ``decompress``) and placed by a reshape.
  A write of such a selection made of whole shards cuts each shard's inner chunks from
  the value as one stack, finds the all-fill ones vectorised, encodes the rest in one
  loop and assembles index and payload in one pass (``ShardingCodec.build_list``).
* Every write of shards (and every delete) forgets their decoded inner chunks in every
  chunk cache of the process afterwards, even when it failed half-way.
* Writes: a shard whose inner chunks are all covered is encoded without reading; a
  partly covered shard is a read-modify-write committed only if the shard did not
  change meanwhile (else redone), so writers of distinct inner chunks of one shard
  never lose an update. Untouched inner chunks keep their stored bytes; inner chunks
  equal to the fill value are left out; a shard left empty is deleted.
* Bounds: a shard read whole (a partial write) is passed to the store with the largest
  a shard can legitimately take (``codecs.limits.shard_bound``), and an index entry
  claiming more bytes than an inner chunk's largest encoding is refused before its
  range is requested: a hostile shard costs no more memory than a legitimate one.
"""

from __future__ import annotations

import functools
import itertools
import random
import time
from collections import Counter
from collections.abc import Collection, Iterable, Iterator
from typing import Any

import numpy as np

from chunkstore.codecs.bounded import shard_read_bound
from chunkstore.codecs.pipeline import CodecPipeline, Pipeline
from chunkstore.codecs.sharding import EMPTY, ShardingCodec
from chunkstore.errors import ChunkDecodeError, OutOfMemoryError, UnsupportedError
from chunkstore.indexing import ChunkProjection, OrthogonalIndexer
from chunkstore.indexing.axes import SliceAxis
from chunkstore.io.cache import chunk_cache
from chunkstore.io.cache.inner_cache import InnerLookup
from chunkstore.io.chunk_codec import ChunkCodec
from chunkstore.io.coalesce import coalesce
from chunkstore.io.layout import ChunkLayout
from chunkstore.io.plain import BATCH_BYTES
from chunkstore.io.rmw import WriteUnit, commit_units
from chunkstore.io.shard_index import Seen, ShardIndexes, StaleIndex
from chunkstore.runtime import current
from chunkstore.runtime.pool import batches, threads_for_calls
from chunkstore.storage.base import Store

Group = tuple[tuple[int, ...], list[tuple[ChunkProjection, int]]]
#: reads of a batch whose shards other writers keep replacing (about 2 s in all with the
#: back-off: a writer rewriting a small shard every millisecond made 16 too few)
READ_ATTEMPTS = 48
#: stale reads of one shard after which, on a store without snapshot ranges, it is read
#: whole (one request: one version) instead of by ranges pinned to its index's version,
#: which a writer rewriting it steadily keeps refusing
WHOLE_AFTER = 2
_ONE_RANGE = 2**62  # a coalescing gap that joins every range of a shard
#: inner chunks from which even one shard is decoded on a pool thread: on the main
#: thread numcodecs' blosc takes its global lock and context (about twice the time per
#: tiny chunk)
_POOL_CHUNKS = 64


def is_sharded(pipeline: Pipeline) -> bool:
    """True when the array's codec chain is a ``sharding_indexed`` codec alone. With
    codecs around it, a shard is the array's chunk, encoded and decoded whole through
    the chain by ``ChunkIO`` (``codecs.sharding.sharding_of``)."""
    return (isinstance(pipeline, CodecPipeline) and isinstance(pipeline.array_bytes, ShardingCodec)
            and not pipeline.array_array and not pipeline.bytes_bytes)


class ShardIO:
    """Reads and writes of an array's shards of one shape, in terms of their inner chunks
    (a ``UnitIO`` of ``io.engine.Engine``)."""

    def __init__(self, store: Store, layout: ChunkLayout, pipeline: CodecPipeline,
                 dtype: np.dtype, fill_value: Any, name: str, synchronizer: Any = None,
                 write_empty_chunks: bool = False, cache: Any = None) -> None:
        codec = pipeline.array_bytes
        if not isinstance(codec, ShardingCodec) or codec.inner is None:
            raise UnsupportedError(f"array {name!r}: not a sharded codec chain")
        if pipeline.array_array or pipeline.bytes_bytes:
            raise UnsupportedError(f"array {name!r}: codecs around 'sharding_indexed' are not "
                                   f"supported: {pipeline.to_json()}")
        self.store, self.layout, self.pipeline, self.name = store, layout, pipeline, name
        self.codec, self.chunk_pipeline = codec, codec.inner
        self.synchronizer = synchronizer
        self.inner = ChunkCodec(codec.inner, codec.chunk_shape, dtype, fill_value, name,
                                write_empty_chunks)
        self.chunk_shape, self.dtype = self.inner.chunk_shape, self.inner.dtype
        self.read_fill = self.inner.read_fill
        self.shard_nbytes = self.inner.nbytes * layout.chunks_per_unit
        #: the most pool threads decoding or encoding shards at once: one for tiny inner
        #: chunks, whose codec calls would only take turns at the GIL on more
        self.max_threads = threads_for_calls(self.inner.nbytes)
        #: the largest a stored shard / inner chunk may be (None: unknown)
        self.max_shard, self.max_inner = shard_read_bound(codec), codec.inner.stored_bound
        # decoded inner chunks kept between calls (``chunk_cache``, ``inner_cache``; off
        # unless a budget is set)
        self.cache = chunk_cache.resolve(cache)
        #: the shards' parsed indexes, kept per open array, and the version of each
        self.indexes = ShardIndexes(store, codec, name, self._where, self.max_shard)

    @functools.cached_property
    def _sid(self) -> Any:
        """This array's place in the decoded-chunk cache (None: no cache), for the dtype,
        the inner chunk shape and the whole codec chain (inner and index codecs), in
        shards of this shape; worked out on first use."""
        if self.cache is None:
            return None
        return chunk_cache.store_id(self.store, chunk_cache.fingerprint(
            self.pipeline, self.dtype, self.chunk_shape) + (tuple(self.layout.write_shape),))

    # -- grouping ------------------------------------------------------------------------
    def _groups(self, projections: Iterable[ChunkProjection]) -> Iterator[list[Group]]:
        """Batches of ``(shard coords, [(projection, inner number), ...])``."""
        groups: dict[tuple[int, ...], list[tuple[ChunkProjection, int]]] = {}
        layout = self.layout
        for p in projections:
            coords = tuple(p.chunk_coords)
            groups.setdefault(layout.unit_of(coords), []).append((p, layout.inner_index(coords)))
        return batches(groups.items(), max(1, BATCH_BYTES // self.shard_nbytes))

    def _label(self, key: str, local: int) -> str:
        ratio = self.layout.ratio
        coords = np.unravel_index(local, ratio) if ratio else ()
        return f"{key} (inner chunk {tuple(int(c) for c in coords)})"

    # -- indexes -------------------------------------------------------------------------
    def _where(self, key: str | None) -> str:
        """Names the array, its store and the shard, for errors about memory (raised
        once, where a user must find which array it is)."""
        shard = "" if key is None else f": shard {key!r}"
        return f"array {self.name!r} in {self.store!r}{shard}"

    def invalidate(self, keys: Iterable[str] | None = None) -> None:
        """Forget cached indexes (all of them by default)."""
        self.indexes.invalidate(keys)

    def forget(self, keys: Iterable[str]) -> None:
        """After the shards ``keys`` were written or deleted: forget their indexes here,
        and their decoded inner chunks in every chunk cache of the process."""
        keys = list(keys)
        self.invalidate(keys)
        if self._sid is not None:
            self.cache.invalidate(self._sid, keys)

    # -- reads ---------------------------------------------------------------------------
    def read(self, projections: Iterable[ChunkProjection], out: np.ndarray) -> None:
        """Fill ``out`` from the projected inner chunks (missing ones read as fill)."""
        cached = self.cache is not None and self.cache.active() and self._sid is not None
        region = None if cached else self._region(projections, out.shape)
        if region is not None:
            for batch in self._shard_batches(region):
                self._retrying(functools.partial(self._read_region, batch, region, out))
            return
        for batch in self._groups(projections):
            self._retrying(functools.partial(self._read_batch, batch, out, cached))

    def _retrying(self, read: Any) -> None:
        """``read(whole)`` again while another writer replaces one of its shards
        meanwhile; ``whole``: the shards to read whole (``WHOLE_AFTER``)."""
        delay = 0.0005
        changed: Counter[str] = Counter()
        whole: set[str] = set()
        ranges_may_mix = not self.store.capabilities.snapshot_ranges
        for _attempt in range(READ_ATTEMPTS):
            try:
                read(whole)
                return
            except StaleIndex as e:  # another writer replaced a shard: read it again
                self.invalidate(e.keys)
                stale = e.keys
                changed.update(stale)
                if ranges_may_mix:
                    whole.update(k for k in stale if changed[k] >= WHOLE_AFTER)
                # jittered: not in step with a writer that rewrites at a steady pace
                time.sleep(delay * (0.5 + random.random()))
                delay = min(0.05, delay * 2)
        raise ChunkDecodeError(
            f"array {self.name!r}: shard {stale[0]!r} kept changing while being read "
            f"({READ_ATTEMPTS} attempts), or is shorter than its index says "
            "(truncated shard)")

    def _read_batch(self, batch: list[Group], out: np.ndarray, cached: bool = False,
                    whole: Collection[str] = ()) -> None:
        keys = [self.layout.unit_key(shard) for shard, _ in batch]
        lookup = None
        if cached:
            lookup = InnerLookup(self, keys)
            batch, keys = lookup.serve(batch, keys, out)
            if not batch:
                return
        seen: Seen = {}
        indexes = self.indexes.lookup(keys, seen)
        requests: list[tuple[str, tuple[int, int]]] = []
        wanted: list[list[tuple[ChunkProjection, int, int, int]]] = []
        fills: list[tuple[ChunkProjection, str, int]] = []
        # a store whose ranges may come from different versions of an object (S3: one
        # GET each) gets one covering range per shard, so a shard replaced meanwhile is
        # never read half from each version where the ranges cannot be pinned to the
        # index's version (an unchanged index cannot tell them apart when the inner
        # chunks keep their sizes)
        capabilities = self.store.capabilities
        gap = capabilities.request_cost_bytes if capabilities.snapshot_ranges else _ONE_RANGE
        for key, (_, items), index in zip(keys, batch, indexes, strict=True):
            if index is None:
                fills.extend((p, key, local) for p, local in items)
                continue
            located = []
            for p, local in items:
                offset, nbytes = index[local]
                if nbytes == EMPTY:
                    fills.append((p, key, local))
                else:
                    located.append((p, local, int(offset), int(nbytes)))
                    if self.max_inner is not None and located[-1][3] > self.max_inner:
                        raise ChunkDecodeError(
                            f"array {self.name!r}: cannot decode chunk "
                            f"{self._label(key, local)!r}: its index entry claims "
                            f"{int(nbytes)} bytes, more than the {self.max_inner} its "
                            "largest legitimate encoding takes")
            located.sort(key=lambda t: t[2])
            starts = np.array([t[2] for t in located], np.int64)
            stops = starts + np.array([t[3] for t in located], np.int64)
            firsts, lasts, group = coalesce(starts, stops, gap)
            for r, (a, b) in enumerate(zip(firsts.tolist(), lasts.tolist(), strict=True)):
                if self.max_shard is not None and b - a > self.max_shard:
                    raise ChunkDecodeError(f"array {self.name!r}: shard {key!r}: its index "
                                           f"entries span {b - a} bytes, more than the "
                                           f"{self.max_shard} a shard of it may hold")
                requests.append((key, (a, b)))
                wanted.append([t for t, g in zip(located, group.tolist(), strict=True)
                               if g == r])
        parts = self.indexes.fetch(requests, seen, whole)
        if lookup is not None and (stale := lookup.changed()):
            raise StaleIndex(stale)
        for p, _, _ in fills:
            out[p.out_selection] = self.read_fill
        work = []
        for (key, (start, _)), members, part in zip(requests, wanted, parts, strict=True):
            for p, local, offset, nbytes in members:
                # bytes, not a memoryview: some numcodecs decoders need a real buffer object
                blob = part if len(members) == 1 else part[offset - start:offset - start + nbytes]
                work.append((p, key, local, blob))
        if lookup is not None:
            for _, key, local in fills:
                lookup.keep(key, local, chunk_cache.FILL)
            lookup.decode(work, out)
            return
        current().pool.run_batched(lambda item: self.inner.read_into(
            out, item[0], self._label(item[1], item[2]), item[3]), work,
            item_bytes=self.inner.nbytes, cpu_bound=True)

    # -- whole regions: shard by shard, no Python object per inner chunk ------------------
    def _region(self, projections: Any, shape: tuple[int, ...]
                ) -> tuple[tuple[int, int], ...] | None:
        """The box ``((start, stop), ...)`` of a selection of plain step-1 slices over a
        regular grid, read or written shard by shard with the inner chunks of each in
        one stack (decoded or encoded in one loop, placed by a reshape); else None."""
        if (not isinstance(projections, OrthogonalIndexer) or not projections.is_basic
                or self.layout.edges is not None or self.dtype.kind in "OT"):
            return None
        region = []
        for ax in projections.axes:
            if type(ax) is not SliceAxis or ax.step != 1 or ax.reverse or not ax.nitems:
                return None
            region.append((ax.start, ax.stop))
        if not region or tuple(b - a for a, b in region) != tuple(shape):
            return None
        return tuple(region)

    def _shard_batches(self, region: tuple[tuple[int, int], ...]
                       ) -> Iterator[list[tuple[int, ...]]]:
        """The coordinates of the shards ``region`` touches, in batches (``_groups``)."""
        shards = itertools.product(*(range(a // n, -(-b // n)) for (a, b), n in
                                     zip(region, self.layout.write_shape, strict=True)))
        return batches(shards, max(1, BATCH_BYTES // self.shard_nbytes))

    def _read_region(self, batch: list[tuple[int, ...]], region: tuple[tuple[int, int], ...],
                     out: np.ndarray, whole: Collection[str] = ()) -> None:
        """``_read_batch`` for the shards ``batch`` of a region: the same requests, checks
        and index re-reads, worked out per shard with NumPy."""
        layout, chunks, ratio = self.layout, self.chunk_shape, self.layout.ratio
        keys = [layout.unit_key(shard) for shard in batch]
        seen: Seen = {}
        indexes = self.indexes.lookup(keys, seen)
        capabilities = self.store.capabilities
        gap = capabilities.request_cost_bytes if capabilities.snapshot_ranges else _ONE_RANGE
        plans: list[tuple[Any, ...]] = []
        requests: list[tuple[str, tuple[int, int]]] = []
        for shard, key, index in zip(batch, keys, indexes, strict=True):
            first = tuple(s * r for s, r in zip(shard, ratio, strict=True))
            lo = tuple(max(a // c, f) for (a, _), c, f in zip(region, chunks, first, strict=True))
            hi = tuple(min(-(-b // c), f + r) for (_, b), c, f, r in
                       zip(region, chunks, first, ratio, strict=True))
            ids = np.ravel_multi_index(np.ix_(*(np.arange(a - f, b - f) for a, b, f in
                                                zip(lo, hi, first, strict=True))),
                                       ratio).reshape(-1)
            found = None
            if index is not None:
                entries = index[ids]
                here = np.flatnonzero(entries[:, 1] != EMPTY)
                if here.size:
                    found = self._locate(key, ids, here, entries, gap, len(requests), requests)
            plans.append((key, lo, tuple(b - a for a, b in zip(lo, hi, strict=True)), ids,
                          found))
        datas = self.indexes.fetch(requests, seen, whole)
        starts = [start for _, (start, _) in requests]
        many = sum(len(plan[3]) for plan in plans) >= _POOL_CHUNKS
        current().pool.run_batched(
            lambda plan: self._place(plan, datas, starts, region, out), plans,
            item_bytes=self.shard_nbytes, cpu_bound=True, min_parallel=1 if many else 2,
            max_threads=self.max_threads)

    def _locate(self, key: str, ids: np.ndarray, here: np.ndarray, entries: np.ndarray,
                gap: int, first: int, requests: list[tuple[str, tuple[int, int]]]
                ) -> tuple[np.ndarray, list[int], list[int], list[int]]:
        """The requests (appended to ``requests``, numbered from ``first``) for the stored
        inner chunks ``ids[here]`` of shard ``key``, after the bounds checks of
        ``_read_batch``; returns ``(here, offsets, sizes, request of each)``."""
        offsets, sizes = entries[here, 0], entries[here, 1]
        if self.max_inner is not None and (big := np.flatnonzero(sizes > self.max_inner)).size:
            i = int(big[0])
            raise ChunkDecodeError(
                f"array {self.name!r}: cannot decode chunk "
                f"{self._label(key, int(ids[here[i]]))!r}: its index entry claims "
                f"{int(sizes[i])} bytes, more than the {self.max_inner} its largest "
                "legitimate encoding takes")
        if int(offsets.max()) + int(sizes.max()) >= _ONE_RANGE:  # no real shard is this large
            raise ChunkDecodeError(f"array {self.name!r}: shard {key!r}: its index entries "
                                   "lie beyond any shard it may hold")
        offsets, sizes = offsets.astype(np.int64), sizes.astype(np.int64)
        order = np.argsort(offsets, kind="stable")
        firsts, lasts, group = coalesce(offsets[order], offsets[order] + sizes[order], gap)
        for a, b in zip(firsts.tolist(), lasts.tolist(), strict=True):
            if self.max_shard is not None and b - a > self.max_shard:
                raise ChunkDecodeError(f"array {self.name!r}: shard {key!r}: its index "
                                       f"entries span {b - a} bytes, more than the "
                                       f"{self.max_shard} a shard of it may hold")
            requests.append((key, (a, b)))
        request = np.empty_like(group)
        request[order] = group + first
        return here, offsets.tolist(), sizes.tolist(), request.tolist()

    def _place(self, plan: tuple[Any, ...], datas: list[Any], starts: list[int],
               region: tuple[tuple[int, int], ...], out: np.ndarray) -> None:
        """Decode the inner chunks of one shard's part of a region and place them in
        ``out``: fill where not stored."""
        key, lo, box, ids, found = plan
        chunks = self.chunk_shape
        ends = [(a + b) * c for a, b, c in zip(lo, box, chunks, strict=True)]
        starts_of = [a * c for a, c in zip(lo, chunks, strict=True)]
        inner = tuple(slice(max(s, a) - s, min(e, b) - s) for s, e, (a, b) in
                      zip(starts_of, ends, region, strict=True))
        target = out[tuple(slice(max(s, a) - a, min(e, b) - a) for s, e, (a, b) in
                           zip(starts_of, ends, region, strict=True))]
        if found is None:
            target[...] = self.read_fill
            return
        here, offsets, sizes, request = found
        blobs = [datas[r][o - starts[r]:o - starts[r] + n]
                 for o, n, r in zip(offsets, sizes, request, strict=True)]
        decoded = self.inner.decode_many(blobs, lambda i: self._label(key, int(ids[here[i]])))
        if len(here) == len(ids):
            stack = decoded
        else:
            stack = np.full((len(ids), *chunks), self.read_fill, self.dtype)
            stack[here] = decoded
        nd = len(chunks)
        # (shard chunks..., chunk...) -> (n0, c0, n1, c1, ...): the box as one image
        image = stack.reshape(*box, *chunks).transpose(
            [k for i in range(nd) for k in (i, nd + i)])
        if all(s.start == 0 and s.stop == b * c for s, b, c in zip(inner, box, chunks,
                                                                   strict=True)):
            split = np.lib.stride_tricks.as_strided(
                target, [x for b, c in zip(box, chunks, strict=True) for x in (b, c)],
                [x for st, c in zip(target.strides, chunks, strict=True) for x in (st * c, st)],
                writeable=True)
            split[...] = image
        else:  # part of an inner chunk on an edge of the region
            target[...] = image.reshape([b * c for b, c in zip(box, chunks, strict=True)])[inner]

    def read_chunk(self, coords: tuple[int, ...]) -> np.ndarray:
        """One whole inner chunk (fill_value where it is not stored)."""
        out = np.empty(self.chunk_shape, dtype=self.dtype)
        full = tuple(slice(0, n) for n in self.chunk_shape)
        self.read([ChunkProjection(tuple(coords), full, full, True)], out)
        return out

    # -- writes --------------------------------------------------------------------------
    def write(self, projections: Iterable[ChunkProjection], value: np.ndarray,
              scalar: bool = False) -> None:
        """Write ``value`` (broadcast to the selection shape) into the projected chunks."""
        region = self._region(projections, value.shape)
        if region is not None and not any(a % n or b % n for (a, b), n in
                                          zip(region, self.layout.write_shape, strict=True)):
            # whole shards only: each encoded from its block of ``value`` in one pass
            for batch in self._shard_batches(region):
                self._commit([self._region_unit(shard, region, value, scalar)
                              for shard in batch], cpu_bound=True)
            return
        scalar_cache: dict[Any, Any] | None = {} if scalar else None
        projections = map(self.layout.for_write, projections)
        for batch in self._groups(projections):
            self._commit([self._unit(group, value, scalar_cache) for group in batch])

    def _commit(self, units: list[WriteUnit], cpu_bound: bool = False) -> None:
        try:
            built = commit_units(self.store, units, synchronizer=self.synchronizer,
                                 cpu_bound=cpu_bound, max_threads=self.max_threads)
        finally:  # even when it failed half-way: part of it may have landed
            self.forget([u.key for u in units])
        for unit, result in zip(units, built, strict=True):
            self._after_commit(unit.key, result)

    def _region_unit(self, shard: tuple[int, ...], region: tuple[tuple[int, int], ...],
                     value: np.ndarray, scalar: bool) -> WriteUnit:
        """The write unit replacing shard ``shard``, wholly inside ``region``: its inner
        chunks cut from ``value`` as one stack by a reshape, encoded in one loop, the
        shard assembled in one pass."""
        key = self.layout.unit_key(shard)
        where = self._where(key)
        self.codec.check_index_fits(where)  # every write builds one: refuse before any IO
        shape, chunks, ratio = self.layout.write_shape, self.chunk_shape, self.layout.ratio
        block = value[tuple(slice(s * n - a, (s + 1) * n - a) for s, n, (a, _) in
                            zip(shard, shape, region, strict=True))]
        n_inner, nd = self.layout.chunks_per_unit, len(chunks)

        def build(old: bytes | None) -> Any:
            try:
                if scalar:  # every inner chunk the same
                    blobs = [self.inner.encode(np.ascontiguousarray(
                        block[tuple(slice(0, c) for c in chunks)]))] * n_inner
                else:
                    split = block.reshape([x for r, c in zip(ratio, chunks, strict=True)
                                           for x in (r, c)])
                    stack = np.ascontiguousarray(
                        split.transpose([*range(0, 2 * nd, 2), *range(1, 2 * nd, 2)]),
                        dtype=self.dtype).reshape(n_inner, *chunks)
                    blobs = self.inner.encode_many(stack)
                built = self.codec.build_list(blobs, where)
            except MemoryError as e:  # the shard's own index
                if isinstance(e, OutOfMemoryError):
                    raise
                raise self.codec.index_memory_error(where) from None
            return None if built is None else built[0]

        return WriteUnit(key, build, needs_old=False, fallback=self._empty_shard,
                         label=f"array {self.name!r}", max_bytes=self.max_shard)

    def _after_commit(self, key: str, result: Any) -> None:
        if isinstance(result, bytes | bytearray):
            self.indexes.remember(key, self.codec.index_bytes_of(result))
        else:
            self.invalidate([key])

    def _unit(self, group: Group, value: np.ndarray, scalar_cache: dict | None) -> WriteUnit:
        shard, items = group
        key = self.layout.unit_key(shard)
        where = self._where(key)
        self.codec.check_index_fits(where)  # every write builds one: refuse before any IO
        complete = {local for p, local in items if p.is_complete}
        covered = len(complete) == self.layout.chunks_per_unit
        inner, codec = self.inner, self.codec

        def encode(task: tuple[ChunkProjection, int, bytes | None]) -> Any:
            p, local, old = task
            if scalar_cache is not None and p.is_complete:
                edge = tuple((s.start, s.stop) for s in p.chunk_selection
                             if isinstance(s, slice))
                if edge not in scalar_cache:
                    scalar_cache[edge] = inner.encode(inner.assemble(p, key, None, value))
                return scalar_cache[edge]
            return inner.encode(inner.assemble(p, self._label(key, local), old, value))

        def build(old: bytes | None) -> Any:
            try:
                return rebuild(old)
            except MemoryError as e:  # the shard's own index, parsed or built
                if isinstance(e, OutOfMemoryError):
                    raise
                raise codec.index_memory_error(where) from None

        def rebuild(old: bytes | None) -> Any:
            parts: dict[int, Any] = {}
            index = None
            if old is not None and not covered:
                index = codec.parse(old, f"array {self.name!r}: shard {key!r}")
                for local in np.flatnonzero(index[:, 1] != EMPTY):
                    parts[int(local)] = codec.inner_bytes(old, index, int(local))
            tasks = []
            for p, local in items:
                prior = None
                if index is not None and not p.is_complete:  # only partial chunks decode
                    found = codec.inner_bytes(old, index, local)
                    prior = None if found is None else bytes(found)
                tasks.append((p, local, prior))
            for (_, local, _), encoded in zip(tasks, current().pool.run_batched(encode, tasks), strict=True):
                if encoded is None:
                    parts.pop(local, None)
                else:
                    parts[local] = encoded
            built = codec.build(parts, where)
            return None if built is None else built[0]

        return WriteUnit(key, build, needs_old=not covered, fallback=self._empty_shard,
                         label=f"array {self.name!r}", max_bytes=self.max_shard)

    def _empty_shard(self) -> bytes:
        """A shard of no inner chunks (just its index): written instead of a delete where
        a store cannot delete conditionally."""
        return self.codec.empty_shard(self._where(None))
