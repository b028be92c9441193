"""A zip archive in an open binary file object (``ZipStore(fileobj)``): a file opened
with fsspec on remote storage, an ``obstore`` reader, an ``io.BytesIO``...

Reading takes ranges of the file object (``seek`` + ``read``, under a lock), so an entry
costs its own bytes, not the archive's. Writing (modes "w", "x", "a") builds the new
archive in a local temporary file, as a path's session does (``zip_session``), and
``ZipStore.close()`` writes it into the file object from where it started (for "a",
after copying its old content to the temporary file first), then truncates what is
left after it where the file object can. Unlike a path, the file object is not
replaced atomically: a failure while writing it leaves it partly written.

The session belongs to its ZipStore (and to that store's read-only views) alone: no
other store can find a file object, so nothing is shared by name as for paths.
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
import threading
from typing import Any

from chunkstore.storage.errors import BadArchiveError
from chunkstore.storage.zip.session import Session, open_archive, valid_entries

#: bytes copied per step between the file object and the temporary archive
_COPY_STEP = 1 << 20


def is_file_object(path: Any) -> bool:
    """Whether a ``ZipStore(path)`` argument is an open file object rather than a path."""
    return not isinstance(path, str | bytes | os.PathLike)


def check_file_object(fileobj: Any, mode: str) -> None:
    """TypeError unless ``fileobj`` has what ``mode`` needs: ``read``/``seek``/``tell``
    to read ("r", "a"), ``write`` to write ("w", "x", "a")."""
    needs = {"r": ("read", "seek", "tell"), "w": ("write",), "x": ("write",),
             "a": ("read", "seek", "tell", "write")}[mode]
    missing = [n for n in needs if not callable(getattr(fileobj, n, None))]
    if missing:
        raise TypeError(f"ZipStore: expected a path or an open binary file object with "
                        f"{'/'.join(needs)} for mode {mode!r}, got {type(fileobj).__name__} "
                        f"without {', '.join(missing)}")


class _Reads:
    """The file object as ``zipfile`` reads it: ``read`` returns bytes (some readers give
    other buffers), every call under the session's lock."""

    def __init__(self, fileobj: Any, lock: threading.Lock) -> None:
        self._f, self._lock = fileobj, lock

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        with self._lock:
            return self._f.seek(offset, whence)

    def tell(self) -> int:
        with self._lock:
            return self._f.tell()

    def read(self, n: int | None = -1) -> bytes:
        with self._lock:  # (obstore's readers take no negative size: read all instead)
            data = self._f.read() if n is None or n < 0 else self._f.read(n)
        return bytes(data) if n is None or n < 0 else bytes(data)[:n]


class FileSession(Session):
    """The open archive of one file object (see the module docstring); the interface of
    ``zip_session.Session``, whose writing it reuses on a local temporary archive."""

    def __init__(self, fileobj: Any, compression: int, name: str) -> None:
        super().__init__(name, compression)
        self.fileobj = fileobj
        self._io = threading.Lock()  # one seek + read at a time on the file object
        seekable = getattr(fileobj, "seekable", None)
        try:
            self.start = fileobj.tell() if seekable is None or seekable() else None
        except (OSError, AttributeError, ValueError):
            self.start = None  # a write-only stream: written once, from where it is

    def pread(self, count: int, offset: int) -> bytes:
        if self.fd is not None:  # writing: the temporary archive
            return os.pread(self.fd, count, offset)
        with self._io:
            self.fileobj.seek(offset)
            return bytes(self.fileobj.read(count))[:count]  # (a reader may give more)

    def open_read(self) -> None:
        """Read the central directory of the file object (empty: no entries)."""
        f = self.fileobj
        for can in ("readable", "seekable"):
            check = getattr(f, can, None)
            if callable(check) and not check():  # (a write-only stream, a pipe)
                raise io.UnsupportedOperation(
                    f"{self.path}: the file object must be readable and seekable for the "
                    "archive to be read (again, after close()); a write-only one takes "
                    "one archive, written by close()")
        self.opened = True
        self.live, self.offsets = {}, {}
        with self._io:
            self.size = self.fileobj.seek(0, os.SEEK_END)
        if self.size == 0:
            return
        self.zf = open_archive(_Reads(self.fileobj, self._io), "r")  # type: ignore[arg-type]
        self.live, self.dead = valid_entries(self.zf)

    def begin_write(self, copy_existing: bool) -> None:
        """Write to a new local temporary archive (holding the file object's entries
        when ``copy_existing``)."""
        self.discard_pending()
        self.close_files()
        fd, tmp = tempfile.mkstemp(prefix="chunkstore-zip-", suffix=".zip")
        try:
            copied = False
            with os.fdopen(fd, "wb") as out:
                if copy_existing:
                    copied = self._copy_out(out)
            self.opened, self.tmp, self.live, self.offsets = True, tmp, {}, {}
            zf = open_archive(tmp, "a" if copied else "w", compression=self.compression,
                              allowZip64=True)
            self._attach(zf, os.open(tmp, os.O_RDONLY | os.O_CLOEXEC))
        except BaseException:
            self.tmp = None
            os.unlink(tmp)
            raise

    def _copy_out(self, out: Any) -> bool:
        """Copy the file object's archive into ``out``; whether it held any bytes."""
        with self._io:
            self.fileobj.seek(0)
            total = 0
            while chunk := bytes(self.fileobj.read(_COPY_STEP)):
                out.write(chunk)
                total += len(chunk)
        return total > 0

    def commit(self) -> None:
        """Write the pending archive into the file object (call with ``lock`` held); the
        session then reads the file object again on its next use."""
        tmp, self.tmp = self.tmp, None
        try:
            if tmp is not None:
                if self.dead:
                    self._compact(tmp)
                self.close_files()
                self._copy_in(tmp)
        finally:
            self.close_files()
            if tmp is not None:
                for name in (tmp, tmp + ".compact"):
                    if os.path.exists(name):
                        os.unlink(name)
            self.opened, self.live, self.offsets, self.dead = False, {}, {}, 0

    def _copy_in(self, tmp: str) -> None:
        f = self.fileobj
        if getattr(f, "closed", False):
            raise BadArchiveError(f"{self.path}: the file object was closed before the "
                                  "ZipStore: its pending writes are lost (close the store "
                                  "first)")
        with self._io, open(tmp, "rb") as src:
            if self.start is not None:
                f.seek(self.start)
            shutil.copyfileobj(src, f, _COPY_STEP)
            truncate = getattr(f, "truncate", None)
            if self.start is not None and callable(truncate):
                try:
                    truncate()
                except OSError:
                    pass  # not truncatable (a pipe, a remote upload): nothing after it
            flush = getattr(f, "flush", None)
            if callable(flush):
                flush()
