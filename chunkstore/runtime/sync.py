"""Synchronizers: per-chunk locks that make unaligned concurrent writes safe.

A write that covers a chunk only partly reads, modifies and writes it back; two such
writers racing on one chunk would lose an update. With a synchronizer the array takes
the chunk's lock around that read-modify-write. Writes of whole chunks take no lock.

A lock's name is the canonical name of the object it guards (``storage.reference``: the
store's resolved root + the absolute key, e.g. ``file:/data/g.zarr/x/c/0``), so handles
opened on a group and on its array, or through any spelling of the root, agree.
``ThreadSynchronizer`` serves threads of one process; ``ProcessSynchronizer`` uses
file locks (the ``filelock`` library) in a directory shared by all writers, so it
works across processes and across Dask workers on one machine or a shared file system.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import defaultdict
from typing import Any

from filelock import FileLock


class ThreadSynchronizer:
    """One ``threading.Lock`` per chunk key (process-local).

    >>> sync = ThreadSynchronizer()
    >>> with sync["x/c/0/0"]:
    ...     pass
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)

    def __getitem__(self, key: str) -> threading.Lock:
        with self._guard:
            return self._locks[key]

    def __reduce__(self):
        # locks cannot travel: an unpickled copy guards the threads of its own process
        return (ThreadSynchronizer, ())

    def __repr__(self) -> str:
        return "ThreadSynchronizer()"


class ProcessSynchronizer:
    """File locks in ``lock_dir``, one per chunk key, shared by every process using it.

    >>> import tempfile
    >>> sync = ProcessSynchronizer(tempfile.mkdtemp())
    >>> with sync["x/c/0/0"]:
    ...     pass
    """

    def __init__(self, lock_dir: str | os.PathLike[str]) -> None:
        self.lock_dir = os.fspath(lock_dir)
        os.makedirs(self.lock_dir, exist_ok=True)

    def __getitem__(self, key: str) -> Any:
        # a digest keeps lock file names short and free of path separators
        name = hashlib.sha1(key.encode()).hexdigest() + ".lock"
        return FileLock(os.path.join(self.lock_dir, name))

    def __reduce__(self):
        return (ProcessSynchronizer, (self.lock_dir,))

    def __repr__(self) -> str:
        return f"ProcessSynchronizer({self.lock_dir!r})"
