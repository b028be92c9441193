"""The decoded-chunk cache users choose: an LRU of decoded chunks within a byte budget,
off by default (``chunkstore.config`` ``cache.chunk_bytes`` = 0).

It is the one place chunkstore keeps array data between calls (the map cache of
``LocalStore`` is off by default). Entries are keyed by the store's location and the
chunk key (the same object reached through another root is the same entry), with
what they were decoded for (dtype and codecs: an array recreated with other metadata at
the same path never gets the old decoding), so every array object on the data shares
them. Deleting or replacing a node forgets its chunks.

Per array, ``cache=`` (``open_array``, ``open``, ``Array.open``, ``create_array``,
``create``; checked by :func:`from_argument`) picks the cache: None, the process-wide
one above; 0 / False, none; a byte budget (``268435456`` or ``"256MiB"``), a private
cache of that size; a :class:`ChunkCache`, that cache, so arrays given the same one share
one budget. Sharded arrays use it too (``inner_cache``): an inner chunk is an entry under
its shard's key and its number in the shard, with the same fingerprint (plus the shard
shape); the entries of a shard form a group, kept for one version of the shard (its
token) and forgotten together when the shard is written or found replaced.

>>> import numpy as np, chunkstore as cs
>>> with cs.config.set({"cache.chunk_bytes": 64 * 2**20}):
...     a = cs.array(np.arange(10), chunks=(5,))
...     _ = a[:]           # decoded, kept
...     int(a[3])          # served from the cache
3

What can make an entry stale, by store:

* a write through chunkstore in this process (any array object on the same store,
  whatever its ``cache=``) invalidates the chunks it touches in every cache, before any
  later read;
* ``LocalStore``: each hit is checked against a ``stat`` of the file (device, inode,
  size, mtime, ctime; an inner chunk's against its shard's, one per shard and read),
  and a chunk is kept only if that stat cannot come back after a change: its file's
  last change (mtime and ctime) was older than the file system's measured timestamp
  window when the stat was taken (``cache_stamps``: the "racy" rule). Every change sets
  ctime to the file system's clock, later than that, so a foreign writer is seen
  however it changes the file: a rename of a new file over the key (even one that got
  the old inode number back with the same size and mtime), an in-place rewrite that
  restores the mtime. A file changed within its window (a few ms on a local disk, 1-3 s
  where timestamps are coarse) is read and decoded, not kept;
* ``MemoryStore``: each hit is checked against the stored value: a ``bytes`` value (what
  chunkstore writes) by identity, at no cost; a mutable value a user's dict may hold
  (bytearray, NumPy array, mmap, memoryview) changes in place under the same identity,
  so a chunk read from one is never kept (an entry kept for earlier bytes is served
  while the value's content still equals them: one comparison per hit). An inner
  chunk's entry counts its share of the shard's bytes it holds (1 / inner chunks per
  shard);
* other stores (S3, fsspec, zip): entries are not revalidated (that would cost a
  request per chunk, as much as reading a small chunk): writers in other processes
  are not seen until the entry is evicted or :func:`clear` is called. Use the cache
  there for read-mostly data.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from chunkstore.io.cache.chunk_sizes import contents_nbytes
from chunkstore.io.cache.lru import LRUCache
from chunkstore.io.cache.place import Place, _same, fingerprint, keepable, store_id
from chunkstore.io.cache.stamps import DEFAULT_WINDOW_NS, StampWindows
from chunkstore.runtime import current
from chunkstore.runtime.part import Part
from chunkstore.runtime.writes import WRITE_LISTENERS
from chunkstore.sizes import whole_number

__all__ = ["DEFAULT_WINDOW_NS", "FILL", "ChunkCache", "Place", "clear", "fingerprint",
           "forget_prefix", "from_argument", "keepable", "off", "resolve", "shared", "store_id",
           "tokens"]

FILL = object()  # a chunk that is not stored (reads as fill_value)
_ENTRY_OVERHEAD = 200  # bytes counted per entry besides its data


def _size_of(entry: tuple[Any, ...]) -> int:
    """The bytes an entry keeps alive: its chunk (with the contents of variable-length
    elements, see :func:`contents_nbytes`), a bytes token (an inner chunk's: its share of
    the shard its group holds once, ``entry[3]`` inner chunks to a shard), and a fixed
    overhead."""
    token, chunk = entry[0], entry[1]
    n = _ENTRY_OVERHEAD
    if isinstance(chunk, np.ndarray):
        n += chunk.nbytes + contents_nbytes(chunk)
    share = entry[3] if len(entry) > 3 else 1
    return n + (-(-len(token) // share) if isinstance(token, bytes) else 0)


def byte_budget(value: Any, name: str = "cache") -> int:
    """A byte budget given as a number of bytes or a size (``"256MiB"``), checked: a
    ValueError naming ``name`` for a negative, non-integral or unreadable value."""
    return whole_number(value, f"{name} must be a number of bytes (>= 0) or a size such "
                        f"as '256MiB', got {value!r}", sizes=True)


class ChunkCache:
    """Decoded chunks by ``(store id, key)``, at most ``nbytes`` in all (least recently
    used dropped first): a number of bytes or a size such as ``"256MiB"``; None follows
    ``config["cache.chunk_bytes"]``. Give one to several arrays (``cache=``) to share
    its budget between them:

    >>> import chunkstore as cs
    >>> shared = ChunkCache("64MiB")
    >>> a = cs.open_array(cs.MemoryStore(), mode="w", shape=(8,), chunks=(4,), cache=shared)

    Race safety: a read notes :meth:`epoch` before fetching; :meth:`put` refuses the
    entry if any key was invalidated since (a write committed meanwhile). A write
    invalidates its keys in every cache of the process (:meth:`invalidate`).

    Local files: :attr:`stamps` holds the timestamp window measured for each store
    root whose tokens it checked (``cache_stamps``); an entry is kept only for a token
    older than its window.

    A pickled cache arrives empty, with the same budget (the process-wide and the "off"
    caches arrive as the receiving process's own)."""

    def __init__(self, nbytes: int | str | None = None) -> None:
        self._setup(nbytes)
        current().part(Caches).add(self)

    def _setup(self, nbytes: int | str | None) -> None:
        self._fixed = None if nbytes is None else byte_budget(nbytes, "nbytes")
        self._lru = LRUCache(max_entries=2**31, max_bytes=self.budget, size_of=_size_of)
        self._epoch = 0
        self._lock = threading.Lock()
        #: a shard's key -> (the token its inner chunks were kept for, their numbers):
        #: numbers evicted since linger until pruned (``_prune``)
        self._groups: dict[Any, tuple[Any, set[int]]] = {}
        self._grouped = 0  # numbers listed in _groups
        #: the timestamp window of each store root, measured once (``cache_stamps``)
        self.stamps = StampWindows()

    def __reduce__(self) -> Any:
        if self is shared():
            return (shared, ())
        if self is off():
            return (off, ())
        return (ChunkCache, (self._fixed,))

    def __repr__(self) -> str:
        return f"<ChunkCache {len(self)} chunks, {self.nbytes} of {self.budget} bytes>"

    @property
    def budget(self) -> int:
        n = self._fixed if self._fixed is not None else current().budgets.chunk_bytes
        return max(0, int(n or 0))

    @property
    def nbytes(self) -> int:
        return self._lru.nbytes

    def __len__(self) -> int:
        return len(self._lru)

    def active(self) -> bool:
        """Whether reads should consult and fill the cache (budget > 0)."""
        budget = self.budget
        if budget != self._lru.max_bytes:  # the budget changed: trim to it
            self._lru.max_bytes = budget
            if budget == 0:
                with self._lock:
                    self._lru.discard()
                    self._ungroup()
            elif self._lru.nbytes > budget:
                self._trim()
        return budget > 0

    def _trim(self) -> None:
        """Drop the least recently used entries down to the budget."""
        lru = self._lru
        with lru._lock:
            while lru._data and lru._nbytes > lru.max_bytes:
                _, (_, dropped) = lru._data.popitem(last=False)
                lru._nbytes -= dropped

    def epoch(self) -> int:
        return self._epoch

    def get(self, sid: Place, key: str, token: Any = None, check: bool = False,
            inner: int | None = None) -> Any:
        """The decoded chunk (or :data:`FILL`) cached for ``key`` of the array at ``sid``
        (of a sharded array: for inner chunk number ``inner`` of the shard ``key``), None
        on a miss. An entry decoded for other metadata (another dtype or codec chain at
        the same key) is a miss; with ``check``, so is one whose token differs from
        ``token``. Such entries are dropped (an inner chunk's with its whole shard's)."""
        lru_key = sid.key(key)
        entry = self._lru.get(lru_key if inner is None else (*lru_key, inner))
        if entry is None:
            return None
        if entry[2] != sid.fingerprint or (check and not _same(entry[0], token)):
            if inner is None:
                self._lru.discard([lru_key])
            else:
                with self._lock:
                    self._drop_group(lru_key)
            return None
        return entry[1]

    def put(self, sid: Place, key: str, token: Any, chunk: Any, since: int,
            inner: int | None = None, share: int = 1) -> None:
        """Keep ``chunk`` (read-only from now on), unless a write invalidated anything
        after ``since`` (then the chunk may predate it). ``inner``: the chunk is inner
        chunk number ``inner`` of the shard ``key``, one of ``share`` (its entry counts
        that share of a bytes token); the entries of one shard form a group, forgotten
        together, holding one version: an entry for another token drops the others."""
        if not keepable(token):  # its content may change under the same object
            return
        if isinstance(chunk, np.ndarray):
            chunk.flags.writeable = False
        lru_key = sid.key(key)
        with self._lock:
            if self._epoch != since:
                return
            if inner is None:
                self._lru.put(lru_key, (token, chunk, sid.fingerprint))
                return
            group = self._groups.get(lru_key)
            if group is not None and not _same(group[0], token):
                self._drop_group(lru_key)
                group = None
            if group is None:
                group = self._groups[lru_key] = (token, set())
            if inner not in group[1]:
                group[1].add(inner)
                self._grouped += 1
            self._lru.put((*lru_key, inner), (token, chunk, sid.fingerprint, max(1, share)))
            if self._grouped > 2 * len(self._lru) + 1024:
                self._prune()

    # -- groups (the inner chunks of a shard; called holding self._lock) ----------------
    def _drop_group(self, lru_key: Any) -> list[Any]:
        """Forget the inner chunks of the shard ``lru_key``; their LRU keys."""
        group = self._groups.pop(lru_key, None)
        if group is None:
            return []
        self._grouped -= len(group[1])
        dropped = [(*lru_key, i) for i in group[1]]
        self._lru.discard(dropped)
        return dropped

    def _ungroup(self) -> None:
        self._groups.clear()
        self._grouped = 0

    def _prune(self) -> None:
        """Groups listing only inner chunks still kept (the LRU drops entries silently)."""
        with self._lru._lock:
            live = [k for k in self._lru._data if len(k) == 3]
        groups: dict[Any, tuple[Any, set[int]]] = {}
        for k in live:
            old = self._groups.get(k[:2])
            if old is not None:
                groups.setdefault(k[:2], (old[0], set()))[1].add(k[2])
        self._groups, self._grouped = groups, sum(len(g[1]) for g in groups.values())

    def invalidate(self, sid: Place, keys: Iterable[str]) -> None:
        """Forget ``keys`` of the array at ``sid`` (called after a write committed them)
        in every cache of the process: another array object on the same data, through
        any store or root, may cache them elsewhere."""
        lru_keys: list[Any] = []

        def listed() -> list[Any]:  # built once, and only when some cache holds entries
            if not lru_keys:
                lru_keys.extend(sid.key(k) for k in keys)
            return lru_keys

        for cache in _caches():
            cache._forget(None, listed)

    def _forget(self, match: Any, keys: Callable[[], list[Any]] | None = None) -> None:
        """Drop the entries ``keys()`` names, or else those ``match`` accepts; every
        read that started before is refused its put (the epoch moves on)."""
        with self._lock:
            self._epoch += 1
            if not len(self._lru):
                self._ungroup()
                return
            if keys is None:
                with self._lru._lock:
                    found = [k for k in self._lru._data if match(k)]
                for lru_key in [g for g in self._groups if match(g)]:
                    self._drop_group(lru_key)
            else:
                found = keys()
                for lru_key in found:  # a shard's key: its inner chunks too
                    if lru_key in self._groups:
                        self._drop_group(lru_key)
            self._lru.discard(found)

    def clear(self) -> None:
        with self._lock:
            self._epoch += 1
            self._lru.discard()
            self._ungroup()


class Caches(Part):
    """The decoded-chunk caches of the process (a part of its Runtime): the process-wide
    one, the "off" one, and every cache alive (a write invalidates its keys in each)."""

    def __init__(self) -> None:
        self._live: weakref.WeakSet[ChunkCache] = weakref.WeakSet()
        self._lock = threading.Lock()
        self.shared = ChunkCache.__new__(ChunkCache)  # (ChunkCache() would add itself here)
        self.shared._setup(None)
        #: ``cache=0``: reads skip it, writes still invalidate the others
        self.off = ChunkCache.__new__(ChunkCache)
        self.off._setup(0)
        self._live.update((self.shared, self.off))

    def add(self, cache: ChunkCache) -> None:
        """Count ``cache`` among the caches a write invalidates."""
        with self._lock:
            self._live.add(cache)

    def caches(self) -> list[ChunkCache]:
        """Every cache alive."""
        with self._lock:
            return list(self._live)

    def close(self) -> None:
        """Empty every cache (the Runtime is closed: later writes no longer reach them)."""
        for cache in self.caches():
            cache.clear()

    def forked(self) -> Caches:
        """A forked child's: the same caches (arrays of the child still use them), a new
        lock."""
        child = Caches.__new__(Caches)
        child._live, child._lock = weakref.WeakSet(self._live), threading.Lock()
        child.shared, child.off = self.shared, self.off
        return child


def shared() -> ChunkCache:
    """The process-wide cache (budget ``config["cache.chunk_bytes"]``)."""
    return current().part(Caches).shared


def off() -> ChunkCache:
    """The cache of arrays opened with ``cache=0``: always empty (budget 0)."""
    return current().part(Caches).off


def clear() -> None:
    """Empty every cache of the process, the process-wide one and those given as
    ``cache=`` (e.g. after another process rewrote remote data)."""
    for cache in _caches():
        cache.clear()


def from_argument(cache: Any, name: str = "cache") -> ChunkCache | None:
    """A user's ``cache=`` as what the engine takes (checked before anything is opened):
    None -> None (the process-wide cache, budget ``config["cache.chunk_bytes"]``);
    0 / False / ``"0"`` -> :func:`off`; a byte budget (``268435456``, ``"256MiB"``) -> a
    new private cache of that size; a :class:`ChunkCache` as is. Anything else, and
    True (which budget?), is a ValueError naming ``name``."""
    if cache is None or isinstance(cache, ChunkCache):
        return cache
    if cache is False:
        return off()
    if cache is True:
        raise ValueError(f"{name}=True: give a byte budget (e.g. '256MiB'), a ChunkCache, 0 "
                         "(off) or None (config['cache.chunk_bytes'])")
    n = byte_budget(cache, name)
    return ChunkCache(n) if n else off()


def forget_prefix(store: Any, prefix: str) -> None:
    """Forget every cached chunk below ``prefix`` of ``store`` in every cache (its node
    was deleted or replaced)."""
    place = store_id(store)
    if place is None:
        return
    start = place.root + prefix.strip("/")
    start = start + "/" if prefix.strip("/") else start

    def below(k: Any) -> bool:
        return k[0] == place.namespace and k[1].startswith(start)

    for cache in _caches():
        cache._forget(below)


def _on_store_write(store: Any, keys: list[str] | None, prefix: str | None) -> None:
    """A write through a store's own methods (``Store._notify_written``): forget what it touched."""
    if prefix is not None:
        forget_prefix(store, prefix)
        return
    place = store_id(store)
    if place is not None and keys:
        shared().invalidate(place, keys)  # every cache of the process, not only this one


WRITE_LISTENERS.add(_on_store_write)


def _caches() -> list[ChunkCache]:
    return current().part(Caches).caches()


def resolve(cache: Any) -> ChunkCache | None:
    """The cache an engine uses: None/True -> the shared one; False/0 -> none; a number of
    bytes -> a private cache of that budget; a :class:`ChunkCache` as is."""
    if cache is None or cache is True:
        return shared()
    if cache is False or cache == 0:
        return None
    if isinstance(cache, ChunkCache):
        return cache
    return ChunkCache(int(cache))


def tokens(store: Any, keys: Sequence[str], cache: ChunkCache | None = None
           ) -> list[Any] | None:
    """What identifies the stored version of each key, where the store tells cheaply
    (``cache_tokens``), else None (entries are trusted; see the module docstring). A
    local file's version changed too recently to be told from the next one is
    :class:`~chunkstore.io.cache.stamps.Unsettled` (what is read with it is not kept),
    by the windows ``cache`` (default: the process-wide one) measured."""
    capabilities = store.capabilities
    if not capabilities.cache_tokens:
        return None
    if not capabilities.timestamped_tokens:
        return store.cache_tokens(keys)
    since = time.time_ns()  # before the stats: a token is judged by its age then
    stamps = (cache if cache is not None else shared()).stamps
    return stamps.settle(store, store.cache_tokens(keys), since)


def scatter(hits: Sequence[tuple[Any, Any]], out: np.ndarray, fill: Any, item_bytes: int
            ) -> None:
    """Copy the cached chunks of ``hits`` ((projection, chunk or FILL) pairs) into their
    places in ``out`` (FILL: ``fill``), on the pool when they are large."""
    def one(item: tuple[Any, Any]) -> None:
        p, chunk = item
        if chunk is FILL:
            out[p.out_selection] = fill
        else:
            out[p.out_selection] = chunk[p.chunk_selection]

    # copies are memory-bound: one thread per core (64 chunks of 1 MiB into a new array:
    # 4.4-4.6 GB/s, where every pool thread gave 3.8, and interleaved order 4.0-4.2)
    current().pool.run_batched(one, hits, item_bytes=item_bytes, cpu_bound=True)
