"""The batched reads of LocalStore: whole files, memory-mapped views, byte ranges,
and values with their generation.

A mixin of :class:`~chunkstore.storage.local.store.LocalStore`, which provides the confined
walk (``_walk``, ``_locate``, ``_open``) and the map-cache prefix (``_prefix``).

Bounds (``max_bytes``, ``object_size``: see ``base``) are checked against the ``fstat``
every read already makes of the file it opened, before a byte is read or mapped: a
sparse file of a terabyte costs nothing to refuse, and the check costs no syscall.
"""

from __future__ import annotations

import errno
import mmap
import os
import stat
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from chunkstore.runtime import current
from chunkstore.storage.base import ABSENT, ByteRange, BytesLike, Reader
from chunkstore.storage.bounds import too_large, wrong_size
from chunkstore.storage.local.locks import LocalGeneration
from chunkstore.storage.local.maps import map_cache, signature
from chunkstore.storage.local.paths import DIRS_PER_SLICE, Walk, dir_slices, read_exact, read_range
from chunkstore.storage.local.rows import read_rows
from chunkstore.storage.local.session import SharedWalk

_INLINE_READ_BYTES = 64 * 1024  # get_many reads files up to this size without threads
_MAP_MIN_BYTES = 64 * 1024  # smaller files are read, not mapped


