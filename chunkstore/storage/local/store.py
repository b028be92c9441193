"""LocalStore: a directory on the local file system (POSIX).

Every write goes to a temporary file in the destination directory and is then renamed
over the key, so a reader or a crash sees the old or the new value, never a torn one
(``local_commit``). Renames and unlinks take a short per-directory lock, which makes
``commit_many`` a real compare-and-swap (``local_locks``): concurrent read-modify-writes
of one file, in threads or processes, never lose an update.

Keys are confined to the root on every operation (``local_paths``): each one walks
from a descriptor of the root, component by component, without following symlinks
except those that stay inside the root; a key leading outside is an InvalidKeyError
naming it, even if a directory was swapped for a symlink after an earlier access.

``get_views`` memory-maps files of 64 KB or more (smaller ones are read) and keeps the
maps in a process-wide cache (``local_maps``), used only while a confined ``stat`` of the
key shows the mapped file. Caveats: a foreign writer that truncates a file in place
while it is being read through a map can make the process fail with SIGBUS, as with
any memory map; on NFS ``stat`` may answer from the client's attribute cache for a few
seconds where ``open`` would revalidate.

Temporary files left by killed writers (``.chunkstore-tmp-*``, never listed) are
removed by :meth:`LocalStore.sweep_temp` and, below the prefix, by ``delete_prefix``.
"""

from __future__ import annotations

import functools
import mmap
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from chunkstore.errors import InvalidKeyError
from chunkstore.runtime import current
from chunkstore.storage.base import (
    ANY,
    ByteRange,
    BytesLike,
    Commit,
    Reader,
    Store,
    normalize_prefix,
    validate_key,
    validate_prefix,
)
from chunkstore.storage.bounds import too_large
from chunkstore.storage.capabilities import Capabilities
from chunkstore.storage.local.clock import FileVersion, Stamps, probe, version
from chunkstore.storage.local.commit import commit
from chunkstore.storage.local.maps import map_cache, signature
from chunkstore.storage.local.paths import (
    DIRS_PER_SLICE,
    FILE_FLAGS,
    Root,
    Walk,
    dir_slices,
    name_max,
    refuse_long_names,
)
from chunkstore.storage.local.reads import (
    INLINE_READ_BYTES,
    file_value,
    file_view,
    key_ranges,
    rows_from,
    stat_in,
    versioned_value,
)
from chunkstore.storage.local.session import SharedWalk
from chunkstore.storage.local.temp import discard, is_stale, is_temp

#: ``delete_prefix`` also removes temporary files below the prefix this old (seconds)
SWEEP_AGE = 3600.0


def _bad_name(name: str) -> bool:
    return not name or name in (".", "..") or "\\" in name or "\x00" in name


def _note_escape(w: Walk, key: str, outside: dict[str, str]) -> None:
    """Add the symlink ``key`` to ``outside`` if it leads outside the root (it is not
    followed there: the confined walk refuses it)."""
    try:
        fd = w.beneath(key.split("/"), key, FILE_FLAGS)
    except InvalidKeyError as e:
        outside[key] = str(e)
        return
    if fd is not None:
        os.close(fd)


