"""The one bounded thread pool chunk IO and codecs run on.

numcodecs and file reads release the GIL, so a few threads per core keep both the
disk and the codecs busy. The pool is re-created after a fork (a pool's threads do
not survive ``fork``), which keeps Dask process workers and multiprocessing safe.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

_lock = threading.Lock()
# items smaller than this are tried inline: their per-item Python work usually outweighs
# the GIL-free codec/IO time, so threads would only contend for the GIL ...
INLINE_ITEM_BYTES = 32 * 1024
# ... unless the first few take longer than this each (a slow codec): then the pool
INLINE_ITEM_SECONDS = 50e-6
_PROBE_ITEMS = 16
_pool: ThreadPoolExecutor | None = None
_pool_pid: int | None = None


def default_workers() -> int:
    """Thread count: ``CHUNKSTORE_THREADS`` or 4 per core, capped at 32."""
    env = os.environ.get("CHUNKSTORE_THREADS")
    if env:
        return max(1, int(env))
    return min(32, 4 * (os.cpu_count() or 1))


def get_pool() -> ThreadPoolExecutor:
    """The process-wide pool (created lazily, re-created in a forked child)."""
    global _pool, _pool_pid
    pid = os.getpid()
    if _pool is None or _pool_pid != pid:
        with _lock:
            if _pool is None or _pool_pid != pid:
                _pool = ThreadPoolExecutor(default_workers(), thread_name_prefix="chunkstore")
                _pool_pid = pid
    return _pool


def _in_pool_thread() -> bool:
    return threading.current_thread().name.startswith("chunkstore")


def split_batches(items: Sequence[T], n_batches: int) -> list[Sequence[T]]:
    """Split ``items`` into at most ``n_batches`` contiguous, nearly equal batches."""
    n = len(items)
    n_batches = max(1, min(n_batches, n))
    size, extra = divmod(n, n_batches)
    out, start = [], 0
    for i in range(n_batches):
        stop = start + size + (1 if i < extra else 0)
        out.append(items[start:stop])
        start = stop
    return out


def run_batched(
    fn: Callable[[T], R], items: Sequence[T], *, min_parallel: int = 2, tasks_per_thread: int = 2,
    item_bytes: int | None = None,
) -> list[R]:
    """``[fn(x) for x in items]``, spread over the pool in a few batches.

    Batching keeps per-task overhead negligible for thousands of tiny chunks. Runs
    inline when there is too little work, when each item is known to be tiny
    (``item_bytes`` below ``INLINE_ITEM_BYTES``) and the first few prove quick, or when
    already inside a pool thread (nested submission could deadlock a bounded pool).
    """
    if len(items) < min_parallel or _in_pool_thread():
        return [fn(x) for x in items]
    if item_bytes is not None and item_bytes < INLINE_ITEM_BYTES:
        probe = min(len(items), _PROBE_ITEMS)
        start = time.perf_counter()
        head = [fn(x) for x in items[:probe]]
        if time.perf_counter() - start < probe * INLINE_ITEM_SECONDS:
            return head + [fn(x) for x in items[probe:]]
        return head + run_batched(fn, items[probe:], min_parallel=min_parallel,
                                  tasks_per_thread=tasks_per_thread)
    pool = get_pool()
    batches = split_batches(items, pool._max_workers * tasks_per_thread)

    def run(batch: Iterable[T]) -> list[R]:
        return [fn(x) for x in batch]

    results: list[R] = []
    for part in pool.map(run, batches):
        results.extend(part)
    return results
