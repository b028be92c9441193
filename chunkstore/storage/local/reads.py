"""The file reads of LocalStore, as functions of a confined walk (``local_paths.Walk``):
a file opened below its directory, its bytes, a view of it, its byte ranges, its rows
read into an array, its value with its generation.

Bounds (``max_bytes``, ``object_size``: see ``base``) are checked against the ``fstat``
every read already makes of the file it opened, before a byte is read or mapped: a
sparse file of a terabyte costs nothing to refuse, and the check costs no syscall.
Errors name the walk's owner (the store).
"""

from __future__ import annotations

import errno
import mmap
import os
import stat
from collections.abc import Sequence
from typing import Any

import numpy as np

from chunkstore.storage.base import ABSENT, ByteRange, BytesLike
from chunkstore.storage.bounds import too_large, wrong_size
from chunkstore.storage.local.locks import LocalGeneration
from chunkstore.storage.local.maps import signature
from chunkstore.storage.local.paths import FILE_FLAGS, Walk, read_exact, read_range
from chunkstore.storage.local.rows import read_rows

INLINE_READ_BYTES = 64 * 1024  # get_many reads files up to this size without threads
MAP_MIN_BYTES = 64 * 1024  # smaller files are read, not mapped


def open_in(walk: Walk, dir_fd: int, head: str, name: str, key: str) -> int | None:
    """A descriptor of the file ``name`` in the directory ``dir_fd`` (None when missing);
    a symlink is followed only inside the root. The caller closes it."""
    try:
        return os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        if e.errno == errno.ENAMETOOLONG:  # a name no file here can have: missing
            return None
        if e.errno != errno.ELOOP:
            raise
    return walk.open_file(dir_fd, head, name, key)  # a symlink: inside the root only


def open_key(w: Walk, head: str, name: str, key: str) -> int | None:
    """A descriptor of the file at ``key`` (None when it or its directory is missing);
    the caller closes it."""
    dir_fd = w.dir(head, key)
    return None if dir_fd is None else open_in(w, dir_fd, head, name, key)


def stat_in(w: Walk, head: str, name: str, key: str) -> os.stat_result | None:
    """The stat of the regular file at ``key`` (None if missing), confined."""
    dir_fd = w.dir(head, key)
    if dir_fd is None:
        return None
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        if e.errno == errno.ENAMETOOLONG:
            return None
        raise
    if stat.S_ISLNK(st.st_mode):
        fd = w.open_file(dir_fd, head, name, key)
        if fd is None:
            return None
        try:
            st = os.fstat(fd)
        finally:
            os.close(fd)
    return st if stat.S_ISREG(st.st_mode) else None


def file_value(w: Walk, head: str, name: str, key: str,
               max_bytes: int | None) -> bytes | None:
    """The bytes of the regular file at ``key`` (None: missing, a directory or a FIFO);
    larger than ``max_bytes``: refused unread."""
    fd = open_key(w, head, name, key)
    if fd is None:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        if max_bytes is not None and st.st_size > max_bytes:
            raise too_large(w.owner, key, st.st_size, max_bytes)
        return read_exact(fd, 0, st.st_size)
    finally:
        os.close(fd)


def rows_from(w: Walk, head: str, name: str, key: str, array: np.ndarray) -> bool:
    """Fill ``array`` with the file at ``key``: True; False when it is missing (or not a
    regular file); ObjectSizeError when its size is not ``array.nbytes``."""
    fd = open_key(w, head, name, key)
    if fd is None:
        return False
    try:
        try:
            if read_rows(fd, array):
                return True
        except OSError as e:  # a directory or a FIFO at the key: missing
            if e.errno not in (errno.EISDIR, errno.ESPIPE):
                raise
            return False
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # e.g. a device: missing, as for get_views
            return False
        raise wrong_size(w.owner, key, st.st_size, array.nbytes)
    finally:
        os.close(fd)


def file_view(w: Walk, dir_fd: int, head: str, name: str, key: str,
              max_bytes: int | None = None, read_first: bool = True
              ) -> tuple[BytesLike | None, os.stat_result | None]:
    """``(view, stat)`` of the file at ``key``: a memory map of a large file with the
    stat it was mapped at (to be cached), the bytes of a small one (stat None), None
    for a missing file, a directory or a FIFO. ``read_first``: try one read of
    ``MAP_MIN_BYTES`` first (a short read is the whole file)."""
    fd = open_in(w, dir_fd, head, name, key)
    if fd is None:
        return None, None
    try:
        # a small file is read whole at once: a read of a regular file stops short
        # only at its end, so a short, non-empty read is the file (one system call
        # fewer than asking its size first); anything else is looked at below
        if read_first:
            want = MAP_MIN_BYTES if max_bytes is None else min(MAP_MIN_BYTES, max_bytes + 1)
            try:
                data = os.read(fd, want)
            except (IsADirectoryError, BlockingIOError):  # a directory, a FIFO
                return None, None
            if 0 < len(data) < want:
                return data, None
        st = os.fstat(fd)  # what is mapped, which the next stat is compared with
        if not stat.S_ISREG(st.st_mode):
            return None, None
        if max_bytes is not None and st.st_size > max_bytes:
            raise too_large(w.owner, key, st.st_size, max_bytes)
        if st.st_size < MAP_MIN_BYTES:  # a map costs more than a copy
            return read_exact(fd, 0, st.st_size), None
        return mmap.mmap(fd, st.st_size, access=mmap.ACCESS_READ), st
    finally:
        os.close(fd)


def key_ranges(w: Walk, head: str, name: str, key: str,
               requests: Sequence[tuple[str, ByteRange | None]], positions: Sequence[int],
               results: list[bytes | None], max_bytes: int | None,
               object_size: int | None) -> None:
    """Read the ranges ``requests[i]`` (``i`` in ``positions``, all of ``key``) into
    ``results[i]``, opening the file once; ``max_bytes`` bounds whole reads (range
    None), ``object_size`` is the size the file must have."""
    fd = open_key(w, head, name, key)
    if fd is None:
        return
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return
        if object_size is not None and st.st_size != object_size:
            raise wrong_size(w.owner, key, st.st_size, object_size)
        for i in positions:
            if max_bytes is not None and st.st_size > max_bytes and requests[i][1] is None:
                raise too_large(w.owner, key, st.st_size, max_bytes)
            results[i] = read_range(fd, st.st_size, requests[i][1])
    finally:
        os.close(fd)


def versioned_value(w: Walk, head: str, name: str, key: str,
                    max_bytes: int | None) -> tuple[bytes | None, Any]:
    """``(bytes, LocalGeneration)`` of the file at ``key``, ``(None, ABSENT)`` when it is
    missing (or not a regular file); larger than ``max_bytes``: refused unread."""
    fd = open_key(w, head, name, key)
    if fd is None:
        return None, ABSENT
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # a directory or FIFO: missing
            return None, ABSENT
        if max_bytes is not None and st.st_size > max_bytes:
            raise too_large(w.owner, key, st.st_size, max_bytes)
        data = read_exact(fd, 0, st.st_size)
        return data, LocalGeneration(signature(st), data)
    finally:
        os.close(fd)
