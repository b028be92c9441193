"""The one read-modify-write primitive: every update of a stored object that depends on
its previous content goes through :func:`commit_units`.

An update is a :class:`WriteUnit`: a key and a ``build`` function from the old value to
the new one. Units that replace their object whole (``needs_old`` False) are written
without reading. The others are read with their generation, rebuilt and committed only
if the object is unchanged (the store's compare-and-swap); a unit that lost the race is
re-read and rebuilt, with a growing back-off, until it commits. Writers of distinct parts
of one object (inner chunks of one shard, halves of one chunk, two attributes of one
document) therefore never lose an update, across threads and processes, without locks.

Stores without compare-and-swap (``capabilities.conditional_writes`` False: zip, plain
fsspec file systems) commit unchecked; writers sharing an object there need a
synchronizer, whose lock is then held around each read-modify-write (and around whole
replacements too, which would otherwise slip between a locked read and its write).
An S3 store whose server was found to ignore conditional requests
(``capabilities.conditional_writes_ignored``) commits unchecked too, where users expect checks: a
batch with a unit that reads its old value is refused there without a synchronizer
(SynchronizerRequiredError), before anything of it is written, unless the caller accepts
unchecked commits (metadata documents, which the probe's warning covers).
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from chunkstore.errors import ChunkDecodeError, ConcurrentWriteError, SynchronizerRequiredError
from chunkstore.io.buffers import commit_threads
from chunkstore.runtime import current
from chunkstore.storage.base import ABSENT, ANY, BytesLike, Store
from chunkstore.storage.bounds import ObjectSizeError, bounded_get_versioned
from chunkstore.storage.reference import ObjectRef, store_ref
from chunkstore.storage.remote import RemoteStore
from chunkstore.storage.wrappers import unwrapped

#: what ``build`` returns to leave the object as it is (nothing to commit)
UNCHANGED = object()
#: what ``commit_units(keep_values=False)`` reports for a unit whose new value was written
WRITTEN = object()
MAX_ATTEMPTS = 200
_BACKOFF_START, _BACKOFF_MAX = 0.0005, 0.05


@dataclass(slots=True)
class WriteUnit:
    """One object to update. ``build(old)`` gets the stored bytes (None when missing, and
    always None when ``needs_old`` is False) and returns the new bytes, None to delete the
    object, or ``UNCHANGED``. ``fallback(new_none)``: bytes to write instead of a delete on
    stores that cannot delete conditionally (e.g. the encoded all-fill chunk); None means
    "delete unconditionally is acceptable". ``max_bytes``: the largest the stored object
    can legitimately be (a chunk's or shard's largest encoding): a larger one is refused
    by the store before it is read (ObjectSizeError naming ``label`` and the key)."""

    key: str
    build: Callable[[bytes | None], Any]
    needs_old: bool = True
    fallback: Callable[[], BytesLike] | None = None
    label: str = ""
    max_bytes: int | None = None


class _Outcomes(list):
    """Results that keep no value: a written one becomes ``WRITTEN``."""

    def __setitem__(self, i: Any, value: Any) -> None:
        super().__setitem__(i, value if value is None or value is UNCHANGED else WRITTEN)

    def __mul__(self, n: Any) -> _Outcomes:
        return _Outcomes(list.__mul__(self, n))


def lock_name(root: ObjectRef, key: str) -> str:
    """The synchronizer lock of ``key`` of the store whose root reference is ``root``:
    the object's canonical name, so handles opened on a group and on its array (or
    through any spelling of the root) take the same lock for the same object, in every
    process for files and object stores."""
    return root.child(key).resolved().name


def _lock(synchronizer: Any, root: ObjectRef, key: str):
    return (contextlib.nullcontext() if synchronizer is None
            else synchronizer[lock_name(root, key)])


def commit_units(store: Store, units: Sequence[WriteUnit], *, synchronizer: Any = None,
                 cpu_bound: bool = True, item_bytes: int | None = None,
                 keep_values: bool = True, built_bytes: int | None = None,
                 unchecked_ok: bool = False, max_threads: int | None = None) -> list[Any]:
    """Apply every unit (see the module docstring); returns what each ``build`` returned
    last (the committed value, None for a delete, or ``UNCHANGED``). With
    ``keep_values=False`` a written value is reported as ``WRITTEN`` instead, and is
    dropped once committed: a large batch then holds only the runs in flight.
    ``units`` may make each unit when indexed (``io.chunk_units``): a run takes its
    units once per attempt and holds them only until committed.
    ``item_bytes``: about how large a unit's value is; ``built_bytes``: what a built
    value holds in new memory until committed (``item_bytes`` unless given; 0 for
    views of the caller's data, which runs need not bound nor keep small);
    ``max_threads``: the most pool threads building units at once (``threads_for_calls``).

    Without a synchronizer: one batched versioned read of the units that need their old
    value, every unit built in parallel, one batched commit, then the units that lost a
    race again. With a synchronizer on a store without compare-and-swap, each unit runs
    under its key's lock; on a store with it, only the read-modify-writes take the lock
    (to avoid retries), whole replacements need none.

    On a store whose server ignores conditions (``store.capabilities.conditional_writes_ignored``),
    units that read their old value need a synchronizer: without one the batch is
    refused (SynchronizerRequiredError) unless ``unchecked_ok``.
    """
    if not units:
        return []
    if synchronizer is None and not unchecked_ok and store.capabilities.conditional_writes_ignored:
        _refuse_unchecked(store, units)
    results: list[Any] = ([None] if keep_values else _Outcomes([None])) * len(units)
    everything = list(range(len(units)))
    if synchronizer is None:
        _in_runs(store, units, everything, results, cpu_bound, item_bytes, built_bytes,
                 max_threads)
        return results
    # whole replacements need no lock where commits are checked (a racing locked
    # read-modify-write notices them and redoes its work); elsewhere every unit is locked
    free = [i for i in everything if not units[i].needs_old] \
        if store.capabilities.conditional_writes else []
    if free:
        _in_runs(store, units, free, results, cpu_bound, item_bytes, built_bytes,
                 max_threads)
    taken = set(free)
    locked = [i for i in everything if i not in taken]

    root = store_ref(store)

    def one(i: int) -> None:
        with _lock(synchronizer, root, units[i].key):
            _read_modify_write(store, units, [i], results, cpu_bound, item_bytes)

    current().pool.run_batched(one, locked, min_parallel=2, max_threads=max_threads)
    return results


def _refuse_unchecked(store: Store, units: Sequence[WriteUnit]) -> None:
    """SynchronizerRequiredError naming the first unit that reads its old value, if any
    (whole replacements are safe without checks: last writer wins)."""
    for i in range(len(units)):  # ``units`` may make each unit when indexed
        unit = units[i]
        if unit.needs_old:
            inner = unwrapped(store)
            endpoint = inner.endpoint if isinstance(inner, RemoteStore) else None
            where = f"{store!r}" + (f" (endpoint {endpoint})" if endpoint else "")
            raise SynchronizerRequiredError(
                f"{unit.label or where}: cannot write part of {unit.key!r}: the S3 server "
                f"of {where} ignores conditional requests (If-Match / If-None-Match), so "
                "writers of one chunk or shard could silently undo each other's updates; "
                "nothing of this write was stored. Open the array with a synchronizer: "
                "synchronizer=chunkstore.ThreadSynchronizer() for threads of one process, "
                "chunkstore.ProcessSynchronizer(lock_dir) for several processes (writes "
                "of whole chunks or shards need none)")


def _in_runs(store: Store, units: Sequence[WriteUnit], pending: list[int],
             results: list[Any], cpu_bound: bool, item_bytes: int | None,
             built_bytes: int | None = None, max_threads: int | None = None) -> None:
    """``_read_modify_write`` of ``pending`` as runs of neighbouring units, each run read,
    built and committed by one pool thread: encoding one run overlaps writing another
    (a store call per run, several in flight), instead of encoding everything first."""
    held = item_bytes if built_bytes is None else built_bytes
    pool, blocking = current().pool, store.capabilities.blocking_commits
    n_threads, size = commit_threads(len(pending), held, pool.threads(False), pool.threads(True),
                                     blocking=blocking, cpu_bound=cpu_bound,
                                     max_threads=max_threads)
    runs = [pending[i:i + size] for i in range(0, len(pending), size)]
    # tiny chunks on a store without latency to hide: the first run is timed and, when
    # its units prove quick, all run on this thread (threads would only take turns at
    # the GIL around each open/write/rename, doubling the time)
    with store.commit_session() as commit:
        pool.run_batched(lambda run: _read_modify_write(store, units, run, results, cpu_bound,
                                                        item_bytes, commit),
                         runs, cpu_bound=cpu_bound and not blocking, max_threads=n_threads,
                         item_bytes=None if store.capabilities.remote else item_bytes,
                         weight=size)


def _read_modify_write(store: Store, units: Sequence[WriteUnit], pending: list[int],
                       results: list[Any], cpu_bound: bool, item_bytes: int | None,
                       commit: Callable[[Sequence[Any]], list[bool]] | None = None) -> None:
    """Read, rebuild and conditionally commit ``pending`` units until all have committed
    (through ``commit``, the store's ``commit_many`` by default)."""
    commit = commit or store.commit_many
    delay = _BACKOFF_START
    for _attempt in range(MAX_ATTEMPTS):
        run = [units[i] for i in pending]  # made once per attempt (``units`` may be lazy)
        reads = [j for j, unit in enumerate(run) if unit.needs_old]
        olds: list[tuple[bytes | None, Any]] = [(None, ANY)] * len(pending)
        if reads:
            got = _read_old(store, [run[j] for j in reads])
            for j, old in zip(reads, got, strict=True):
                olds[j] = old

        work = [(unit, old) for unit, (old, _) in zip(run, olds, strict=True)]
        built = current().pool.run_batched(lambda item: item[0].build(item[1]), work, cpu_bound=cpu_bound,
                            item_bytes=item_bytes)
        del work
        items, positions = [], []
        for j, value in enumerate(built):
            i = pending[j]
            results[i] = value
            if value is UNCHANGED:
                continue
            generation = olds[j][1]
            if value is None and generation is not ABSENT and generation is not ANY and (
                    not store.capabilities.conditional_delete):
                if run[j].fallback is not None:
                    value = run[j].fallback()
                    results[i] = value
            if value is None and generation is ABSENT:
                continue  # deleting what is not there
            items.append((run[j].key, value, generation))
            positions.append(i)
        done = commit(items) if items else []
        pending = [i for i, ok in zip(positions, done, strict=True) if not ok]
        if not pending:
            return
        time.sleep(delay * (0.5 + random.random()))
        delay = min(_BACKOFF_MAX, delay * 2)
    first = units[pending[0]]
    raise ConcurrentWriteError(
        f"{first.label or repr(store)}: key {first.key!r} kept changing under "
        f"{MAX_ATTEMPTS} read-modify-write attempts (other writers); nothing of this "
        "update was committed for it")


def _read_old(store: Store, units: list[WriteUnit]) -> list[tuple[bytes | None, Any]]:
    """The versioned values of ``units``, each bounded by its ``max_bytes`` (the largest
    of the batch is passed to the store, each unit's own checked after)."""
    keys = [u.key for u in units]
    bounds = [u.max_bytes for u in units]
    bound = None if None in bounds else max(bounds, default=None)
    try:
        found = bounded_get_versioned(store, keys, bound)
        if bound is not None:
            for unit, (value, _) in zip(units, found, strict=True):
                if value is not None and len(value) > unit.max_bytes:
                    raise ObjectSizeError(f"key {unit.key!r} of {store!r} holds {len(value)} "
                                          f"bytes, more than the {unit.max_bytes} its "
                                          "largest legitimate encoding takes", unit.key,
                                          len(value))
    except ObjectSizeError as e:
        label = next((u.label for u in units if u.key == e.key), "") or repr(store)
        raise ChunkDecodeError(f"{label}: cannot decode {e.key!r}: {e}") from e
    return found


def update_object(store: Store, key: str, build: Callable[[bytes | None], Any], *,
                  synchronizer: Any = None, label: str = "") -> Any:
    """Read-modify-write one object (a metadata document, a consolidated copy...);
    returns what ``build`` returned for the committed attempt."""
    unit = WriteUnit(key, build, needs_old=True, label=label)
    # documents are read-modify-written from entry points that take no synchronizer
    # (consolidate_metadata...): on a server ignoring conditions, unchecked (it warned)
    return commit_units(store, [unit], synchronizer=synchronizer, cpu_bound=False,
                        unchecked_ok=True)[0]
