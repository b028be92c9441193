"""Temporary files of local writes: how they are named, written and swept.

A value is written to ``.chunkstore-tmp-<host>-<pid>-<thread>-<n>`` in the directory of
its key and then renamed over the key. ``<host>`` is a short hash of the host identity
(``host_identity``: host name, boot id and PID namespace), so that a sweeper can tell a
temporary file of a dead writer on this host (its process is gone) from one being written
right now. A temporary file is stale when its writer is a dead process of this host, or
when it is older than a threshold (a writer on another host, or a name from an older
version: those carried 8 hex digits, never equal to a current tag).
"""

from __future__ import annotations

import itertools
import os
import threading
import time

import numpy as np

from chunkstore.runtime import current
from chunkstore.runtime.part import Part
from chunkstore.storage.base import BytesLike
from chunkstore.storage.host_identity import HOST_TAG as HOST_TAG  # named here by callers and tests
from chunkstore.storage.host_identity import process_gone
from chunkstore.storage.local.rows import write_all, write_rows

TEMP_PREFIX = ".chunkstore-tmp-"
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class TempNames(Part):
    """The temporary names of the process (a part of its Runtime: a forked child gets
    new ones, with its own PID): each thread's name prefix and a counter."""

    def __init__(self) -> None:
        self._prefixes = threading.local()
        self._counter = itertools.count()

    def next(self) -> str:
        """A fresh name for this process and thread."""
        prefix = getattr(self._prefixes, "prefix", None)
        if prefix is None:
            prefix = self._prefixes.prefix = (
                f"{TEMP_PREFIX}{HOST_TAG}-{os.getpid()}-{threading.get_ident()}-")
        return prefix + str(next(self._counter))


def temp_name() -> str:
    """A fresh temporary file name for this process and thread."""
    return current().part(TempNames).next()


def is_temp(name: str) -> bool:
    """Whether a directory entry is a temporary file (listings skip them)."""
    return name.startswith(TEMP_PREFIX)


def write_temp(dir_fd: int, value: BytesLike | np.ndarray) -> str:
    """Write ``value`` to a new temporary file in the directory ``dir_fd``; its name. A
    strided array (``Capabilities.writes_arrays``) is written row by row in C order.

    Raises before creating anything when ``value`` is not a buffer; removes the file if
    writing fails."""
    strided = isinstance(value, np.ndarray) and not value.flags.c_contiguous
    view = None if strided else memoryview(value).cast("B")
    name = temp_name()
    fd = os.open(name, _WRITE_FLAGS, 0o644, dir_fd=dir_fd)
    try:
        try:
            if view is None:
                write_rows(fd, value)  # type: ignore[arg-type]
            else:
                write_all(fd, view)
        finally:
            os.close(fd)
    except BaseException:
        discard(dir_fd, name)
        raise
    return name


def discard(dir_fd: int, name: str) -> None:
    """Remove a temporary file (already gone is fine)."""
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass


def writer_of_this_host(name: str) -> int | None:
    """The PID of the process of this host that wrote the temporary file ``name`` (None:
    another host's, or a name from an older version)."""
    parts = name[len(TEMP_PREFIX):].split("-")
    if len(parts) < 2 or parts[0] != HOST_TAG or not parts[1].isdigit():
        return None
    return int(parts[1])


def _writer_is_dead(name: str) -> bool:
    """True when ``name`` was written by a process of this host that no longer runs."""
    pid = writer_of_this_host(name)
    return pid is not None and process_gone(pid)


def is_stale(name: str, dir_fd: int, older_than: float, now: float | None = None) -> bool:
    """Whether the temporary file ``name`` in ``dir_fd`` was left behind: its writer is
    a dead process of this host, or it is older than ``older_than`` seconds."""
    if _writer_is_dead(name):
        return True
    try:
        mtime = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mtime
    except FileNotFoundError:
        return False
    return (time.time() if now is None else now) - mtime > older_than
