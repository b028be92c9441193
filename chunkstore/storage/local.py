"""LocalStore: a directory on the local file system.

Every write goes to a temporary file in the destination directory and is then
``os.replace``-d over the key, so a reader or a crash sees the old or the new value,
never a torn one. Keys are confined to the root: ``..``, absolute paths and
symlinks that lead outside are refused.
"""

from __future__ import annotations

import errno
import itertools
import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..concurrency import run_batched
from ..errors import InvalidKeyError
from .base import ByteRange, BytesLike, Store, normalize_prefix, validate_key

_TEMP_PREFIX = ".chunkstore-tmp-"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_READ_FLAGS = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_BINARY", 0)
_counter = itertools.count()
_INLINE_READ_BYTES = 64 * 1024  # get_many reads files up to this size without threads


def _read_range(fd: int, size: int, byte_range: ByteRange | None) -> bytes:
    """The bytes of ``byte_range`` of an open file of ``size`` bytes."""
    if byte_range is None:
        start, stop = 0, size
    else:
        start, stop = byte_range
        if start < 0 and stop is None:
            start = max(0, size + start)
        stop = size if stop is None else min(stop, size)
    if stop <= start:
        return b""
    return _read_exact(fd, start, stop - start)


def _read_exact(fd: int, offset: int, length: int) -> bytes:
    """``length`` bytes at ``offset`` (fewer only at end of file)."""
    data = os.pread(fd, length, offset)
    if len(data) == length or not data:
        return data
    parts = [data]
    got = len(data)
    while got < length:
        more = os.pread(fd, length - got, offset + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


class LocalStore(Store):
    """Keys as files below ``root`` (a directory, created on first write)."""

    supports_partial_reads = True

    def __init__(self, root: str | os.PathLike[str], read_only: bool = False) -> None:
        super().__init__(read_only)
        self.root = Path(root).expanduser().absolute()
        self._real_root: str | None = None
        self._safe_dirs: set[str] = set()

    def _description(self) -> tuple[Any, ...]:
        return (str(self.root), self._read_only)

    def __repr__(self) -> str:
        return f"LocalStore({str(self.root)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LocalStore) and other.root == self.root

    def __hash__(self) -> int:
        return hash(("LocalStore", str(self.root)))

    def sibling(self, suffix: str) -> LocalStore:
        return LocalStore(self.root.with_name(self.root.name + suffix))

    def remove_root(self) -> None:
        try:
            os.rmdir(self.root)
        except OSError:
            pass

    # -- paths -----------------------------------------------------------------------
    def _path(self, key: str) -> str:
        """The file path of ``key``, refusing anything that resolves outside the root.

        A directory is resolved (symlinks followed) once and then remembered, so the
        per-key cost is a dict lookup; the final component is opened with O_NOFOLLOW.
        """
        path = os.path.join(self.root, validate_key(key))
        parent = os.path.dirname(path)
        if parent not in self._safe_dirs:
            if self._real_root is None:
                self._real_root = os.path.realpath(self.root)
            real_parent = os.path.realpath(parent)
            if real_parent != self._real_root and not real_parent.startswith(
                    self._real_root + os.sep):
                raise InvalidKeyError(f"store key {key!r} resolves outside the root of {self!r}")
            if os.path.isdir(parent):
                self._safe_dirs.add(parent)
        return path

    def _check_link(self, key: str, path: str) -> None:
        """Called when O_NOFOLLOW met a symlink: allow it only if it stays inside the root."""
        target = os.path.realpath(path)
        if not target.startswith(os.path.realpath(self.root) + os.sep):
            raise InvalidKeyError(f"store key {key!r} is a symlink leading outside {self!r}")

    # -- reads -----------------------------------------------------------------------
    def _open_for_read(self, key: str) -> int | None:
        """A read-only file descriptor for ``key`` (None if missing)."""
        path = self._path(key)
        try:
            return os.open(path, _READ_FLAGS)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as e:
            if e.errno != errno.ELOOP:
                raise
            self._check_link(key, path)
            return os.open(path, os.O_RDONLY)

    def get(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        fd = self._open_for_read(key)
        if fd is None:
            return None
        try:
            return _read_range(fd, os.fstat(fd).st_size, byte_range)
        except IsADirectoryError:
            return None
        finally:
            os.close(fd)

    def exists(self, key: str) -> bool:
        return os.path.isfile(self._path(key))

    def getsize(self, key: str) -> int | None:
        try:
            return os.path.getsize(self._path(key))
        except (FileNotFoundError, NotADirectoryError):
            return None

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """Each key's directory is checked once per batch, then files are opened by path.

        Files are read inline while they are small (the per-file work is syscalls and
        Python; threads would only contend for the GIL); from the first large one on,
        the rest are read in the pool.
        """
        paths = self._paths_checked_per_dir(keys)
        results: list[bytes | None] = []
        for i, path in enumerate(paths):
            data = self._get_path(keys[i], path)
            results.append(data)
            if data is not None and len(data) > _INLINE_READ_BYTES and len(paths) - i > 8:
                results += run_batched(lambda j: self._get_path(keys[j], paths[j]),
                                       range(i + 1, len(paths)))
                break
        return results

    def _paths_checked_per_dir(self, keys: Sequence[str]) -> list[str]:
        """File paths of ``keys``, validated as ``_path`` does, resolving each directory once."""
        prefix = str(self.root)
        if not prefix.endswith(os.sep):
            prefix += os.sep
        checked: set[str] = set()  # key directories checked in this batch
        paths = []
        for key in keys:
            head, sep, name = key.rpartition("/") if isinstance(key, str) else ("", "", "")
            if (not sep or head not in checked or not name or name in (".", "..")
                    or "\\" in name or "\x00" in name):
                path = self._path(key)  # full validation (raises on a bad key)
                if sep and os.path.dirname(path) in self._safe_dirs:  # an existing, safe dir
                    checked.add(head)
                paths.append(path)
            else:
                paths.append(prefix + key)
        return paths

    def _get_path(self, key: str, path: str) -> bytes | None:
        """``get(key)`` for the already-checked ``path`` of ``key``."""
        try:
            fd = os.open(path, _READ_FLAGS)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError:  # e.g. a symlink met by O_NOFOLLOW: the general path decides
            return self.get(key)
        try:
            return _read_exact(fd, 0, os.fstat(fd).st_size)
        except IsADirectoryError:
            return None
        finally:
            os.close(fd)

    def get_ranges(self, requests: Sequence[tuple[str, ByteRange | None]]) -> list[bytes | None]:
        """Each file is opened once for all of its ranges; files are read in parallel."""
        by_key: dict[str, list[int]] = {}
        for i, (key, _) in enumerate(requests):
            by_key.setdefault(key, []).append(i)
        results: list[bytes | None] = [None] * len(requests)

        def read_key(item: tuple[str, list[int]]) -> None:
            key, positions = item
            for i, value in zip(positions, self._read_ranges(key, [requests[i][1] for i in positions]),
                                strict=True):
                results[i] = value

        run_batched(read_key, list(by_key.items()), min_parallel=4)
        return results

    def _read_ranges(self, key: str, ranges: list[ByteRange | None]) -> list[bytes | None]:
        fd = self._open_for_read(key)
        if fd is None:
            return [None] * len(ranges)
        try:
            size = os.fstat(fd).st_size
            return [_read_range(fd, size, r) for r in ranges]
        finally:
            os.close(fd)

    # -- writes ----------------------------------------------------------------------
    def set(self, key: str, value: BytesLike) -> None:
        self._check_writable(key)
        path = self._path(key)
        directory = os.path.dirname(path)
        if directory not in self._safe_dirs:
            os.makedirs(directory, exist_ok=True)
            self._path(key)  # re-check the (new) directory and remember it
        tmp = os.path.join(directory, f"{_TEMP_PREFIX}{os.getpid()}-{threading.get_ident()}-"
                                      f"{next(_counter)}")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW
        try:
            fd = os.open(tmp, flags, 0o644)
        except FileNotFoundError:  # the directory was removed since we remembered it
            self._safe_dirs.discard(directory)
            os.makedirs(directory, exist_ok=True)
            fd = os.open(tmp, flags, 0o644)
        try:
            try:
                view = memoryview(value).cast("B")
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise

    def set_many(self, items: Mapping[str, BytesLike] | Iterable[tuple[str, BytesLike]]) -> None:
        pairs = list(items.items() if isinstance(items, Mapping) else items)
        run_batched(lambda kv: self.set(*kv), pairs, min_parallel=8)

    def delete(self, key: str) -> None:
        self._check_writable(key)
        path = self._path(key)
        try:
            os.unlink(path)
        except (FileNotFoundError, NotADirectoryError):
            return
        except IsADirectoryError:
            return
        self._prune_empty_dirs(os.path.dirname(path))

    def delete_many(self, keys: Iterable[str]) -> None:
        run_batched(self.delete, list(keys), min_parallel=8)

    def delete_prefix(self, prefix: str) -> None:
        base = normalize_prefix(prefix)
        self._check_writable(base or "/")
        self.delete_many(list(self.list_prefix(base)))

    def _prune_empty_dirs(self, directory: str) -> None:
        root = str(self.root)
        while directory != root and directory.startswith(root):
            try:
                os.rmdir(directory)
                self._safe_dirs.discard(directory)
            except OSError as e:
                if e.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT, errno.EBUSY):
                    return
                raise
            directory = os.path.dirname(directory)

    # -- listing -----------------------------------------------------------------------
    def list_prefix(self, prefix: str) -> Iterator[str]:
        root = str(self.root)
        # walk only the deepest directory the prefix names
        head = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        start = os.path.join(root, head) if head else root
        if not os.path.isdir(start):
            return iter(())
        keys = []
        for dirpath, _dirs, files in os.walk(start):
            rel = os.path.relpath(dirpath, root)
            rel = "" if rel == "." else rel.replace(os.sep, "/") + "/"
            for name in files:
                if name.startswith(_TEMP_PREFIX):
                    continue
                key = rel + name
                if key.startswith(prefix):
                    keys.append(key)
        return iter(sorted(keys))

    def list_dir(self, prefix: str) -> Iterator[str]:
        base = normalize_prefix(prefix)
        directory = os.path.join(self.root, base) if base else str(self.root)
        try:
            names = os.listdir(directory)
        except (FileNotFoundError, NotADirectoryError):
            return iter(())
        return iter(sorted(n for n in names if not n.startswith(_TEMP_PREFIX)))
