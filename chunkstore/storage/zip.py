"""ZipStore: keys as entries of one zip archive.

Zip entries cannot be replaced or removed in place, so a ZipStore never edits the
archive it opened. All writes of a session go to a temporary archive next to it
(``<name>.chunkstore-tmp-*``; in mode ``"a"`` the existing archive is copied there
on the first write) and ``close()`` commits the session with one ``os.replace``.
A crash before ``close()`` therefore leaves the previous archive untouched, and a
committed archive is never torn.

Writing a key that already exists appends a new entry that supersedes the old one
at once (reads see the newest value); deleting a key hides it. When the session
wrote duplicates or deleted keys, ``close()`` rewrites the archive with only the
live entries, so a committed archive never holds two entries of the same name.

Entry names are store keys (``validate_key``): no ``..``, no absolute paths, no
backslashes, so an archive written here cannot escape when extracted. Entries of a
foreign archive whose names are not valid keys are never listed or read.
"""

from __future__ import annotations

import itertools
import os
import shutil
import struct
import threading
import time
import weakref
import zipfile
from collections.abc import Iterator, Sequence
from typing import Any

from ..errors import InvalidKeyError
from .base import ByteRange, BytesLike, Store, normalize_prefix, validate_key

_TEMP_TAG = ".chunkstore-tmp-"
_LOCAL_HEADER = struct.Struct("<4s5H3L2H")  # zip local file header, 30 bytes
_counter = itertools.count()
_MODES = ("r", "w", "a", "x")


def _is_valid_name(name: str) -> bool:
    try:
        validate_key(name)
    except InvalidKeyError:
        return False
    return True


