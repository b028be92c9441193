"""Arrays written to and read from files row by row, without a copy in between.

A strided block of an array (a chunk inside a larger array) is C-ordered bytes only
row by row: its last axis is contiguous, the others are not. ``writev`` and ``preadv``
take a list of such rows, so a chunk goes between the file and the caller's array in
one system call per ``IOV_MAX`` rows, where ``bytes`` of the whole chunk would cost a
copy (and the memory of one chunk) on the way. Writes of rows shorter than
:data:`COPY_BELOW_ROW_BYTES` are the exception: a view per row holds the GIL longer than
one copy into this thread's scratch buffer (NumPy releases it while copying), and other
threads wait for it.
"""

from __future__ import annotations

import os

import numpy as np

from chunkstore.runtime.scratch import contiguous
from chunkstore.storage.local.paths import read_exact

# 1 MiB chunks of 2 KiB rows, 4 writer threads: writes 5-10% faster staged than by writev
# (one thread alone: the same CPU time); from 4 KiB rows on, writev costs less CPU
COPY_BELOW_ROW_BYTES = 4096
IOV_MAX = min(1024, os.sysconf("SC_IOV_MAX") if "SC_IOV_MAX" in os.sysconf_names else 16)


def rows(array: np.ndarray) -> list[np.ndarray]:
    """The rows (last axis) of ``array`` in C order."""
    if array.ndim <= 1:
        return [array]
    if array.ndim == 2:
        return list(array)
    return [row for part in array for row in rows(part)]


def write_all(fd: int, view: memoryview) -> None:
    """Write all of ``view`` (a short write is continued)."""
    while view:
        view = view[os.write(fd, view):]


def write_rows(fd: int, array: np.ndarray) -> None:
    """Write the C-ordered bytes of ``array`` (its rows contiguous): ``writev`` of up to
    ``IOV_MAX`` rows at a time; a short write (rare for files) finishes with a copy."""
    if array.strides[-1] != array.dtype.itemsize:  # not row-contiguous: one copy
        write_all(fd, memoryview(array.tobytes()))
        return
    if array.shape[-1] * array.dtype.itemsize < COPY_BELOW_ROW_BYTES:
        staged = contiguous(array, array.dtype, "write")
        write_all(fd, memoryview(staged.reshape(-1).view(np.uint8)))
        return
    todo = rows(array)
    row_bytes = todo[0].nbytes
    for start in range(0, len(todo), IOV_MAX):
        group = todo[start:start + IOV_MAX]
        wrote = os.writev(fd, group)
        expected = row_bytes * len(group)
        if wrote < expected:
            write_all(fd, memoryview(b"".join(row.tobytes() for row in group))[wrote:])


def read_rows(fd: int, array: np.ndarray) -> bool:
    """Fill ``array`` (rows contiguous, writeable) with the C-ordered bytes of the file
    ``fd``; False, with ``array`` partly overwritten, when the file is not exactly
    ``array.nbytes`` long. ``preadv`` of up to ``IOV_MAX`` rows at a time, the last
    call with one spare byte that only a longer file fills; a short read (the end of
    the file, or rarely an interrupted call) is looked at again with plain reads."""
    if array.size == 0:
        return not os.pread(fd, 1, 0)
    todo = [array.reshape(-1)] if array.flags.c_contiguous else rows(array)
    spare = bytearray(1)
    row_bytes = todo[0].nbytes
    per_call = IOV_MAX - 1  # room for the spare byte
    offset = 0
    for start in range(0, len(todo), per_call):
        group = todo[start:start + per_call]
        expected = row_bytes * len(group)
        last = start + per_call >= len(todo)
        got = os.preadv(fd, [*group, spare] if last else group, offset)
        if got != expected:
            return got < expected and _read_rest(fd, array)
        offset += got
    return True


def _read_rest(fd: int, array: np.ndarray) -> bool:
    """After a short ``preadv``: the whole file read again, and copied in if its size is
    right."""
    data = read_exact(fd, 0, array.nbytes + 1)
    if len(data) != array.nbytes:
        return False
    array[...] = np.frombuffer(data, array.dtype).reshape(array.shape)
    return True
