"""The indexes of a sharded array's shards, and which version of each shard a read sees.

:class:`ShardIndexes` keeps the parsed indexes of one open array in a bounded cache, each
with the generation of the shard it was read from (``Store.get_versioned_ranges``: S3's
ETag, a memory store's value; ``ANY`` where the store has none, or for an index the
engine built itself when writing). :meth:`ShardIndexes.fetch` reads the byte ranges of
inner chunks from a version of each shard whose index is the one they were planned by:

* on a store without snapshot ranges (S3: one GET per range), an index with a
  generation pins the ranges to it (``If-Match: <ETag>``, and the ETag of each answer
  checked), so a shard replaced meanwhile, even A -> B -> A, is never decoded at another
  version's offsets; no index is read again;
* without snapshot ranges, an index without generation (a store without versions:
  fsspec's memory://, GCS, Azure, HTTP; or an index the engine wrote) is read again in
  the same GET as the data: one range from the first needed byte through the index (at
  the end: after the payload the index describes; at the start: from byte 0), within
  ``max_shard``, whose own index must be the one planned. One GET is one version, where
  a separate re-read would pass an A -> B -> A rewrite. A shard with unused bytes before
  an index at its end fails that check and is read whole after ``WHOLE_AFTER``; an
  answer's generation pins the next read;
* otherwise (a store with snapshot ranges, a shard with no range to read whose cached
  index may be old) the index is read again in the same call: it must be the same
  bytes, and of one generation with the ranges (a store with ``snapshot_ranges`` reads
  them from one version anyway); without snapshot ranges, a generation so learned pins
  the next read;
* a shard whose reads kept being refused (a writer rewriting it steadily: the engine
  says which, ``whole``) is read whole in one request, one version, and used when its
  own index is the one planned.

Otherwise :class:`StaleIndex` names the shards, and the engine reads the batch again
from fresh indexes.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

import numpy as np

from chunkstore.codecs.limits import memory_limit
from chunkstore.codecs.sharding import EMPTY, ShardingCodec
from chunkstore.errors import ChunkDecodeError
from chunkstore.io.cache.lru import LRUCache
from chunkstore.runtime import current
from chunkstore.storage.base import ANY, CHANGED, Store
from chunkstore.storage.bounds import ObjectSizeError, bounded_get_versioned

#: what a read saw of each shard's index: key -> (raw index bytes, generation)
Seen = dict[str, tuple[bytes, Any]]


class StaleIndex(Exception):
    """An index no longer matches the stored shard (another writer replaced it), or the
    shard is shorter than its index says."""

    def __init__(self, keys: list[str]) -> None:
        super().__init__(keys)
        self.keys = keys


class ShardIndexes:
    """The shard indexes of one open sharded array (see the module docstring): read from
    ``store`` through ``codec``; ``name`` (the array's) and ``where(key)`` (the array,
    store and shard) name them in errors; ``max_shard`` bounds a shard read whole."""

    def __init__(self, store: Store, codec: ShardingCodec, name: str,
                 where: Callable[[str | None], str], max_shard: int | None = None) -> None:
        self.store, self.codec, self.name, self.where = store, codec, name, where
        #: the largest a stored shard may be (None: unknown), for reads of whole shards
        self.max_shard = max_shard
        #: key -> (raw index bytes, parsed index, generation); an index of 64 inner
        #: chunks is 1 KiB
        self.cache = LRUCache(max_entries=65536, max_bytes=current().budgets.shard_index_bytes,
                              size_of=lambda e: 2 * len(e[0]) + 64)

    def lookup(self, keys: Sequence[str], seen: Seen | None = None
               ) -> list[np.ndarray | None]:
        """Parsed indexes of the shards ``keys`` (None: shard not stored), one batched
        ranged read for those not cached; the raw bytes and the generation of every index
        found go to ``seen`` (to read the data from that version: :meth:`fetch`)."""
        found: dict[str, np.ndarray | None] = {}
        for k in keys:
            entry = self.cache.get(k)
            if entry is not None:
                found[k] = entry[1]
                if seen is not None:
                    seen[k] = (entry[0], entry[2])
        missing = list(dict.fromkeys(k for k in keys if k not in found))
        if missing:
            missing = self._fitting(missing, found)
        if missing:
            rng = self.codec.index_range
            try:
                parts = self.store.get_versioned_ranges([(k, rng, ANY) for k in missing])
            except MemoryError:
                raise self.codec.index_memory_error(self.where(missing[0])) from None
            if self.store.capabilities.snapshot_ranges:  # never pinned: keep no generation
                parts = [(part, ANY) for part, _ in parts]
            for key, (part, generation) in zip(missing, parts, strict=True):
                found[key] = None if part is None else self.remember(key, part, generation)
                if part is not None and seen is not None:
                    seen[key] = (bytes(part), generation)
        return [found[k] for k in keys]

    def _fitting(self, keys: list[str], found: dict[str, np.ndarray | None]) -> list[str]:
        """``keys`` whose index is to be read: all of them, unless the index is larger
        than this machine's memory (a shard cannot be read here): then a shard that
        exists is refused, naming it, before the store allocates its index, and the
        others (not stored: read as fill) are recorded in ``found``."""
        limit = memory_limit()
        if limit is None or self.codec.index_nbytes <= limit:
            return keys
        for key in keys:
            if self.store.exists(key):
                self.codec.check_index_fits(self.where(key))
            found[key] = None
        return []

    def remember(self, key: str, raw: Any, generation: Any = ANY) -> np.ndarray:
        """Parse and cache the index ``raw`` of shard ``key``, of the stored version
        ``generation`` (``ANY``: unknown)."""
        index = self.codec.decode_index(raw, f"array {self.name!r}: shard {key!r}")
        self.cache.put(key, (bytes(raw), index, generation))
        return index

    def invalidate(self, keys: Iterable[str] | None = None) -> None:
        """Forget cached indexes (all of them by default)."""
        self.cache.discard(keys)

    def fetch(self, requests: list[tuple[str, tuple[int, int]]], seen: Seen,
              whole: Collection[str] = ()) -> list[bytes]:
        """The byte ranges ``requests`` of the shards whose indexes ``seen`` holds, each
        read from the version of its shard that index describes (see the module
        docstring), as ``bytes``; else StaleIndex naming the shards another writer
        replaced meanwhile (or truncated). The shards ``whole`` (replaced during the
        last reads: their pins kept failing) are read whole in one request each,
        bounded by ``max_shard``, and used when their own index is the one planned."""
        snapshots = self.store.capabilities.snapshot_ranges
        wholes = [k for k in dict.fromkeys(k for k, _ in requests) if k in whole]
        blobs = dict(zip(wholes, self._wholes(wholes), strict=True)) if wholes else {}
        asked = {k for k, _ in requests if k not in blobs}
        # on a store reading one version per call, the index read again beside the data
        # is as sound as a pin, and a writer rewriting the shard with the same index
        # (the same sizes) does not make the read start again
        pins = {} if snapshots else {k: g for k, (_, g) in seen.items()
                                      if g is not ANY and k in asked}
        recheck = [k for k in seen if k not in pins and k not in blobs]
        # elsewhere an index without generation is read again in the same GET as the
        # data (one version): an A -> B -> A rewrite between two GETs passes a re-read
        spans = {} if snapshots else self._spans(requests, recheck, seen)
        recheck = [k for k in recheck if k not in spans]
        ranged = [(k, r) for k, r in requests if k not in blobs and k not in spans]
        calls = [(k, r, pins.get(k, ANY)) for k, r in ranged]
        calls += [(k, r, ANY) for k, r in spans.items()]
        calls += [(k, self.codec.index_range, ANY) for k in recheck]
        got = iter(self.store.get_versioned_ranges(calls) if calls else [])
        direct = iter([next(got) for _ in ranged])
        spanned = {k: next(got) for k in spans}
        found = [self._slice(blobs[k], r, seen[k][0]) if k in blobs else
                 self._slice(spanned[k], r, seen[k][0], spans[k]) if k in spans else
                 next(direct) for k, r in requests]
        stale: dict[str, None] = {}
        versions: dict[str, list[Any]] = {}  # the generations each shard was read at
        datas: list[bytes] = []
        for (key, (start, stop)), (part, generation) in zip(requests, found, strict=True):
            if part is None or generation is CHANGED or len(part) != stop - start:
                stale[key] = None
            else:  # the one-pass decoders take bytes
                datas.append(part if type(part) is bytes else bytes(part))
                versions.setdefault(key, []).append(generation)
        for key, (part, generation) in zip(recheck, got, strict=True):
            if part is None or bytes(part) != seen[key][0]:
                stale[key] = None
            else:
                versions.setdefault(key, []).append(generation)
        for key in recheck:
            known = [g for g in versions.get(key, ()) if g is not ANY]
            if any(g != known[0] for g in known):  # ranges and index of two versions
                stale[key] = None
            elif known and key not in stale and not snapshots:
                self._learned(key, seen[key][0], known[0])
        for key, (_, generation) in spanned.items():
            if key not in stale and generation is not ANY:
                self._learned(key, seen[key][0], generation)
        if stale:
            raise StaleIndex(list(stale))
        return datas

    def _wholes(self, keys: list[str]) -> list[tuple[Any, Any]]:
        """``get_versioned_many`` of the shards ``keys``, each bounded by ``max_shard``;
        a larger one is refused before it is read, naming the array and the key."""
        try:
            return bounded_get_versioned(self.store, keys, self.max_shard)
        except ObjectSizeError as e:
            raise ChunkDecodeError(f"array {self.name!r}: cannot decode {e.key!r}: {e}"
                                   ) from e

    def _spans(self, requests: list[tuple[str, tuple[int, int]]], keys: list[str],
               seen: Seen) -> dict[str, tuple[int, int]]:
        """For each shard of ``keys`` with ranges in ``requests``, the one range covering
        them and its index (at the end: from the first needed byte through the index
        after the payload the planned index describes; at the start: from byte 0), each
        within ``max_shard`` (else refused before any request, naming the shard)."""
        keys_ = set(keys)
        spans: dict[str, tuple[int, int]] = {}
        for key, (start, stop) in requests:
            if key in keys_:
                lo, hi = spans.get(key, (start, stop))
                spans[key] = (min(lo, start), max(hi, stop))
        for key, (start, stop) in spans.items():
            if self.codec.index_location == "start":
                span = (0, stop)
            else:
                span = (start, self._payload_end(key, seen[key][0]) + self.codec.index_nbytes)
            if self.max_shard is not None and span[1] - span[0] > self.max_shard:
                raise ChunkDecodeError(f"array {self.name!r}: shard {key!r}: its index "
                                       f"entries span {span[1] - span[0]} bytes with it, "
                                       f"more than the {self.max_shard} a shard of it may "
                                       "hold")
            spans[key] = span
        return spans

    def _payload_end(self, key: str, raw: bytes) -> int:
        """Where the payload of shard ``key`` ends by its index ``raw`` (the end of its
        last stored inner chunk; ``offset + nbytes`` never wraps: ``decode_index``)."""
        entry = self.cache.get(key)
        index = entry[1] if entry is not None and entry[0] == raw else \
            self.codec.decode_index(raw, f"array {self.name!r}: shard {key!r}")
        stored = index[:, 1] != EMPTY
        return int((index[stored, 0] + index[stored, 1]).max()) if stored.any() else 0

    def _slice(self, found: tuple[Any, Any], byte_range: tuple[int, int], raw: bytes,
               span: tuple[int, int] | None = None) -> tuple[bytes | None, Any]:
        """``byte_range`` of a whole shard ``found`` (``(bytes, generation)``), or of its
        range ``span`` (the index at one of its ends), as ``get_versioned_ranges`` answers
        it, or ``(None, CHANGED)`` when the shard is missing or short or its own index is
        not ``raw`` (another version than the one planned)."""
        blob, generation = found
        if blob is None or len(blob) < self.codec.index_nbytes or (
                span is not None and len(blob) != span[1] - span[0]) or bytes(
                self.codec.index_bytes_of(blob)) != raw:
            return None, CHANGED
        base = 0 if span is None else span[0]
        start, stop = byte_range
        return bytes(memoryview(blob)[start - base:stop - base]), generation

    def _learned(self, key: str, raw: bytes, generation: Any) -> None:
        """The cached index ``raw`` of shard ``key`` was found to be that of version
        ``generation``: the next read pins its ranges to it."""
        entry = self.cache.get(key)
        if entry is not None and entry[0] == raw:
            self.cache.put(key, (entry[0], entry[1], generation))