class LocalStore(Store):
    """Keys as files below ``root`` (a directory, created on first write)."""

    capabilities = Capabilities(
        partial_reads=True, zero_copy_views=True,
        request_cost_bytes=16 * 1024,  # a pread more costs about as much as copying 16 KB
        conditional_writes=True, conditional_delete=True, conditional_writes_ignored=False,
        writes_arrays=True,  # strided blocks' rows are written straight (local_temp)
        reads_arrays=True,  # files are read straight into arrays' rows (read_session)
        snapshot_ranges=True,  # get_ranges opens each file once for all its ranges
        remote=False, process_local=False,
        blocking_commits=True,  # commits block on file IO: writers use every pool thread
        write_batch_bytes=None, cache_tokens=True, timestamped_tokens=True)

    def __init__(self, root: str | os.PathLike[str], read_only: bool = False) -> None:
        super().__init__(read_only)
        self.root = Path(root).expanduser().absolute()
        self._prefix = os.path.join(self.root, "")
        self._where = Root(str(self.root))

    def _description(self) -> tuple[Any, ...]:
        return (str(self.root), self._read_only)

    def __repr__(self) -> str:
        return f"LocalStore({str(self.root)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LocalStore) and other.root == self.root

    def __hash__(self) -> int:
        return hash(("LocalStore", str(self.root)))

    def location(self) -> Any:
        """``("file", real path of the root)``."""
        return ("file", os.path.realpath(self.root))

    def sibling(self, suffix: str) -> LocalStore:
        return LocalStore(self.root.with_name(self.root.name + suffix))

    def remove_root(self) -> None:
        try:
            os.rmdir(self.root)
        except OSError:
            pass

    def close(self) -> None:
        map_cache().discard_under(self._prefix)

    # -- keys ------------------------------------------------------------------------
    def _walk(self, create: bool = False) -> Walk:
        return self._where.walk(self, create)

    @staticmethod
    def _locate(keys: Sequence[str]) -> list[tuple[str, str]]:
        """``(directory, name)`` of each key, validated (each directory once)."""
        good: set[str] = set()
        located = []
        for key in keys:
            if type(key) is not str:
                validate_key(key)  # raises, naming the type
            head, _, name = key.rpartition("/")
            if not head or head not in good or _bad_name(name):
                validate_key(key)
                good.add(head)
            located.append((head, name))
        return located

    def _stat(self, key: str) -> os.stat_result | None:
        """The stat of the regular file at ``key`` (None if missing), confined."""
        return self._stats([key])[0]

    def _stats(self, keys: Sequence[str]) -> list[os.stat_result | None]:
        located = self._locate(keys)
        found: list[os.stat_result | None] = []
        with self._walk() as w:
            for key, (head, name) in zip(keys, located, strict=True):
                if w.open_dirs > DIRS_PER_SLICE:
                    w.release()
                found.append(stat_in(w, head, name, key))
        return found

    #: a file's version as its ``stat`` shows it (``local_clock.version``)
    _version = staticmethod(version)

    def cache_tokens(self, keys: Sequence[str]) -> list[FileVersion | None]:
        """What identifies the stored version of each key, for the decoded-chunk cache:
        the file's :class:`~chunkstore.storage.local.clock.FileVersion` (device, inode,
        size, mtime, ctime), None when missing; one confined ``stat`` per key. Not
        unique on its own (a replacement can get the freed inode number back within one
        timestamp tick): the cache trusts it only once its change time is older than the
        file system's window (``io.cache_stamps``, :meth:`timestamp_probe`)."""
        version_of = self._version
        return [None if st is None else version_of(st) for st in self._stats(keys)]

    def timestamp_probe(self) -> Stamps | None:
        """How fine the timestamps of the root's file system are and how far its clock
        trails this machine's (``local_clock.probe``: three temporary files written,
        stat'ed and removed in the root), for the decoded-chunk cache; None when that
        cannot be measured: the store is read-only (it never writes, not even a probe),
        its root is missing or refuses the probe."""
        if self.read_only:
            return None
        try:
            with self._walk() as w:
                return None if w.fd is None else probe(w.fd, self._version)
        except OSError:
            return None

    # -- reads -----------------------------------------------------------------------
    def get(self, key: str, byte_range: ByteRange | None = None,
            max_bytes: int | None = None) -> bytes | None:
        """The value (or a byte range of it); a file larger than ``max_bytes`` read whole
        is an ObjectSizeError, refused unread."""
        if max_bytes is None:
            return self.get_ranges([(key, byte_range)])[0]
        return self._read_ranges([(key, byte_range)], max_bytes=max_bytes)[0]

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
                return file_value(w, *located[i], keys[i], max_bytes)

            for part in dir_slices(located):
                for n, i in enumerate(part):
                    data = one(i)
                    results.append(data)
                    if data is not None and len(data) > INLINE_READ_BYTES and len(part) - n > 8:
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
        """``local.reads.file_view``, a memory map kept in the map cache."""
        view, st = file_view(w, dir_fd, head, name, key, max_bytes, read_first)
        if st is not None:
            map_cache().put(self._prefix + key, signature(st), view, self._prefix)
        return view

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
                key_ranges(w, *located[j], keys[j], requests, by_key[keys[j]], results,
                           max_bytes, object_size)

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
                return versioned_value(w, *located[i], keys[i], max_bytes)

            found: list[tuple[bytes | None, Any]] = []
            for part in dir_slices(located):
                found += current().pool.run_batched(one, part, min_parallel=8)
                w.release()
            return found

    def exists(self, key: str) -> bool:
        return self._stat(key) is not None

    def getsize(self, key: str) -> int | None:
        st = self._stat(key)
        return None if st is None else st.st_size

    # -- writes ----------------------------------------------------------------------
    def commit_many(self, items: Sequence[Commit]) -> list[bool]:
        """Compare-and-swap per item under each directory's commit lock (see
        ``local_commit``); ``set``/``set_many``/``delete``/``delete_many`` are this with
        ``ANY``, so no rename slips between another writer's check and its rename."""
        return self._commit_many(items, None)

    @contextmanager
    def commit_session(self) -> Iterator[Callable[[Sequence[Commit]], list[bool]]]:
        """``commit_many`` for the commits of one operation: the root and the key
        directories are opened once for all of them (``local_session``)."""
        if type(self).commit_many is not _COMMIT_MANY:  # a subclass's (or a patched) one
            yield self.commit_many
            return
        session = SharedWalk(lambda: self._walk(create=True))
        try:
            yield lambda items: self._commit_many(items, session)
        finally:
            session.end()

    @contextmanager
    def read_session(self) -> Iterator[Reader]:
        """``Store.read_session``: the root and key directories are opened once for the
        whole operation (``local_session``), and ``read_into`` reads each file with
        ``preadv`` straight into the array's rows. A subclass with its own ``get`` or
        ``get_views`` (or a patched one) gets the default reader, which calls them."""
        if (type(self).get, type(self).get_views) != _OWN_READS:
            yield Reader(self)
            return
        session = SharedWalk(self._walk)
        try:
            yield LocalReader(self, session)
        finally:
            session.end()

    @functools.cached_property
    def _name_max(self) -> int:
        """The longest file name the root's file system takes (a key component longer
        than this cannot be stored: refused naming the key, before any IO)."""
        return name_max(self.root)

    def _commit_many(self, items: Sequence[Commit], session: SharedWalk | None) -> list[bool]:
        items = list(items)
        if not items:
            return []
        if not self.capabilities.cache_tokens:  # a subclass without them: say so
            try:
                return self._commit_files(items, session)
            finally:
                self._notify_written([key for key, _, _ in items])
        return self._commit_files(items, session)

    def _commit_files(self, items: list[Commit], session: SharedWalk | None) -> list[bool]:
        for key, value, _ in items:
            self._check_writable(key)
            if value is not None:
                refuse_long_names(key, self._name_max, repr(self))
        located = self._locate([key for key, _, _ in items])
        create = any(v is not None for _, v, _ in items)
        slices = dir_slices(located)
        if session is not None and len(slices) == 1:
            with session.borrow({head for head, _ in located}, create) as shared:
                if shared is not None:
                    return commit(shared, items, located, self._prefix)
        done: list[bool] = []
        with self._walk(create) as w:
            for part in slices:
                done += commit(w, [items[i] for i in part], [located[i] for i in part],
                               self._prefix)
                w.release()
        return done

    def set(self, key: str, value: BytesLike) -> None:
        self.commit_many([(key, value, ANY)])

    def set_many(self, items: Mapping[str, BytesLike] | Iterable[tuple[str, BytesLike]]) -> None:
        pairs = items.items() if isinstance(items, Mapping) else items
        self.commit_many([(key, value, ANY) for key, value in pairs])

    def delete(self, key: str) -> None:
        self.commit_many([(key, None, ANY)])

    def delete_many(self, keys: Iterable[str]) -> None:
        self.commit_many([(key, None, ANY) for key in keys])

    def delete_prefix(self, prefix: str) -> None:
        """Delete every key below ``prefix``, and the temporary files there that killed
        writers left (see :meth:`sweep_temp`)."""
        base = normalize_prefix(prefix)
        self._check_writable(base or "/")
        keys = self._scan(base, sweep_older_than=SWEEP_AGE)[0]
        self.delete_many(keys)

    def sweep_temp(self, prefix: str = "", older_than: float = 3600.0) -> int:
        """Remove the temporary files below the directory ``prefix`` that were left by
        killed writers: those whose writer is a dead process of this host, and those
        older than ``older_than`` seconds. Returns how many were removed."""
        base = normalize_prefix(prefix)
        self._check_writable(base or "/")
        return self._scan(base, sweep_older_than=older_than, keys=False)[1]

    def _scan(self, prefix: str, sweep_older_than: float | None = None,
              keys: bool = True, outside: dict[str, str] | None = None
              ) -> tuple[list[str], int]:
        """Keys starting with ``prefix`` (sorted) and, with ``sweep_older_than``, how
        many stale temporary files were removed on the way. Symlinks that do not lead to
        a regular file inside the root are not listed (nor followed); with ``outside``,
        those leading outside the root are added to it (key -> the error reading it)."""
        found: list[str] = []
        swept: set[str] = set()
        removed = 0
        with self._walk() as w:
            for rel, name, dir_fd, is_link in w.scan(prefix.rpartition("/")[0]):
                if is_temp(name):
                    if sweep_older_than is not None and is_stale(name, dir_fd, sweep_older_than):
                        discard(dir_fd, name)
                        swept.add(rel.rstrip("/"))
                        removed += 1
                    continue
                key = rel + name
                if not keys or _bad_name(name) or not key.startswith(prefix):
                    continue
                if is_link and not w.is_file(key.split("/"), key):
                    if outside is not None:
                        _note_escape(w, key, outside)
                    continue
                found.append(key)
            for head in sorted(swept, key=lambda h: h.count("/"), reverse=True):
                if w.open_dirs > DIRS_PER_SLICE:
                    w.release()
                w.prune(head)
        return sorted(found), removed

    # -- listing -----------------------------------------------------------------------
    def list_prefix(self, prefix: str) -> Iterator[str]:
        return iter(self._scan(validate_prefix(prefix))[0])

    def links_outside(self, prefix: str) -> dict[str, str]:
        """The entries below ``prefix`` that are symlinks leading outside the root (never
        listed nor followed; reading them is an InvalidKeyError), key -> that error."""
        outside: dict[str, str] = {}
        self._scan(validate_prefix(prefix), outside=outside)
        return dict(sorted(outside.items()))

    def list_dir(self, prefix: str) -> Iterator[str]:
        base = normalize_prefix(prefix)
        with self._walk() as w:
            dir_fd = w.dir(base.rstrip("/"), base or "/")
            names = [] if dir_fd is None else os.listdir(dir_fd)
        return iter(sorted(n for n in names if not is_temp(n) and not _bad_name(n)))


class LocalReader(Reader):
    """The reads of one operation on a LocalStore (``LocalStore.read_session``): each
    borrows the operation's walk, or uses its own beyond the session's bounds."""

    def __init__(self, store: LocalStore, session: SharedWalk) -> None:
        super().__init__(store)
        self._local = store
        self._session = session

    def _run(self, key: str, fn: Callable[..., Any], *args: Any) -> Any:
        ((head, name),) = self._local._locate((key,))
        with self._session.borrow((head,), True) as shared:  # the first read opens it
            if shared is not None:
                return fn(shared, head, name, key, *args)
        with self._local._walk() as w:
            return fn(w, head, name, key, *args)

    def get(self, key: str, max_bytes: int | None = None) -> bytes | None:
        return self._run(key, file_value, max_bytes)

    def read_into(self, key: str, array: np.ndarray) -> bool:
        return self._run(key, rows_from, array)


_COMMIT_MANY = LocalStore.commit_many
_OWN_READS = (LocalStore.get, LocalStore.get_views)
