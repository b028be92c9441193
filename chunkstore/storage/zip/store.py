"""ZipStore: keys as entries of one zip archive.

When writes become visible (the rule):

* in this process, at once, to every ZipStore of the same path: they share one session
  (``zip_session``), so ``cs.open("x.zip", mode="w")`` followed by ``cs.open("x.zip")``
  reads what the first wrote;
* on disk (other processes), when the session is committed: by ``close()`` of any
  ZipStore of the archive (also the ``with`` block), when the last of them is garbage
  collected, or at interpreter exit. The commit is one ``os.replace``: the archive on
  disk is the previous one or the new one, never torn.

Writing a key that already exists appends a new entry that supersedes the old one at
once (reads see the newest value); deleting a key hides it. When the session wrote
duplicates or deleted keys, the commit rewrites the archive with only the live entries,
so a committed archive never holds two entries of the same name.

Entry names are store keys (``validate_key``): no ``..``, no absolute paths, no
backslashes, so an archive written here cannot escape when extracted. Entries of a
foreign archive whose names are not valid keys are never listed or read. Entries are
read with bounded memory (``zip_read``), and a read bounded by ``max_bytes`` (or an
``object_size``) compares the entry's declared size first; a file that is not a zip archive, or a
truncated one, is a BadArchiveError at once.

A zip archive is single-writer by nature: ``capabilities.conditional_writes`` is False, and
two processes must not add to one archive at once.
"""

from __future__ import annotations

import os
import weakref
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from chunkstore.storage.base import (
    ByteRange,
    BytesLike,
    Store,
    normalize_prefix,
    validate_key,
    validate_prefix,
)
from chunkstore.storage.bounds import too_large, wrong_size
from chunkstore.storage.capabilities import Capabilities
from chunkstore.storage.errors import BadArchiveError
from chunkstore.storage.host_identity import process_gone
from chunkstore.storage.local.temp import discard, is_stale, is_temp, writer_of_this_host
from chunkstore.storage.zip.fileobj import FileSession, check_file_object, is_file_object
from chunkstore.storage.zip.read import read_entry
from chunkstore.storage.zip.session import Session, pending_session, release, session_for

_MODES = ("r", "w", "a", "x")
#: largest decompressed size of a compressed entry read by default (stored entries are
#: bounded by the archive's size)
DEFAULT_MAX_ENTRY_BYTES = 256 * 2**20


