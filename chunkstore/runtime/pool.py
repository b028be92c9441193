"""The one bounded thread pool chunk IO and codecs run on (``current().pool``).

numcodecs and file reads release the GIL, so a few threads per core keep both the
disk and the codecs busy. The pool belongs to the process's Runtime, which a forked
child makes anew (a pool's threads do not survive ``fork``): Dask process workers and
multiprocessing stay safe.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

# items smaller than this are tried inline: their per-item Python work usually outweighs
# the GIL-free codec/IO time, so threads would only contend for the GIL ...
INLINE_ITEM_BYTES = 32 * 1024
# ... unless the first few take longer than this each (a slow codec): then the pool
INLINE_ITEM_SECONDS = 50e-6
_PROBE_ITEMS = 16
_PROBES = 2  # inline probes of tiny items before a stretch of them is timed on threads
_THREADS_GAIN = 0.8  # threads keep slow tiny items only when this much quicker per item
_CLAIMS_PER_THREAD = 4  # runs each thread takes, on average: fewer balance load worse
_CORES = os.cpu_count() or 1
_END = object()


def threads_for_calls(call_bytes: int) -> int | None:
    """The most pool threads worth giving work made of many codec calls of about
    ``call_bytes`` each (the inner chunks of a shard): one below ``INLINE_ITEM_BYTES``,
    else no cap. Threads would only take turns at the GIL around each call (10,000 blosc
    compressions of 1.6 KB: 38 ms on one thread, 82 ms on two; decompressions 22 and
    47 ms), and one pool thread, not the caller's, runs them: on the main thread
    numcodecs' blosc takes its global lock and context."""
    return 1 if call_bytes < INLINE_ITEM_BYTES else None


def in_pool_thread() -> bool:
    """Whether the calling thread is one of a chunkstore IO pool's."""
    return threading.current_thread().name.startswith("chunkstore")


