"""Compare-and-swap for local files: generations and the per-directory commit lock.

Every rename or unlink into a directory of a LocalStore (``set``, ``set_many``,
``delete``, ``delete_many``, ``commit_many``) happens while holding ``flock`` on a
descriptor of that directory. The lock lives on the directory itself: nothing appears
in the key space, listings see no lock files, and since each operation opens its own
descriptor (its own open file description) it excludes threads of one process as well
as other processes. It is held only for the check and the rename: values are written to
their temporary files before it is taken.

A generation is what ``get_versioned`` saw: the file's signature (device, inode, size,
mtime) and its bytes. At commit, under the lock, the file must still have that
signature and, since inode numbers are reused quickly and mtime has a coarse clock
tick, the same bytes (re-read and compared): a replacement that an equal signature
hides is then either harmless (identical content) or detected.
"""

from __future__ import annotations

import fcntl
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from chunkstore.storage.base import ABSENT, ANY
from chunkstore.storage.local.maps import signature
from chunkstore.storage.local.paths import read_exact


class LocalGeneration:
    """The generation of a file as read: its signature and its bytes."""

    __slots__ = ("data", "signature")

    def __init__(self, sig: tuple[int, ...], data: bytes) -> None:
        self.signature, self.data = sig, data

    def __repr__(self) -> str:
        return f"LocalGeneration(inode={self.signature[1]}, size={self.signature[2]})"


def versioned(fd: int) -> tuple[bytes | None, object]:
    """``(value, generation)`` of an open file (a directory reads as missing)."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        return None, ABSENT
    data = read_exact(fd, 0, st.st_size)
    return data, LocalGeneration(signature(st), data)


@contextmanager
def directory_lock(dir_fd: int) -> Iterator[None]:
    """Hold the commit lock of the directory open as ``dir_fd`` (a descriptor this
    operation opened itself)."""
    fcntl.flock(dir_fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(dir_fd, fcntl.LOCK_UN)


def unchanged(generation: object, open_target: Callable[[], int | None]) -> bool:
    """Whether the key is still at ``generation`` (call under the directory lock).

    ``open_target`` opens the key's current file (None when missing)."""
    if generation is ANY:
        return True
    fd = open_target()
    if fd is None:
        return generation is ABSENT
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # a directory or a FIFO reads as missing
            return generation is ABSENT
        if not isinstance(generation, LocalGeneration) or (
                signature(st) != generation.signature):
            return False
        return read_exact(fd, 0, st.st_size) == generation.data
    finally:
        os.close(fd)