class ZipStore(Store):
    """A Store in a zip archive.

    ``mode``: ``"r"`` read only; ``"w"`` start empty (the archive is replaced at commit);
    ``"a"`` read and add to an existing archive or create one; ``"x"`` like ``"w"`` but
    the archive must not exist yet. ``compression`` is a ``zipfile`` constant
    (``ZIP_STORED`` keeps byte-range reads cheap; chunks are usually compressed by their
    codecs already). ``max_entry_bytes`` bounds the decompressed size of a compressed
    entry that may be read (a larger one is a BadArchiveError, before any allocation).

    See the module docstring for when writes become visible. The store is thread-safe.
    Pickling sends ``(path, mode)`` (``"w"`` and ``"x"`` travel as ``"a"`` so a worker
    never truncates the archive) and the copy opens the archive lazily, so commit before
    sending a store to other processes.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "data.zip")
    >>> with ZipStore(p, mode="w") as z:
    ...     z.set("a/b", b"xyz")
    >>> ZipStore(p).get("a/b", (1, None))
    b'yz'
    """

    capabilities = Capabilities(
        partial_reads=True, zero_copy_views=False, request_cost_bytes=4096,
        conditional_writes=False, conditional_delete=False, conditional_writes_ignored=False,
        writes_arrays=False, reads_arrays=False,
        snapshot_ranges=True,  # an archive is not changed in place while open
        remote=False, process_local=False, blocking_commits=False, write_batch_bytes=None,
        cache_tokens=False, timestamped_tokens=False)

    def __init__(self, path: str | os.PathLike[str] | Any, mode: str = "r",
                 compression: int = zipfile.ZIP_STORED, read_only: bool | None = None,
                 max_entry_bytes: int = DEFAULT_MAX_ENTRY_BYTES) -> None:
        if mode not in _MODES:
            raise ValueError(f"ZipStore mode must be one of {_MODES}, got {mode!r}")
        super().__init__(mode == "r" if read_only is None else read_only)
        self.mode = mode
        self.compression = compression
        self.max_entry_bytes = max_entry_bytes
        if compression != zipfile.ZIP_STORED:  # a range of a compressed entry: all of it
            self.capabilities = replace(ZipStore.capabilities, partial_reads=False)
        self._fresh = mode in ("w", "x")  # the first use starts the archive empty
        self._attached: Session | None = None
        self._finalizer: weakref.finalize | None = None
        self._file: FileSession | None = None
        if is_file_object(path):  # an open binary file (see ``zip_fileobj``)
            check_file_object(path, mode)
            self.path = None
            self._real = f"<{type(path).__name__} {id(path):#x}>"
            self._file = FileSession(path, compression, f"zip archive in {path!r}")
            return
        self.path = os.path.abspath(os.fspath(path))
        self._real = os.path.realpath(self.path)  # the file a session writes (symlinks kept)
        pending = pending_session(self._real) is not None
        if mode == "r" and not pending and not os.path.isfile(self.path):
            raise FileNotFoundError(f"zip archive {self.path!r} does not exist (mode 'r')")
        if mode == "x" and (pending or os.path.exists(self.path)):
            raise FileExistsError(f"zip archive {self.path!r} already exists (mode 'x')")
        if mode in ("r", "a") and not pending and os.path.isfile(self.path) and (
                not zipfile.is_zipfile(self.path)):
            raise BadArchiveError(f"{self.path}: not a zip archive, or a truncated one (no "
                                  "end-of-archive record)")

    # -- identity ---------------------------------------------------------------------
    def _description(self) -> tuple[Any, ...]:
        if self._file is not None:
            raise TypeError(f"{self!r}: a ZipStore over a file object cannot be pickled or "
                            "sent to other processes (open the archive by path or URL there)")
        mode = "r" if self.mode == "r" else "a"
        return (self.path, mode, self.compression, self._read_only, self.max_entry_bytes)

    def __repr__(self) -> str:
        where = self._file.fileobj if self._file is not None else self.path
        return f"ZipStore({where!r}, mode={self.mode!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ZipStore) and (other.path, other._real) == (self.path,
                                                                             self._real)

    def __hash__(self) -> int:
        return hash(("ZipStore", self.path, self._real))

    def location(self) -> Any:
        return ("zip", self._real)

    def with_read_only(self, read_only: bool = True) -> ZipStore:
        """A view of the same archive (pending writes included) with the given flag."""
        clone = object.__new__(ZipStore)
        clone.__dict__.update(self.__dict__)
        clone._read_only = bool(read_only)
        clone._shared_from = self._owner()  # mode "w": only the owner starts it empty
        return clone

    def _owner(self) -> ZipStore:
        return self.__dict__.get("_shared_from", self)

    # -- session -------------------------------------------------------------------------
    def _session(self, write_key: str | None = None) -> Session:
        """The shared session of the archive, locked (the caller releases ``lock``),
        ready for reading, or for writing ``write_key``."""
        if write_key is not None:
            self._check_writable(write_key)
        owner = self._owner()
        while True:
            s = owner._file or session_for(self._real, self.compression,
                                           writing=write_key is not None)
            s.lock.acquire()
            if not s.closed:
                break
            s.lock.release()
        try:
            if owner._attached is not s:
                owner._attach(s)
            if owner._fresh and not owner._read_only:
                s.begin_write(copy_existing=False)  # "w"/"x": the archive starts empty
                owner._fresh = False
            elif not s.opened:
                s.open_read()
            if write_key is not None and not s.pending:
                s.begin_write(copy_existing=True)
        except BaseException:
            s.lock.release()
            raise
        return s

    def _attach(self, session: Session) -> None:
        if self._finalizer is not None:
            self._finalizer()  # releases the previous (committed) session
        session.users += 1
        self._attached = session
        self._finalizer = weakref.finalize(self, release, session)

    def close(self) -> None:
        """Commit pending writes of the archive (one atomic replace) and close files."""
        owner = self._owner()
        if owner._fresh and not owner._read_only:
            self._session().lock.release()  # mode "w"/"x" always leaves an archive
        s = owner._attached
        if s is None:  # no call made yet: other handles' writes may still be pending
            s = owner._file or pending_session(self._real)
            if s is None:
                return
        with s.lock:
            s.commit()
        owner._fresh = False  # re-opening continues from what was committed

    def sweep_temp(self, older_than: float = 3600.0) -> int:
        """Remove the temporary archives that killed writers left beside this archive
        (``<name>.chunkstore-tmp-<host>-<pid>-<n>``, a full copy each): those of dead
        processes of this host, and those of other hosts (or older versions) older than
        ``older_than`` seconds; never one of a live process of this host (a session
        still writing). Returns how many were removed."""
        if self._file is not None:
            return 0
        self._check_writable("/")
        directory, base = os.path.split(self._real)
        fd = os.open(directory or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        removed = 0
        try:
            for name in os.listdir(fd):
                own = name[len(base):]
                if not (name.startswith(base) and is_temp(own)):
                    continue
                pid = writer_of_this_host(own)
                if pid is not None and not process_gone(pid):
                    continue
                if pid is not None or is_stale(name, fd, older_than):
                    discard(fd, name)
                    removed += 1
        finally:
            os.close(fd)
        return removed

    # -- reads -------------------------------------------------------------------------
    def _read(self, s: Session, key: str, byte_range: ByteRange | None,
              max_bytes: int | None = None, object_size: int | None = None) -> bytes | None:
        validate_key(key)
        info = s.live.get(key)
        if info is None:
            return None
        # the central directory's sizes, before any byte is read (a lie is caught below)
        if object_size is not None and info.file_size != object_size:
            raise wrong_size(self, key, info.file_size, object_size)
        if max_bytes is not None and byte_range is None and info.file_size > max_bytes:
            raise too_large(self, key, info.file_size, max_bytes)
        if byte_range is not None and info.compress_type == zipfile.ZIP_STORED and (
                not info.flag_bits & 0x1):
            size = info.file_size
            start, stop, _ = slice(*byte_range).indices(size)  # as data[start:stop]
            if stop <= start:
                return b""
            offset = s.data_offset(info)
            if offset + size > s.size:
                raise BadArchiveError(f"{s.path}: entry {key!r} runs past the end of the "
                                      "archive (truncated?)")
            return s.pread(stop - start, offset + start)
        data = read_entry(s.pread, s.size, info, s.data_offset(info), self.max_entry_bytes,
                          f"{s.path}: entry {key!r}")
        if byte_range is None:
            return data
        start, stop = byte_range
        return data[start:] if start < 0 and stop is None else data[start:stop]

    def get(self, key: str, byte_range: ByteRange | None = None,
            max_bytes: int | None = None) -> bytes | None:
        if max_bytes is None:
            return self.get_ranges([(key, byte_range)])[0]
        return self._read_all([(key, byte_range)], max_bytes)[0]

    def get_many(self, keys: Sequence[str], max_bytes: int | None = None
                 ) -> list[bytes | None]:
        """The entries' values; one declaring more than ``max_bytes`` is refused unread
        (ObjectSizeError)."""
        if max_bytes is None:
            return self.get_ranges([(k, None) for k in keys])
        return self._read_all([(k, None) for k in keys], max_bytes)

    def get_ranges(self, requests: Sequence[tuple[str, ByteRange | None]],
                   object_size: int | None = None) -> list[bytes | None]:
        """Byte ranges of entries; with ``object_size``, an entry declaring another size
        is an ObjectSizeError."""
        return self._read_all(requests, object_size=object_size)

    def _read_all(self, requests: Sequence[tuple[str, ByteRange | None]],
                  max_bytes: int | None = None, object_size: int | None = None
                  ) -> list[bytes | None]:
        for key, _ in requests:
            validate_key(key)
        s = self._session()
        try:
            return [self._read(s, k, r, max_bytes, object_size) for k, r in requests]
        finally:
            s.lock.release()

    def exists(self, key: str) -> bool:
        return self.getsize(key) is not None

    def getsize(self, key: str) -> int | None:
        validate_key(key)
        s = self._session()
        try:
            info = s.live.get(key)
            return None if info is None else info.file_size
        finally:
            s.lock.release()

    # -- writes ------------------------------------------------------------------------
    def set(self, key: str, value: BytesLike) -> None:
        validate_key(key)
        s = self._session(key)
        try:
            s.write(key, value, self.compression)
        finally:
            s.lock.release()
            self._notify_written([key])

    def delete(self, key: str) -> None:
        self.delete_many([key])

    def delete_many(self, keys: Iterable[str]) -> None:
        keys = [validate_key(k) for k in keys]
        for key in keys:
            self._check_writable(key)
        s = self._session()
        try:
            doomed = [k for k in keys if k in s.live]
        finally:
            s.lock.release()
        if doomed:
            s = self._session(doomed[0])
            try:
                for key in doomed:
                    s.remove(key)
            finally:
                s.lock.release()
                self._notify_written(doomed)

    def delete_prefix(self, prefix: str) -> None:
        base = normalize_prefix(prefix)
        self._check_writable(base or "/")
        self.delete_many(list(self.list_prefix(base)))

    # -- listing (from the central directory) -------------------------------------------
    def _names(self) -> list[str]:
        s = self._session()
        try:
            return list(s.live)
        finally:
            s.lock.release()

    def list_prefix(self, prefix: str) -> Iterator[str]:
        validate_prefix(prefix)
        return iter(sorted(k for k in self._names() if k.startswith(prefix)))

    def list_dir(self, prefix: str) -> Iterator[str]:
        base = normalize_prefix(prefix)
        return iter(sorted({k[len(base):].split("/", 1)[0]
                            for k in self._names() if k.startswith(base)}))