class LocalReads:
    """Read methods of LocalStore (see the module docstring)."""

    def get_many(self, keys: Sequence[str], max_bytes: int | None = None
                 ) -> list[bytes | None]:
        """Files are read inline while they are small (the per-file work is syscalls
        and Python; threads would only contend for the GIL); from the first large one
        on, the rest are read in the pool. A file larger than ``max_bytes`` is refused
        unread (ObjectSizeError)."""
        located = self._locate(keys)
        results: list[bytes | None] = []
        with self._walk() as w:
            def one(i: int) -> bytes | None:
                return self._file_value(w, *located[i], keys[i], max_bytes)

            for part in dir_slices(located):
                for n, i in enumerate(part):
                    data = one(i)
                    results.append(data)
                    if data is not None and len(data) > _INLINE_READ_BYTES and len(part) - n > 8:
                        results += current().pool.run_batched(one, part[n + 1:])
                        break
                w.release()
        return results

    def get_views(self, keys: Sequence[str], max_bytes: int | None = None
                  ) -> list[BytesLike | None]:
        """Memory maps of the files (cached, see the module docstring), the bytes of small
        files; a directory or a missing file gives None; a file larger than ``max_bytes``
        is an ObjectSizeError (before it is mapped)."""
        located = self._locate(keys)
        prefix, cached = self._prefix, map_cache().get
        views: list[BytesLike | None] = []
        read_first = True  # until a file proves large: the chunks of one call are alike
        with self._walk() as w:
            for key, (head, name) in zip(keys, located, strict=True):
                if w.open_dirs > DIRS_PER_SLICE:
                    w.release()
                dir_fd = w.dir(head, key)
                if dir_fd is None:
                    views.append(None)
                    continue
                entry = cached(prefix + key)
                if entry is not None and entry[2] == prefix:
                    try:
                        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                    except (FileNotFoundError, NotADirectoryError):
                        map_cache().discard(prefix + key)
                        views.append(None)
                        continue
                    if signature(st) == entry[0]:
                        if max_bytes is not None and st.st_size > max_bytes:
                            raise too_large(self, key, st.st_size, max_bytes)
                        views.append(entry[1])
                        continue
                view = self._view(w, dir_fd, head, name, key, max_bytes, read_first)
                read_first = read_first and type(view) is not mmap.mmap
                views.append(view)
        return views

    def _view(self, w: Walk, dir_fd: int, head: str, name: str, key: str,
              max_bytes: int | None = None, read_first: bool = True) -> BytesLike | None:
        fd = self._open(w, dir_fd, head, name, key)
        if fd is None:
            return None
        try:
            # a small file is read whole at once: a read of a regular file stops short
            # only at its end, so a short, non-empty read is the file (one system call
            # fewer than asking its size first); anything else is looked at below
            if read_first:
                want = _MAP_MIN_BYTES if max_bytes is None else min(_MAP_MIN_BYTES,
                                                                    max_bytes + 1)
                try:
                    data = os.read(fd, want)
                except (IsADirectoryError, BlockingIOError):  # a directory, a FIFO
                    return None
                if 0 < len(data) < want:
                    return data
            st = os.fstat(fd)  # what is mapped, which the next stat is compared with
            if not stat.S_ISREG(st.st_mode):
                return None
            if max_bytes is not None and st.st_size > max_bytes:
                raise too_large(self, key, st.st_size, max_bytes)
            if st.st_size < _MAP_MIN_BYTES:  # a map costs more than a copy
                return read_exact(fd, 0, st.st_size)
            mapped = mmap.mmap(fd, st.st_size, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        map_cache().put(self._prefix + key, signature(st), mapped, self._prefix)
        return mapped

    def _open_key(self, w: Walk, head: str, name: str, key: str) -> int | None:
        """A descriptor of the file at ``key`` (None when it or its directory is missing);
        the caller closes it."""
        dir_fd = w.dir(head, key)
        return None if dir_fd is None else self._open(w, dir_fd, head, name, key)

    def _file_value(self, w: Walk, head: str, name: str, key: str,
                    max_bytes: int | None) -> bytes | None:
        """The bytes of the regular file at ``key`` (None: missing, a directory or a
        FIFO); larger than ``max_bytes``: refused unread."""
        fd = self._open_key(w, head, name, key)
        if fd is None:
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return None
            if max_bytes is not None and st.st_size > max_bytes:
                raise too_large(self, key, st.st_size, max_bytes)
            return read_exact(fd, 0, st.st_size)
        finally:
            os.close(fd)

    def _rows_from(self, w: Walk, head: str, name: str, key: str, array: np.ndarray) -> bool:
        fd = self._open_key(w, head, name, key)
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
            raise wrong_size(self, key, st.st_size, array.nbytes)
        finally:
            os.close(fd)

    def get_ranges(self, requests: Sequence[tuple[str, ByteRange | None]],
                   object_size: int | None = None) -> list[bytes | None]:
        """Each file is opened once for all of its ranges; files are read in parallel.
        With ``object_size``, a file of another size is an ObjectSizeError."""
        return self._read_ranges(requests, object_size=object_size)

    def _read_ranges(self, requests: Sequence[tuple[str, ByteRange | None]],
                     max_bytes: int | None = None, object_size: int | None = None
                     ) -> list[bytes | None]:
        """``get_ranges``; ``max_bytes`` bounds the files read whole (range None)."""
        by_key: dict[str, list[int]] = {}
        for i, (key, _) in enumerate(requests):
            by_key.setdefault(key, []).append(i)
        keys = list(by_key)
        located = self._locate(keys)
        results: list[bytes | None] = [None] * len(requests)
        with self._walk() as w:
            def read_key(j: int) -> None:
                head, name = located[j]
                fd = self._open_key(w, head, name, keys[j])
                if fd is None:
                    return
                try:
                    st = os.fstat(fd)
                    if not stat.S_ISREG(st.st_mode):
                        return
                    if object_size is not None and st.st_size != object_size:
                        raise wrong_size(self, keys[j], st.st_size, object_size)
                    for i in by_key[keys[j]]:
                        if max_bytes is not None and st.st_size > max_bytes and (
                                requests[i][1] is None):
                            raise too_large(self, keys[j], st.st_size, max_bytes)
                        results[i] = read_range(fd, st.st_size, requests[i][1])
                finally:
                    os.close(fd)

            for part in dir_slices(located):
                current().pool.run_batched(read_key, part, min_parallel=4)
                w.release()
        return results

    def get_versioned_many(self, keys: Sequence[str], max_bytes: int | None = None
                           ) -> list[tuple[bytes | None, Any]]:
        """Values with their generation (signature and bytes, see ``local_locks``); a
        file larger than ``max_bytes`` is refused unread (ObjectSizeError)."""
        located = self._locate(keys)
        with self._walk() as w:
            def one(i: int) -> tuple[bytes | None, Any]:
                head, name = located[i]
                fd = self._open_key(w, head, name, keys[i])
                if fd is None:
                    return None, ABSENT
                try:
                    st = os.fstat(fd)
                    if not stat.S_ISREG(st.st_mode):  # a directory or FIFO: missing
                        return None, ABSENT
                    if max_bytes is not None and st.st_size > max_bytes:
                        raise too_large(self, keys[i], st.st_size, max_bytes)
                    data = read_exact(fd, 0, st.st_size)
                    return data, LocalGeneration(signature(st), data)
                finally:
                    os.close(fd)

            found: list[tuple[bytes | None, Any]] = []
            for part in dir_slices(located):
                found += current().pool.run_batched(one, part, min_parallel=8)
                w.release()
            return found


class LocalReader(Reader):
    """The reads of one operation on a LocalStore (``LocalReads.read_session``): each
    borrows the operation's walk, or uses its own beyond the session's bounds."""

    def __init__(self, store: Any, session: SharedWalk) -> None:
        super().__init__(store)
        self._session = session

    def _run(self, key: str, fn: Callable[..., Any], *args: Any) -> Any:
        ((head, name),) = self.store._locate((key,))
        with self._session.borrow((head,), True) as shared:  # the first read opens it
            if shared is not None:
                return fn(shared, head, name, key, *args)
        with self.store._walk() as w:
            return fn(w, head, name, key, *args)

    def get(self, key: str, max_bytes: int | None = None) -> bytes | None:
        return self._run(key, self.store._file_value, max_bytes)

    def read_into(self, key: str, array: np.ndarray) -> bool:
        return self._run(key, self.store._rows_from, array)
