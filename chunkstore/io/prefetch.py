"""Reading ahead: later batches of a read are fetched while the current one decodes.

Remote stores answer in milliseconds per request; fetching one batch, then decoding it,
then fetching the next leaves the endpoint idle during every decode, and a batch's
slowest request leaves it half idle at the end of each fetch. :func:`ahead` runs the
fetches on dedicated threads (not the chunk IO pool: a pool thread waiting for pool work
could deadlock a bounded pool), ``depth`` batches ahead of the one being worked on, so
at most ``depth + 1`` batches' fetched bytes are held at once.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import chain, islice
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


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
    # not named "chunkstore-*": its calls into the pool must not run inline
    pool = ThreadPoolExecutor(depth, thread_name_prefix="cs-read-ahead")
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
        pool.shutdown(wait=False, cancel_futures=True)
