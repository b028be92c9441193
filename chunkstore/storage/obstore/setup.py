"""The obstore client side of ObstoreStore: loading the optional package, one client
per configuration and process (with the fork check), the thread pool of batched calls,
and error classification. (``storage_options`` are translated in ``obstore_options``.)"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

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


class _Pool:
    """One thread pool per process (made again after a fork) running obstore's blocking
    calls, which release the GIL while they wait. Not obstore's async API: a process
    that used it (pyo3-async-runtimes' tokio threads completing Python futures) may
    abort in interpreter shutdown, ~5% of runs (red team round 3)."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._pid: int | None = None
        self._lock = threading.Lock()

    def get(self) -> ThreadPoolExecutor:
        if self._pool is None or self._pid != os.getpid():
            with self._lock:
                if self._pool is None or self._pid != os.getpid():
                    # not named "chunkstore...": those are the IO pool's threads
                    self._pool = ThreadPoolExecutor(MAX_CONCURRENCY,
                                                    thread_name_prefix="obstore-io")
                    self._pid = os.getpid()
        return self._pool


_POOL = _Pool()
#: S3Store clients of this process by configuration: stores on the same bucket and
#: options share one (and its pool of open connections), as s3fs's instance cache does
_CLIENTS: dict[str, Any] = {}
_CLIENTS_LOCK = threading.Lock()


#: the process that first made an obstore client (obstore's tokio runtime lives there)
_USED_IN: list[int | None] = [None]


def check_not_forked(where: str) -> None:
    """obstore's tokio runtime does not survive fork(): its worker threads stay in the
    parent, and a forked child's requests wait forever. Refuse instead of hanging."""
    used = _USED_IN[0]
    if used is not None and used != os.getpid():
        raise StoreError(
            f"{where}: the obstore backend was used in process {used} before this process "
            "was forked from it, and obstore's runtime does not survive fork(); start "
            "workers with the 'spawn' or 'forkserver' method (multiprocessing, Dask), or "
            "use the fsspec backend in forked processes")


def client_for(bucket: str, kwargs: dict[str, Any]) -> Any:
    from obstore.store import S3Store

    key = repr((bucket, sorted((k, repr(v)) for k, v in kwargs.items())))
    with _CLIENTS_LOCK:
        if _USED_IN[0] is None:
            _USED_IN[0] = os.getpid()
        client = _CLIENTS.get(key)
        if client is None:
            client = _CLIENTS[key] = S3Store(bucket, **kwargs)
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
    return list(_POOL.get().map(one, items))


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