class _Session:
    """The open archive of a ZipStore in one process (kept apart from the store so
    that a finalizer can commit it without keeping the store alive)."""

    def __init__(self, path: str, compression: int) -> None:
        self.path, self.compression = path, compression
        self.pid = os.getpid()
        self.zf: zipfile.ZipFile | None = None
        self.fd: int | None = None            # raw descriptor for ranged reads
        self.current: str | None = None       # file the open archive lives in
        self.tmp: str | None = None           # temporary archive while writing
        self.live: dict[str, zipfile.ZipInfo] = {}
        self.offsets: dict[str, int] = {}     # data offsets of stored entries
        self.dead = 0                         # superseded or deleted entries

    def open_read(self, source: str | None) -> None:
        """Open ``source`` (or nothing, for an empty store) for reading."""
        self.live, self.offsets = {}, {}
        if source is not None and os.path.exists(source):
            self._attach(zipfile.ZipFile(source, "r"), source)

    def _attach(self, zf: zipfile.ZipFile, filename: str) -> None:
        self.zf, self.current = zf, filename
        self.fd = os.open(filename, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        infos = zf.infolist()
        for info in infos:  # a later entry of the same name wins
            if not info.is_dir() and _is_valid_name(info.filename):
                self.live[info.filename] = info
        self.dead = len(infos) - len(self.live)

    def begin_write(self, copy_existing: bool) -> None:
        """Start writing to a temporary archive (a copy of the old one in append mode)."""
        directory = os.path.dirname(self.path) or "."
        os.makedirs(directory, exist_ok=True)
        base = os.path.basename(self.path)
        tmp = os.path.join(directory, f"{base}{_TEMP_TAG}{os.getpid()}-{next(_counter)}")
        had_old = copy_existing and os.path.exists(self.path)
        self.close_files()
        if had_old:
            shutil.copyfile(self.path, tmp)
        self.tmp, self.live, self.offsets = tmp, {}, {}
        zf = zipfile.ZipFile(tmp, "a" if had_old else "w", compression=self.compression,
                             allowZip64=True)
        self._attach(zf, tmp)

    def write(self, key: str, value: BytesLike) -> None:
        assert self.zf is not None
        info = zipfile.ZipInfo(key, date_time=time.localtime()[:6])
        info.compress_type = self.compression
        info.external_attr = 0o644 << 16
        if key in self.live:
            self.dead += 1
            # the new entry supersedes the old one; skip zipfile's duplicate warning
            self.zf.NameToInfo.pop(key, None)
        self.zf.writestr(info, bytes(value))
        self.zf.fp.flush()  # ranged reads use a separate descriptor
        self.live[key] = self.zf.getinfo(key)
        self.offsets.pop(key, None)

    def remove(self, key: str) -> None:
        if self.live.pop(key, None) is not None:
            self.dead += 1
            self.offsets.pop(key, None)

    def data_offset(self, info: zipfile.ZipInfo) -> int:
        """Where the bytes of a stored entry start (after its local header)."""
        offset = self.offsets.get(info.filename)
        if offset is None:
            assert self.fd is not None
            header = os.pread(self.fd, _LOCAL_HEADER.size, info.header_offset)
            fields = _LOCAL_HEADER.unpack(header)
            if fields[0] != b"PK\x03\x04":
                raise zipfile.BadZipFile(f"bad local header for entry {info.filename!r} "
                                         f"in {self.path!r}")
            offset = info.header_offset + _LOCAL_HEADER.size + fields[9] + fields[10]
            self.offsets[info.filename] = offset
        return offset

    def close_files(self) -> None:
        if self.zf is not None:
            self.zf.close()
            self.zf = None
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def commit(self) -> None:
        """Write the central directory (compacting if needed) and replace the archive."""
        if os.getpid() != self.pid:  # a forked child never commits its parent's session
            return
        if self.tmp is None:
            self.close_files()
            return
        tmp, self.tmp = self.tmp, None
        try:
            if self.dead:
                self._compact(tmp)
            else:
                self.close_files()
            os.replace(tmp, self.path)
        except BaseException:
            self.close_files()
            for name in (tmp, tmp + ".compact"):
                if os.path.exists(name):
                    os.unlink(name)
            raise
        finally:
            self.live, self.offsets, self.dead = {}, {}, 0

    def _compact(self, tmp: str) -> None:
        """Rewrite ``tmp`` in place with only the live entries, streaming each one."""
        assert self.zf is not None
        out_name = tmp + ".compact"
        with zipfile.ZipFile(out_name, "w", allowZip64=True) as out:
            for info in sorted(self.live.values(), key=lambda i: i.header_offset):
                new = zipfile.ZipInfo(info.filename, date_time=info.date_time)
                new.compress_type, new.external_attr = info.compress_type, info.external_attr
                with self.zf.open(info) as src, out.open(
                        new, "w", force_zip64=info.file_size > zipfile.ZIP64_LIMIT) as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
        self.close_files()
        os.replace(out_name, tmp)


class ZipStore(Store):
    """A Store in a zip archive.

    ``mode``: ``"r"`` read only; ``"w"`` start empty (the archive is replaced on
    ``close()``); ``"a"`` read and add to an existing archive or create one; ``"x"``
    like ``"w"`` but the archive must not exist yet. ``compression`` is a
    ``zipfile`` constant (``ZIP_STORED`` keeps byte-range reads cheap; chunks are
    usually compressed by their codecs already).

    Writes become visible in the file on ``close()`` (also called by the context
    manager, and as a last resort when the store is garbage collected or the
    interpreter exits). Re-writing a key supersedes the old entry (see the module
    docstring). The store is thread-safe; it is *single-writer*: two processes must
    not add to the same archive at once. Pickling sends ``(path, mode)`` (``"w"`` and
    ``"x"`` travel as ``"a"`` so a worker never truncates the archive) and the copy
    opens the archive lazily, so commit before sending a store to other processes.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "data.zip")
    >>> with ZipStore(p, mode="w") as z:
    ...     z.set("a/b", b"xyz")
    >>> ZipStore(p).get("a/b", (1, None))
    b'yz'
    """

    def __init__(self, path: str | os.PathLike[str], mode: str = "r",
                 compression: int = zipfile.ZIP_STORED, read_only: bool | None = None) -> None:
        if mode not in _MODES:
            raise ValueError(f"ZipStore mode must be one of {_MODES}, got {mode!r}")
        super().__init__(mode == "r" if read_only is None else read_only)
        self.path = os.path.abspath(os.fspath(path))
        self.mode = mode
        self.compression = compression
        self.supports_partial_reads = compression == zipfile.ZIP_STORED
        if mode == "r" and not os.path.isfile(self.path):
            raise FileNotFoundError(f"zip archive {self.path!r} does not exist (mode 'r')")
        if mode == "x" and os.path.exists(self.path):
            raise FileExistsError(f"zip archive {self.path!r} already exists (mode 'x')")
        self._lock = threading.RLock()
        self._session: _Session | None = None
        self._fresh = mode in ("w", "x")  # the next session starts empty
        self._finalizer: weakref.finalize | None = None

    # -- identity ---------------------------------------------------------------------
    def _description(self) -> tuple[Any, ...]:
        mode = "r" if self.mode == "r" else "a"
        return (self.path, mode, self.compression, self._read_only)

    def __repr__(self) -> str:
        return f"ZipStore({self.path!r}, mode={self.mode!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ZipStore) and other.path == self.path

    def __hash__(self) -> int:
        return hash(("ZipStore", self.path))

    def with_read_only(self, read_only: bool = True) -> ZipStore:
        """A view of the same open archive (pending writes included) with the given flag."""
        clone = object.__new__(ZipStore)
        clone.__dict__.update(self.__dict__)
        clone._read_only = bool(read_only)
        clone._shared_from = self  # the view uses this store's session
        return clone

    def _owner(self) -> ZipStore:
        return self.__dict__.get("_shared_from", self)

    # -- session -------------------------------------------------------------------------
    def _get_session(self) -> _Session:
        owner = self._owner()
        if owner is not self:
            return owner._get_session()
        s = self._session
        if s is not None and s.pid != os.getpid():  # forked: start over, lazily
            self._session = s = None
        if s is None:
            s = _Session(self.path, self.compression)
            s.open_read(None if self._fresh else self.path)
            self._session = s
            self._finalizer = weakref.finalize(self, s.commit)
        return s

    def _writable_session(self, key: str) -> _Session:
        self._check_writable(key)
        s = self._get_session()
        if s.tmp is None:
            s.begin_write(copy_existing=not self._owner()._fresh)
        return s

    def close(self) -> None:
        """Commit pending writes (one atomic replace of the archive) and close files."""
        owner = self._owner()
        with owner._lock:
            if owner._fresh and not owner._read_only:
                owner._writable_session("")  # mode "w"/"x" always leaves an archive
            s = owner._session
            if s is not None:
                owner._session = None
                if owner._finalizer is not None:
                    owner._finalizer.detach()
                s.commit()
                owner._fresh = False  # re-opening continues from what was committed

    # -- reads -------------------------------------------------------------------------
    def get(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        return self._get(key, byte_range)

    def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        validate_key(key)
        with self._owner()._lock:
            s = self._get_session()
            info = s.live.get(key)
            if info is None:
                return None
            if byte_range is None:
                assert s.zf is not None
                return s.zf.read(info)
            size = info.file_size
            start, stop = byte_range
            if start < 0 and stop is None:
                start = max(0, size + start)
            stop = size if stop is None else min(stop, size)
            if stop <= start:
                return b""
            if info.compress_type == zipfile.ZIP_STORED and not info.flag_bits & 0x1:
                assert s.fd is not None
                return os.pread(s.fd, stop - start, s.data_offset(info) + start)
            assert s.zf is not None
            with s.zf.open(info) as f:  # compressed: decompress up to the range
                f.seek(start)
                return f.read(stop - start)

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        with self._owner()._lock:
            return [self._get(k, None) for k in keys]

    def get_ranges(self, requests: Sequence[tuple[str, ByteRange | None]]) -> list[bytes | None]:
        with self._owner()._lock:
            return [self._get(k, r) for k, r in requests]

    def exists(self, key: str) -> bool:
        validate_key(key)
        with self._owner()._lock:
            return key in self._get_session().live

    def getsize(self, key: str) -> int | None:
        validate_key(key)
        with self._owner()._lock:
            info = self._get_session().live.get(key)
            return None if info is None else info.file_size

    # -- writes ------------------------------------------------------------------------
    def set(self, key: str, value: BytesLike) -> None:
        validate_key(key)
        with self._owner()._lock:
            self._writable_session(key).write(key, value)

    def delete(self, key: str) -> None:
        self._delete(key)

    def _delete(self, key: str) -> None:
        validate_key(key)
        with self._owner()._lock:
            self._check_writable(key)
            s = self._get_session()
            if key in s.live:
                self._writable_session(key).remove(key)

    def delete_prefix(self, prefix: str) -> None:
        base = normalize_prefix(prefix)
        self._check_writable(base or "/")
        with self._owner()._lock:
            for key in [k for k in self._get_session().live if k.startswith(base)]:
                self._delete(key)

    # -- listing (from the central directory) -------------------------------------------
    def list_prefix(self, prefix: str) -> Iterator[str]:
        with self._owner()._lock:
            names = [k for k in self._get_session().live if k.startswith(prefix)]
        return iter(sorted(names))

    def list_dir(self, prefix: str) -> Iterator[str]:
        base = normalize_prefix(prefix)
        with self._owner()._lock:
            names = {k[len(base):].split("/", 1)[0]
                     for k in self._get_session().live if k.startswith(base)}
        return iter(sorted(names))
