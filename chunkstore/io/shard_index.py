"""The indexes of a sharded array's shards, and which version of each shard a read sees.

:class:`ShardIndexes` keeps the parsed indexes of one open array in a bounded cache, each
with the generation of the shard it was read from (``Store.get_versioned_ranges``: S3's
ETag, a memory store's value; ``ANY`` where the store has none, or for an index the
engine built itself when writing). :meth:`ShardIndexes.fetch` reads the byte ranges of
inner chunks from the version of each shard its index describes:

* an index with a generation pins the ranges to it (S3: ``If-Match: <ETag>``, and the
  ETag of each answer checked), so a shard replaced meanwhile, even by equal-sized
  content or A -> B -> A, is never decoded at another version's offsets; no index is
  read again;
* an index without one (or a shard with no range to read, whose cached index may be
  old) is read again in the same call: it must be the same bytes, and of one generation
  with the ranges (on a store with ``snapshot_ranges`` they come from one version
  anyway); a generation so learned pins the next read.

Otherwise :class:`StaleIndex` names the shards, and the engine reads the batch again
from fresh indexes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from chunkstore.codecs.limits import memory_limit
from chunkstore.codecs.sharding import ShardingCodec
from chunkstore.io.cache.lru import LRUCache
from chunkstore.runtime import current
from chunkstore.storage.base import ANY, CHANGED, Store

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
    store and shard) name them in errors."""

    def __init__(self, store: Store, codec: ShardingCodec, name: str,
                 where: Callable[[str | None], str]) -> None:
        self.store, self.codec, self.name, self.where = store, codec, name, where
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

    def fetch(self, requests: list[tuple[str, tuple[int, int]]], seen: Seen) -> list[bytes]:
        """The byte ranges ``requests`` of the shards whose indexes ``seen`` holds, each
        read from the version of its shard that index describes (see the module
        docstring), as ``bytes``; else StaleIndex naming the shards another writer
        replaced meanwhile (or truncated)."""
        asked = {k for k, _ in requests}
        pins = {k: g for k, (_, g) in seen.items() if g is not ANY and k in asked}
        recheck = [k for k in seen if k not in pins]
        calls = [(k, r, pins.get(k, ANY)) for k, r in requests]
        calls += [(k, self.codec.index_range, ANY) for k in recheck]
        found = self.store.get_versioned_ranges(calls) if calls else []
        stale: dict[str, None] = {}
        versions: dict[str, list[Any]] = {}  # the generations each shard was read at
        datas: list[bytes] = []
        for (key, (start, stop)), (part, generation) in zip(requests, found[:len(requests)],
                                                            strict=True):
            if part is None or generation is CHANGED or len(part) != stop - start:
                stale[key] = None
            else:  # the one-pass decoders take bytes
                datas.append(part if type(part) is bytes else bytes(part))
                versions.setdefault(key, []).append(generation)
        for key, (part, generation) in zip(recheck, found[len(requests):], strict=True):
            if part is None or bytes(part) != seen[key][0]:
                stale[key] = None
            else:
                versions.setdefault(key, []).append(generation)
        for key in recheck:
            known = [g for g in versions.get(key, ()) if g is not ANY]
            if any(g != known[0] for g in known):  # ranges and index of two versions
                stale[key] = None
            elif known and key not in stale:
                self._learned(key, seen[key][0], known[0])
        if stale:
            raise StaleIndex(list(stale))
        return datas

    def _learned(self, key: str, raw: bytes, generation: Any) -> None:
        """The cached index ``raw`` of shard ``key`` was found to be that of version
        ``generation``: the next read pins its ranges to it."""
        entry = self.cache.get(key)
        if entry is not None and entry[0] == raw:
            self.cache.put(key, (entry[0], entry[1], generation))
