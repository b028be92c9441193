"""LocalStore: a directory on the local file system.

Every write goes to a temporary file in the destination directory and is then
``os.replace``-d over the key, so a reader or a crash sees the old or the new value,
never a torn one. Keys are confined to the root: ``..``, absolute paths and
symlinks that lead outside are refused.

``get_views`` memory-maps files of 64 KB or more (smaller ones are read) and keeps the
maps of recently read files in a process-wide cache shared by every LocalStore, bounded
in files (each map holds a file descriptor) and bytes. A cached map is used only while
``os.stat`` of its path still shows the mapped file (device, inode, size, mtime): a
writer that replaces the file (rename, as every Zarr implementation does) creates a new
inode, so the next read maps the new file and never sees stale data. Caveats: a foreign
writer that truncates a file in place while it is being read through a map can make
the process fail with SIGBUS, as with any memory map; on NFS ``stat`` may answer from
the client's attribute cache for a few seconds where ``open`` would revalidate. Not
done on Windows, where a mapped file cannot be replaced.
"""

from __future__ import annotations

import errno
import itertools
import mmap
import os
import stat
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
_MAP_MIN_BYTES = 64 * 1024  # smaller files are read, not mapped


def _map_files() -> int:
    """How many maps to keep: each holds a file descriptor, so at most an eighth of the
    process's limit (and 1024)."""
    try:
        import resource
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return 128
    return 1024 if soft == resource.RLIM_INFINITY else max(16, min(1024, soft // 8))


class _MapCache:
    """Memory maps of recently read files by path, the oldest dropped first, at most
    ``files`` maps of ``nbytes`` in all (a map of a deleted file keeps its disk space
    until dropped). Dropping a map never unmaps it under a reader: a map lives as long
    as any view of it."""

    def __init__(self, files: int, nbytes: int) -> None:
        self.files, self.nbytes = files, nbytes
        self.reset()

    def reset(self) -> None:
        self._maps: dict[str, tuple[tuple[int, ...], mmap.mmap, str]] = {}
        self._lock = threading.Lock()
        self._mapped = 0
        # ``get(path)``: ``(signature, map, root)`` if cached (a dict lookup is atomic)
        self.get = self._maps.get

    def put(self, path: str, signature: tuple[int, ...], mapped: mmap.mmap, root: str) -> None:
        with self._lock:
            self._pop(path)  # re-inserted last: a replaced file counts as new
            self._maps[path] = (signature, mapped, root)
            self._mapped += len(mapped)
            while len(self._maps) > self.files or self._mapped > self.nbytes:
                self._pop(next(iter(self._maps)))

    def _pop(self, path: str) -> None:
        entry = self._maps.pop(path, None)
        if entry is not None:
            self._mapped -= len(entry[1])

    def discard(self, path: str) -> None:
        with self._lock:
            self._pop(path)

    def discard_under(self, directory: str) -> None:
        with self._lock:
            for path in [p for p in self._maps if p.startswith(directory)]:
                self._pop(path)


_maps = _MapCache(_map_files(), 2**30)
if hasattr(os, "register_at_fork"):  # a forked child starts afresh (the lock may be held)
    os.register_at_fork(after_in_child=_maps.reset)


_MISS = object()


def _signature(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


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
    zero_copy_views = os.name != "nt"
    request_cost_bytes = 16 * 1024  # a pread more costs about as much as copying 16 KB

    def __init__(self, root: str | os.PathLike[str], read_only: bool = False) -> None:
        super().__init__(read_only)
        self.root = Path(root).expanduser().absolute()
        self._real_root: str | None = None
        self._safe_dirs: set[str] = set()
        self._safe_heads: set[str] = set()  # key directories ("c/0") known to be safe
        self._prefix = os.path.join(self.root, "")

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

    def close(self) -> None:
        _maps.discard_under(self._prefix)

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

    def _forget_dir(self, directory: str) -> None:
        self._safe_dirs.discard(directory)
        self._safe_heads.clear()

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
        """Each key's directory is checked once, then files are opened by path.

        Files are read inline while they are small (the per-file work is syscalls and
        Python; threads would only contend for the GIL); from the first large one on,
        the rest are read in the pool.
        """
        paths = self._checked_paths(keys)
        results: list[bytes | None] = []
        for i, path in enumerate(paths):
            data = self._get_path(keys[i], path)
            results.append(data)
            if data is not None and len(data) > _INLINE_READ_BYTES and len(paths) - i > 8:
                results += run_batched(lambda j: self._get_path(keys[j], paths[j]),
                                       range(i + 1, len(paths)))
                break
        return results

    def _checked_paths(self, keys: Sequence[str]) -> list[str]:
        """File paths of ``keys``, validated as ``_path`` does; a key directory, once
        resolved inside the root, is remembered (as ``_path`` remembers it)."""
        prefix = self._prefix
        heads = self._safe_heads
        paths = []
        for key in keys:
            head, sep, name = key.rpartition("/") if isinstance(key, str) else ("", "", "")
            if (not sep or head not in heads or not name or name in (".", "..")
                    or "\\" in name or "\x00" in name):
                path = self._path(key)  # full validation (raises on a bad key)
                if sep and os.path.dirname(path) in self._safe_dirs:  # an existing, safe dir
                    heads.add(head)
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

    def get_views(self, keys: Sequence[str]) -> list[BytesLike | None]:
        """Memory maps of the files (cached, see the module docstring), the bytes of small
        files; a directory or a missing file gives None."""
        if not self.zero_copy_views:
            return self.get_many(keys)
        prefix, cached = self._prefix, _maps.get
        views = [self._cached_view(prefix + key, entry)
                 if type(key) is str and (entry := cached(prefix + key)) is not None else _MISS
                 for key in keys]
        missing = [i for i, v in enumerate(views) if v is _MISS]
        if missing:
            paths = self._checked_paths([keys[i] for i in missing])
            for i, path in zip(missing, paths, strict=True):
                views[i] = self._view(keys[i], path)
        return views

    def _cached_view(self, path: str, entry: tuple) -> Any:
        """The cached map ``entry`` of ``path`` if still valid, None if the file is gone,
        else _MISS. Only maps made by a store of the same root are used: their key was
        checked."""
        if entry[2] != self._prefix:
            return _MISS
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            _maps.discard(path)
            return None
        return entry[1] if _signature(st) == entry[0] else _MISS

    def _view(self, key: str, path: str) -> BytesLike | None:
        try:
            fd = os.open(path, _READ_FLAGS)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError:  # e.g. a symlink met by O_NOFOLLOW: the general path decides
            fd = self._open_for_read(key)
            if fd is None:
                return None
        try:
            st = os.fstat(fd)  # what is mapped, which the next stat is compared with
            if not stat.S_ISREG(st.st_mode):
                return None
            if st.st_size < _MAP_MIN_BYTES:  # a map costs more than a copy
                return _read_exact(fd, 0, st.st_size)
            mapped = mmap.mmap(fd, st.st_size, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        _maps.put(path, _signature(st), mapped, self._prefix)
        return mapped

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
            self._forget_dir(directory)
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
            _maps.discard(path)  # release the old file's map early (a stat would catch it)
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
        _maps.discard(path)
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
                self._forget_dir(directory)
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
