"""Reading ahead: the next batch of a read is fetched while the current one decodes.

Remote stores answer in milliseconds per request; fetching one batch, then decoding it,
then fetching the next leaves the endpoint idle during every decode. :func:`ahead`
runs the fetches on one dedicated thread (not the chunk IO pool: a pool thread waiting
for pool work could deadlock a bounded pool), one batch ahead, so at most two batches'
fetched bytes are held at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def ahead(batches: Iterable[T], fetch: Callable[[T], R]) -> Iterator[tuple[T, R]]:
    """``(batch, fetch(batch))`` for each batch, the next one's fetch running while the
    caller works on the current one. A single batch is fetched inline (no thread)."""
    it = iter(batches)
    first = next(it, None)
    if first is None:
        return
    second = next(it, None)
    if second is None:
        yield first, fetch(first)
        return
    # not named "chunkstore-*": its calls into the pool must not run inline
    pool = ThreadPoolExecutor(1, thread_name_prefix="cs-read-ahead")
    try:
        current: tuple[T, Future[R]] = (first, pool.submit(fetch, first))
        upcoming: T | None = second
        while True:
            batch, future = current
            nxt = None if upcoming is None else (upcoming, pool.submit(fetch, upcoming))
            yield batch, future.result()
            if nxt is None:
                return
            current = nxt
            upcoming = next(it, None)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
