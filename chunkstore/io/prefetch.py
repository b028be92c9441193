"""Reading ahead: later batches of a read are fetched while the current one decodes.

Remote stores answer in milliseconds per request; fetching one batch, then decoding it,
then fetching the next leaves the endpoint idle during every decode, and a batch's
slowest request leaves it half idle at the end of each fetch. :func:`ahead` runs the
fetches on dedicated threads (not the chunk IO pool: a pool thread waiting for pool work
could deadlock a bounded pool), ``depth`` batches ahead of the one being worked on, so
at most ``depth + 1`` batches' fetched bytes are held at once. Those threads are the
process's (:class:`ReadAheadThreads`, kept on the Runtime): a read starting threads of
its own paid ~0.3-3 ms per thread started on a loaded machine, every time.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import chain, islice
from typing import TypeVar

from chunkstore.runtime import current
from chunkstore.runtime.part import Part

T = TypeVar("T")
R = TypeVar("R")

#: threads fetching ahead, shared by the reads of the process: a read keeps at most its
#: ``depth`` of them busy; more reads at once than these take turns
READ_AHEAD_THREADS = 64


class ReadAheadThreads(Part):
    """The threads fetching ahead of reads (a Runtime part: ``current().part(...)``),
    started on first use and kept between reads."""

    def __init__(self) -> None:
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def executor(self) -> ThreadPoolExecutor:
        """The executor (made on first use)."""
        if self._executor is None:
            with self._lock:
                if self._executor is None:
                    # not named "chunkstore-*": its calls into the pool must not run inline
                    self._executor = ThreadPoolExecutor(READ_AHEAD_THREADS,
                                                        thread_name_prefix="cs-read-ahead")
        return self._executor

    def close(self) -> None:
        """Stop the threads once their fetches are done."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False)


def ahead(batches: Iterable[T], fetch: Callable[[T], R], depth: int = 1
          ) -> Iterator[tuple[T, R]]:
    """``(batch, fetch(batch))`` for each batch in order, up to ``depth`` later batches'
    fetches running while the caller works on the current one. A single batch is
    fetched inline (no thread)."""
    it = iter(batches)
    first = next(it, None)
    if first is None:
        return
    second = next(it, None)
    if second is None:
        yield first, fetch(first)
        return
    depth = max(1, depth)
    pool = current().part(ReadAheadThreads).executor()
    upcoming = chain((first, second), it)
    pending: deque[tuple[T, Future[R]]] = deque()

    def top_up() -> None:
        for batch in islice(upcoming, depth - len(pending)):
            pending.append((batch, pool.submit(fetch, batch)))

    try:
        top_up()
        while pending:
            batch, future = pending.popleft()
            result = future.result()
            top_up()  # the next fetch starts before the caller works on this batch
            yield batch, result
    finally:
        for _, future in pending:  # the reader stopped early: fetch no more
            future.cancel()
