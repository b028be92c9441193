"""The decoded-chunk cache (``chunk_cache``) as ``ShardIO`` uses it: inner chunks
kept under their shard's key and their number in the shard, one group per shard.

A read takes the cache's epoch, then one token per shard (``LocalStore``: the shard
file's stat, unsettled while the file changed too recently to trust it, see
``cache_stamps``; ``MemoryStore``: the stored value), serves the inner chunks cached for
that token, and reads the others as usual; those are decoded into new arrays, kept
(unless a write invalidated anything meanwhile) and scattered. A shard's token is
taken before any of its bytes are read, so an entry never claims a newer version than
the one decoded. A shard read partly from the cache and partly from the store has its
token taken again after the read: if it changed, the batch is read again, so one read
never mixes two versions of a shard (as a read without the cache does not).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from chunkstore.indexing import ChunkProjection
from chunkstore.io.cache import chunk_cache
from chunkstore.io.cache.place import _same
from chunkstore.runtime import current

Group = tuple[tuple[int, ...], list[tuple[ChunkProjection, int]]]


class InnerLookup:
    """One read batch of a sharded array through the decoded-chunk cache of ``engine``
    (a ``ShardIO`` whose cache is active), for the shards ``keys``."""

    def __init__(self, engine: Any, keys: list[str]) -> None:
        self.engine, self.cache, self.sid = engine, engine.cache, engine._sid
        self.since = self.cache.epoch()  # before the tokens and the reads
        toks = chunk_cache.tokens(engine.store, keys, self.cache)
        self.check = toks is not None
        self.tokens: dict[str, Any] = dict(zip(keys, toks, strict=True)) if toks else {}
        self.share = engine.layout.chunks_per_unit
        self.mixed: list[str] = []  # shards served partly from the cache

    def serve(self, batch: list[Group], keys: list[str], out: np.ndarray
              ) -> tuple[list[Group], list[str]]:
        """Scatter the cached inner chunks of ``batch`` into ``out``; the groups and keys
        of the others (to be read)."""
        cache, sid, check, fill = self.cache, self.sid, self.check, self.engine.read_fill
        hits: list[tuple[ChunkProjection, Any]] = []
        rest: list[Group] = []
        rest_keys: list[str] = []
        for key, (shard, items) in zip(keys, batch, strict=True):
            token = self.tokens.get(key)
            missed = []
            for p, local in items:
                chunk = cache.get(sid, key, token, check, local)
                if chunk is None:
                    missed.append((p, local))
                else:
                    hits.append((p, chunk))
            if missed:
                rest.append((shard, missed))
                rest_keys.append(key)
                if len(missed) < len(items):
                    self.mixed.append(key)

        chunk_cache.scatter(hits, out, fill, self.engine.inner.nbytes)
        return rest, rest_keys

    def changed(self) -> list[str]:
        """The shards served partly from the cache whose token changed since the lookup
        (their cached and read inner chunks may be of two versions)."""
        if not self.check or not self.mixed:
            return []
        now = chunk_cache.tokens(self.engine.store, self.mixed, self.cache)
        return [k for k, t in zip(self.mixed, now or [], strict=True)
                if not _same(self.tokens[k], t)]

    def keep(self, key: str, local: int, chunk: Any) -> None:
        """Keep inner chunk ``local`` of shard ``key`` (:data:`chunk_cache.FILL`: not
        stored), unless a write invalidated anything since the lookup began."""
        self.cache.put(self.sid, key, self.tokens.get(key), chunk, self.since, local,
                       self.share)

    def decode(self, work: list[tuple[ChunkProjection, str, int, Any]],
               out: np.ndarray) -> None:
        """Decode each ``(projection, shard key, inner number, stored bytes)`` into a new
        array, keep it and scatter it into ``out`` (or decode it straight into ``out``
        where the shard's version may not be kept)."""
        engine = self.engine
        codec = engine.inner

        check, tokens = self.check, self.tokens

        def one(item: tuple[ChunkProjection, str, int, Any]) -> None:
            p, key, local, blob = item
            if check and not chunk_cache.keepable(tokens[key]):
                # a version the cache may not keep: decoded straight into ``out``
                codec.read_into(out, p, engine._label(key, local), blob)
                return
            chunk = codec.decode(engine._label(key, local), blob)  # a new array, kept
            self.keep(key, local, chunk)
            out[p.out_selection] = chunk[p.chunk_selection]

        current().pool.run_batched(one, work, item_bytes=codec.nbytes, cpu_bound=True)
