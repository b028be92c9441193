"""The Runtime: every piece of mutable state the process keeps for chunkstore, in one
object (besides ``chunkstore.config``, the settings users set).

:func:`current` gives the process's Runtime, made on first use. It owns

* ``pool``: the thread pool chunk IO and codecs run on (:class:`~.pool.ThreadPool`);
* ``buffers``: the large buffers lent to Dask tasks (:class:`~.buffers.BufferPool`);
* ``budgets``: the typed budgets read from ``chunkstore.config`` (:class:`Budgets`), the
  one place the other layers read them from;
* the state of the layers above, one object per kind: ``current().part(Kind)`` is this
  runtime's instance of ``Kind`` (made by ``Kind()`` on first use). The runtime sits
  below storage, codecs and io and imports none of them: each layer defines the class
  holding its state (the decoded-chunk caches, kept memory maps, obstore clients, zip
  sessions, S3 probe results...) beside the code that uses it, and keeps it here instead
  of in a module global. The runtime's own modules do so too when they need ``current()``
  (``runtime.scratch``: per-thread scratch buffers of codecs and stores), so that this
  module imports none of them but the pool and the buffers.

After ``fork`` the child gets a new Runtime (threads, locks and pools do not survive a
fork; a lock held by another thread at the fork would stay held forever in the child):
its pool and buffers are made afresh, and so is every part, except where a part's
``forked()`` gives the child's part (what must be known across a fork, such as which
process first used obstore, or the caches an array may still name).

:func:`reset` closes the current Runtime and starts the next :func:`current` afresh
(tests; or a program that wants every cache and thread gone, between uses: objects made
before that keep state of their own, such as a ZipStore's open session or an array's
private ChunkCache, are not known to the new Runtime).

Parts: a :class:`~.part.Part` subclass with a constructor taking no argument, defined by
the layer that uses it (``storage/local/maps.MapCache``, ``io/cache/chunk_cache.Caches``...);
it may override ``forked()`` (what a forked child keeps) and ``close()`` (called by
:meth:`Runtime.close`).
"""

from __future__ import annotations

import dataclasses
import os
import threading
from typing import Any, TypeVar

from chunkstore.config import config, environ
from chunkstore.runtime.buffers import BufferPool
from chunkstore.runtime.part import Part
from chunkstore.runtime.pool import ThreadPool
from chunkstore.sizes import whole_number

P = TypeVar("P", bound=Part)
MiB = 2**20
_CORES = os.cpu_count() or 1


@dataclasses.dataclass(frozen=True)
class Budgets:
    """The budgets in force, from ``chunkstore.config`` (and the environment variables it
    lists) as they are now: see its docstring for each."""

    #: threads of the IO pool (``threading.max_workers``, else ``CHUNKSTORE_THREADS``,
    #: else 4 per core, at most 32); read when the pool is made
    max_workers: int
    #: chunk bytes one write holds between encoding and storing
    write_bytes: int
    #: bytes of shard indexes kept per array
    shard_index_bytes: int
    #: bytes of decoded chunks the process-wide cache keeps (0: off)
    chunk_bytes: int
    #: bytes of memory maps LocalStore keeps between reads (0: off)
    map_bytes: int
    #: the largest metadata document, in bytes and in JSON values
    metadata_max_bytes: int
    metadata_max_elements: int
    #: a variable-length chunk may always decode to ``vlen_min_bytes``, or to
    #: ``vlen_ratio`` times its stored size when that is more
    vlen_min_bytes: int
    vlen_ratio: int

    @classmethod
    def from_config(cls) -> Budgets:
        """The budgets of ``chunkstore.config`` now (a bad environment variable is a
        ValueError naming it)."""
        get = config.get
        return cls(
            max_workers=_workers(),
            write_bytes=int(get("threading.write_bytes")),
            shard_index_bytes=int(get("cache.shard_index_bytes")),
            chunk_bytes=max(0, int(get("cache.chunk_bytes") or 0)),
            map_bytes=max(0, int(get("cache.map_bytes") or 0)),
            metadata_max_bytes=int(get("metadata.max_bytes")),
            metadata_max_elements=int(get("metadata.max_elements")),
            vlen_min_bytes=_count("codecs.vlen_min_bytes", "CHUNKSTORE_VLEN_MIN_BYTES", 64 * MiB),
            vlen_ratio=_count("codecs.vlen_ratio", "CHUNKSTORE_VLEN_RATIO", 64),
        )


