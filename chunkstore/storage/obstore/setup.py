"""The obstore client side of ObstoreStore: loading the optional package, one client
per configuration and process (with the fork check), the thread pool of batched calls
(kept on the process's Runtime: :class:`ObstoreState`), and error classification. (``storage_options`` are translated in ``obstore_options``.)"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from chunkstore.runtime import current
from chunkstore.runtime.part import Part
from chunkstore.storage.errors import MissingBackendError, StoreError

#: requests in flight at once per batched call
MAX_CONCURRENCY = 64


def obstore_module() -> Any:
    try:
        import obstore
    except ImportError:
        raise MissingBackendError("the 'obstore' backend needs the package 'obstore', which "
                                  "is not installed (pip install obstore, or "
                                  "pip install 'chunkstore[obstore]')") from None
    return obstore


def available() -> bool:
    """Whether obstore can be imported."""
    try:
        import obstore  # noqa: F401
    except ImportError:
        return False
    return True


class ObstoreState(Part):
    """The obstore side of the process's Runtime: the S3Store clients by configuration
    (stores on the same bucket and options share one, and its pool of open connections,
    as s3fs's instance cache does), the thread pool running obstore's blocking calls,
    which release the GIL while they wait (not obstore's async API: a process that used
    it, pyo3-async-runtimes' tokio threads completing Python futures, may abort in
    interpreter shutdown, ~5% of runs, red team round 3), and the process that first made
    a client (obstore's tokio runtime lives there), which a forked child keeps."""

    def __init__(self) -> None:
        self.clients: dict[str, Any] = {}
        self.lock = threading.Lock()
        self.used_in: int | None = None
        self._pool: ThreadPoolExecutor | None = None

    def pool(self) -> ThreadPoolExecutor:
        """The thread pool of batched calls (made on first use)."""
        if self._pool is None:
            with self.lock:
                if self._pool is None:
                    # not named "chunkstore...": those are the IO pool's threads
                    self._pool = ThreadPoolExecutor(MAX_CONCURRENCY,
                                                    thread_name_prefix="obstore-io")
        return self._pool

    def forked(self) -> ObstoreState:
        """A forked child's: no client nor pool, but who used obstore first."""
        child = ObstoreState()
        child.used_in = self.used_in
        return child

    def close(self) -> None:
        """Stop the pool's threads once their calls are done."""
        if self._pool is not None:
            self._pool.shutdown(wait=False)


def check_not_forked(where: str) -> None:
    """obstore's tokio runtime does not survive fork(): its worker threads stay in the
    parent, and a forked child's requests wait forever. Refuse instead of hanging."""
    used = current().part(ObstoreState).used_in
    if used is not None and used != os.getpid():
        raise StoreError(
            f"{where}: the obstore backend was used in process {used} before this process "
            "was forked from it, and obstore's runtime does not survive fork(); start "
            "workers with the 'spawn' or 'forkserver' method (multiprocessing, Dask), or "
            "use the fsspec backend in forked processes")


def client_for(bucket: str, kwargs: dict[str, Any]) -> Any:
    from obstore.store import S3Store

    key = repr((bucket, sorted((k, repr(v)) for k, v in kwargs.items())))
    state = current().part(ObstoreState)
    with state.lock:
        if state.used_in is None:
            state.used_in = os.getpid()
        client = state.clients.get(key)
        if client is None:
            client = state.clients[key] = S3Store(bucket, **kwargs)
        return client


def run_all(fn: Any, items: Sequence[Any]) -> list[Any]:
    """``fn(item)`` for every item, at most MAX_CONCURRENCY at once (one item: in the
    calling thread); results in order, exceptions returned in place."""

    def one(item: Any) -> Any:
        try:
            return fn(item)
        except Exception as e:
            return e

    if len(items) == 1:
        return [one(items[0])]
    return list(current().part(ObstoreState).pool().map(one, items))


def is_missing(error: BaseException) -> bool:
    from obstore.exceptions import NotFoundError
    return isinstance(error, NotFoundError | FileNotFoundError)


def is_conflict(error: BaseException) -> bool:
    """S3 refusing a condition: 412 (PreconditionError), an existing object for
    If-None-Match (AlreadyExistsError), 409 ConditionalRequestConflict, or the object
    gone under If-Match (404)."""
    from obstore.exceptions import AlreadyExistsError, NotFoundError, PreconditionError
    if isinstance(error, AlreadyExistsError | PreconditionError | NotFoundError):
        return True
    text = str(error)
    return "ConditionalRequestConflict" in text or "409 Conflict" in text