class ThreadPool:
    """The IO pool: a ``ThreadPoolExecutor`` of ``workers()`` threads, made on first use,
    and the ways work is spread over it. ``workers``: the thread count wanted (read when
    the executor is made)."""

    def __init__(self, workers: Callable[[], int]) -> None:
        self._workers = workers
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def executor(self) -> ThreadPoolExecutor:
        """The executor (made on first use)."""
        executor = self._executor
        if executor is None:
            with self._lock:
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(self._workers(),
                                                        thread_name_prefix="chunkstore")
                executor = self._executor
        return executor

    def close(self) -> None:
        """Stop the threads once their work is done; the next use makes a new executor."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False)

    def threads(self, cpu_bound: bool = False) -> int:
        """How many pool threads ``run_batched`` uses for one call."""
        workers = self._workers()
        return max(2, min(workers, _CORES)) if cpu_bound else workers

    def _threads(self, cpu_bound: bool, max_threads: int | None) -> int:
        workers = self.executor()._max_workers
        threads = max(2, min(workers, _CORES)) if cpu_bound else workers
        return min(threads, max_threads or threads)

    def run_batched(
        self, fn: Callable[[T], R], items: Sequence[T], *, min_parallel: int = 2,
        item_bytes: int | None = None, cpu_bound: bool = False,
        max_threads: int | None = None, weight: int = 1,
    ) -> list[R]:
        """``[fn(x) for x in items]``, spread over the pool.

        Pool threads (all of them; one per core for ``cpu_bound`` work such as decoding,
        where more would only take turns) take the next run of items from a shared
        counter until none are left: no per-item task, and a thread slowed down by other
        work on the machine simply takes fewer runs. Runs inline when there is too little
        work, when each item is known to be tiny (``item_bytes`` below
        ``INLINE_ITEM_BYTES``) and the first few prove quick (or a stretch timed on
        threads is no quicker per item: on a slow machine, Python's per-item work is slow
        too), or when already inside a pool thread (nested submission could deadlock a
        bounded pool). ``max_threads`` caps the threads used (e.g. to bound what items in
        flight hold). ``weight``: how many units of ``item_bytes`` each item stands for
        (e.g. a run of chunks), for that probe.
        """
        if len(items) < min_parallel or in_pool_thread():
            return [fn(x) for x in items]
        if item_bytes is None or item_bytes >= INLINE_ITEM_BYTES:
            return self._on_threads(fn, items, cpu_bound, max_threads)
        weight = max(1, weight)
        probe = max(1, _PROBE_ITEMS // weight)
        head: list = []
        inline = float("inf")  # seconds per unit of the quicker inline probe
        # a slow first probe is tried once more: the first items pay one-time costs
        # (directories made, a thread starting up beside), and one slow probe would
        # send every tiny item to threads that then take turns at the GIL
        for _ in range(_PROBES):
            if len(head) >= len(items):
                return head
            start = time.perf_counter()
            part = [fn(x) for x in items[len(head):len(head) + probe]]
            head += part
            inline = min(inline, (time.perf_counter() - start) / (len(part) * weight))
            if inline < INLINE_ITEM_SECONDS:
                return head + [fn(x) for x in items[len(head):]]
        # slow tiny items (a slow codec or disk, or just a slow machine): a stretch is
        # timed on threads, which keep the rest only if they prove quicker than inline
        stretch = items[len(head):len(head) + 2 * probe * self._threads(cpu_bound,
                                                                          max_threads)]
        if not stretch:
            return head
        start = time.perf_counter()
        head += self._on_threads(fn, stretch, cpu_bound, max_threads)
        threaded = (time.perf_counter() - start) / (len(stretch) * weight)
        rest = items[len(head):]
        if threaded < _THREADS_GAIN * inline:
            return head + self._on_threads(fn, rest, cpu_bound, max_threads)
        return head + [fn(x) for x in rest]

    def _on_threads(self, fn: Callable[[T], R], items: Sequence[T], cpu_bound: bool,
                    max_threads: int | None) -> list[R]:
        """``[fn(x) for x in items]`` on pool threads that claim runs of neighbouring
        items from a shared counter (keys of one directory stay with one thread)."""
        n = len(items)
        if n == 0:
            return []
        executor = self.executor()
        threads = min(n, self._threads(cpu_bound, max_threads))
        step = max(1, n // (threads * _CLAIMS_PER_THREAD))
        results: list = [None] * n
        claims = itertools.count(0, step)
        failed: list[BaseException] = []

        def work() -> None:
            for start in claims:  # next() on a shared count is atomic under the GIL
                if start >= n or failed:
                    return
                try:
                    for i in range(start, min(n, start + step)):
                        results[i] = fn(items[i])
                except BaseException as e:
                    failed.append(e)
                    return

        helpers = [executor.submit(work) for _ in range(threads)]
        for f in helpers:
            f.result()
        if failed:
            raise failed[0]
        return results

    def run_streamed(self, fn: Callable[[T], object], items: Iterable[T], *,
                     cpu_bound: bool = True, max_threads: int | None = None) -> None:
        """``fn(x)`` for every ``x`` of ``items``, each taken by the next free pool thread.

        For a long stream of sizeable items (whole chunks): ``items`` is consumed lazily,
        one item per claim, so no thread waits for the others at the end of a batch, as
        with ``run_batched`` of successive batches, and the stream holds only the items
        in flight. The first failure (of ``fn`` or of the iteration) stops every thread
        and is raised. Runs inline inside a pool thread, or when there is only one item.
        """
        it = iter(items)
        first = next(it, _END)
        if first is _END:
            return
        second = next(it, _END)
        if second is _END or in_pool_thread():
            fn(first)
            if second is not _END:
                fn(second)
                for x in it:
                    fn(x)
            return
        stream = itertools.chain((first, second), it)
        lock = threading.Lock()
        failed: list[BaseException] = []

        def work() -> None:
            while not failed:
                try:
                    with lock:  # a generator runs in one thread at a time
                        x = next(stream, _END)
                    if x is _END:
                        return
                    fn(x)
                except BaseException as e:
                    failed.append(e)
                    return

        executor = self.executor()
        helpers = [executor.submit(work)
                   for _ in range(self._threads(cpu_bound, max_threads))]
        for f in helpers:
            f.result()
        if failed:
            raise failed[0]


INTERLEAVE_WINDOW = 4096  # items taken from the stream at once by ``interleaved``


def batches(items: Iterable[T], per_batch: int) -> Iterator[list[T]]:
    """``items`` in lists of at most ``per_batch``."""
    it = iter(items)
    while batch := list(itertools.islice(it, per_batch)):
        yield batch


def windows(items: Sequence[T], per_batch: int) -> Iterator[Sequence[T]]:
    """``items`` in consecutive windows of at most ``per_batch``, each taking its items
    from ``items`` when indexed: a sequence that makes its items on demand (an indexer's
    projections) then holds none of a batch at once."""
    for start in range(0, len(items), per_batch):
        yield _Window(items, start, min(len(items), start + per_batch))


class _Window(Sequence[T]):
    """``items[start:stop]`` without copying (integer indices only)."""

    __slots__ = ("_items", "_start", "_len")

    def __init__(self, items: Sequence[T], start: int, stop: int) -> None:
        self._items, self._start, self._len = items, start, stop - start

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, i: int) -> T:  # type: ignore[override]
        if not -self._len <= i < self._len:
            raise IndexError(i)
        return self._items[self._start + i % self._len]


def interleaved(items: Iterable[T], parts: int, window: int = INTERLEAVE_WINDOW
                ) -> Iterator[T]:
    """``items`` reordered so that neighbours come from ``parts`` distant stretches:
    each window of items is cut into ``parts`` consecutive stretches, and one item of
    each is taken in turn (for threads that should not work on neighbouring items at
    once). Every item comes once; at most ``window`` are held."""
    it = iter(items)
    while True:
        held = list(itertools.islice(it, window))
        if not held:
            return
        step = -(-len(held) // max(1, parts))
        for i in range(step):
            yield from held[i::step]