def _workers() -> int:
    configured = config.get("threading.max_workers")
    if configured:
        return max(1, int(configured))
    env = environ("CHUNKSTORE_THREADS")
    if env:
        return whole_number(int(env) if env.strip().lstrip("-").isdigit() else env,
                            f"environment variable CHUNKSTORE_THREADS={env!r}: expected a "
                            "whole number of threads, at least 1", minimum=1)
    return min(32, 4 * _CORES)


def _count(key: str, variable: str, default: int) -> int:
    """A config key that is None by default: then the environment variable (a whole
    number; one that is not is ignored, as it always was), else ``default``."""
    value = config.get(key)
    if value is not None:
        return int(value)
    env = environ(variable)
    try:
        return max(1, int(env)) if env else default
    except ValueError:
        return default


class Runtime:
    """The process's chunkstore state (see the module docstring). Made by
    :func:`current`; one made directly is independent of the process's (tests)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parts: dict[type, Any] = {}
        self._budgets: tuple[int, Budgets] | None = None
        self.pool = ThreadPool(lambda: self.budgets.max_workers)
        self.buffers = BufferPool()

    @property
    def budgets(self) -> Budgets:
        """The budgets of ``chunkstore.config`` as it is now (re-read after each change)."""
        cached = self._budgets
        version = config.version
        if cached is None or cached[0] != version:
            cached = self._budgets = (version, Budgets.from_config())
        return cached[1]

    def part(self, kind: type[P]) -> P:
        """This runtime's instance of ``kind`` (made by ``kind()`` when first asked for):
        where a layer above keeps its state."""
        found = self._parts.get(kind)
        if found is None:
            with self._lock:
                found = self._parts.get(kind)
                if found is None:
                    found = self._parts[kind] = kind()
        return found

    def forked(self) -> Runtime:
        """The Runtime of a forked child of this process: everything new, but the parts
        whose ``forked()`` says what the child keeps."""
        child = Runtime()
        for kind, part in list(self._parts.items()):
            kept = part.forked()
            if kept is not None:
                child._parts[kind] = kept
        return child

    def close(self) -> None:
        """Stop the pool's threads (after their work), free the buffers and drop every
        part (each closed)."""
        self.pool.close()
        self.buffers.release()
        with self._lock:
            parts, self._parts = list(self._parts.values()), {}
        for part in parts:
            part.close()


_current: Runtime | None = None  # the process's Runtime: the one module-level state
_current_lock = threading.Lock()


def current() -> Runtime:
    """The process's Runtime (made on first use, and again in a forked child)."""
    runtime = _current
    if runtime is None:
        runtime = _make()
    return runtime


def _make() -> Runtime:
    global _current
    with _current_lock:
        if _current is None:
            _current = Runtime()
        return _current


def reset() -> None:
    """Close the process's Runtime; the next :func:`current` makes a new one."""
    global _current
    with _current_lock:
        old, _current = _current, None
    if old is not None:
        old.close()


def set_map_bytes(nbytes: int | str) -> int:
    """Bound the memory maps ``LocalStore`` keeps between reads in this process to
    ``nbytes`` (bytes, or a size such as ``"256MiB"``; the ``map_bytes`` budget,
    ``config["cache.map_bytes"]``: the next reads drop the maps beyond it); returns the
    previous setting in bytes, to restore."""
    previous = config.get("cache.map_bytes")
    config.set({"cache.map_bytes": nbytes})
    return previous


def _after_fork_in_child() -> None:
    global _current, _current_lock
    _current_lock = threading.Lock()  # another thread may have held it at the fork
    if _current is not None:
        _current = _current.forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
