"""The open state of one zip archive in this process, shared by all its ZipStores.

Zip entries cannot be replaced or removed in place, so writes never edit the archive:
a session writes to a temporary archive next to it (``<name>.chunkstore-tmp-<host>-<pid>-*``; the
existing archive is copied there on the first write) and ``commit()`` replaces the
archive with one ``os.replace``. A crash before the commit leaves the previous archive
untouched, and a committed archive is never torn.

Every ZipStore of one path in one process uses the same session (``session_for``), so
a store opened on an archive that another store of the process is writing sees those
pending writes, and one commit makes them all durable. A session is committed by the
``close()`` of any of its stores, when the last of them is garbage collected, and at
interpreter exit. An archive takes one writing process at a time: a commit that finds
the archive replaced (or edited) by another process since it began writing raises
ConcurrentWriteError and keeps its own version beside it, overwriting nothing; a reading
session whose archive was replaced is left for a new one. Both checks hold the archive
version they are based on open and compare it with the path (``zip_identity``: a stat
alone does not tell two versions apart).
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import shutil
import struct
import threading
import time
import zipfile
from collections.abc import Iterator
from typing import IO

from chunkstore.errors import ConcurrentWriteError, InvalidKeyError
from chunkstore.runtime import current
from chunkstore.runtime.part import Part
from chunkstore.storage.base import BytesLike, validate_key
from chunkstore.storage.errors import BadArchiveError
from chunkstore.storage.host_identity import HOST_TAG
from chunkstore.storage.local.clock import FileVersion
from chunkstore.storage.local.temp import TEMP_PREFIX
from chunkstore.storage.zip.identity import (
    Pinned,
    copy_archive,
    current_version,
    held_version,
    open_existing,
    pin,
    pin_held,
    still_there,
)

_LOCAL_HEADER = struct.Struct("<4s5H3L2H")  # zip local file header, 30 bytes


def _is_valid_name(name: str) -> bool:
    try:
        validate_key(name)
    except InvalidKeyError:
        return False
    return True


def valid_entries(zf: zipfile.ZipFile) -> tuple[dict[str, zipfile.ZipInfo], int]:
    """The archive's entries by name (a later entry of the same name wins; directories
    and names that are not valid keys are left out), and how many entries are not."""
    infos = zf.infolist()
    live = {info.filename: info for info in infos
            if not info.is_dir() and _is_valid_name(info.filename)}
    return live, len(infos) - len(live)


def open_archive(path: str, mode: str = "r", file: IO[bytes] | None = None,
                 **kwargs: object) -> zipfile.ZipFile:
    """``zipfile.ZipFile`` of ``path`` (or of ``file``, the archive at ``path`` already
    open), with a one-line chunkstore error for a non-zip or truncated file."""
    try:
        return zipfile.ZipFile(path if file is None else file, mode,  # type: ignore[arg-type]
                               **kwargs)
    except (zipfile.BadZipFile, EOFError) as e:
        raise BadArchiveError(f"{path}: not a zip archive, or a truncated one ({e})") from None


class Session:
    """The open archive of one path in this process (see the module docstring)."""

    def __init__(self, path: str, compression: int) -> None:
        self.path, self.compression = path, compression
        self.pid = os.getpid()
        self.lock = threading.RLock()
        self.opened = False
        self.closed = False
        self.users = 0                        # live ZipStores attached to it
        self.zf: zipfile.ZipFile | None = None
        self.fd: int | None = None            # raw descriptor for ranged reads
        self.size = 0                         # bytes of the archive file when opened
        self.tmp: str | None = None           # temporary archive while writing
        self.live: dict[str, zipfile.ZipInfo] = {}
        self.offsets: dict[str, int] = {}     # data offsets of entries
        self.dead = 0                         # superseded or deleted entries
        self.base: Pinned | None = None  # the archive on disk when writing began (held)
        self.read_sig: FileVersion | None = None  # the archive read (``fd`` holds it)

    @property
    def pending(self) -> bool:
        """Whether writes wait for a commit."""
        return self.tmp is not None

    def open_read(self) -> None:
        """Open the archive on disk (or nothing, for an empty store) for reading."""
        self.opened = True
        self.live, self.offsets, self.read_sig = {}, {}, None
        fd = open_existing(self.path)
        if fd is None:
            return
        try:  # the stat, the directory and the reads: all of the one file held open
            self.read_sig = held_version(fd)
            zf = open_archive(self.path, "r", open(fd, "rb", closefd=False))
        except BaseException:
            os.close(fd)
            raise
        self._attach(zf, fd)

    def _attach(self, zf: zipfile.ZipFile, fd: int) -> None:
        self.zf, self.fd = zf, fd
        self.size = os.fstat(fd).st_size
        self.live, self.dead = valid_entries(zf)

    def begin_write(self, copy_existing: bool) -> None:
        """Start writing to a temporary archive (a copy of the old one if asked)."""
        directory = os.path.dirname(self.path) or "."
        os.makedirs(directory, exist_ok=True)
        base = os.path.basename(self.path)
        # named as local temporary files (host, PID): ``ZipStore.sweep_temp`` tells a
        # dead writer's from a live one's
        tmp = os.path.join(directory, f"{base}{TEMP_PREFIX}{HOST_TAG}-{os.getpid()}-"
                                      f"{next(_sessions().counter)}")
        # the version this session read, not the path's: what it writes may come from
        # what it read (a read-modify-write), so the commit must find that version still
        # there (no archive, when it read none); held until the commit (zip_identity)
        if self.opened:
            self._set_base(pin_held(self.fd) if self.fd is not None else None)
        else:
            self._set_base(pin(self.path))
        had_old = copy_existing and self.base is not None
        self.discard_pending()
        self.close_files()
        if had_old:
            assert self.base is not None
            copy_archive(self.base.fd, tmp)  # the very version pinned, not the path's
        self.opened, self.tmp, self.live, self.offsets = True, tmp, {}, {}
        zf = open_archive(tmp, "a" if had_old else "w", compression=self.compression,
                          allowZip64=True)
        self._attach(zf, os.open(tmp, os.O_RDONLY | os.O_CLOEXEC))

    def _set_base(self, base: Pinned | None) -> None:
        if self.base is not None:
            self.base.close()
        self.base = base

    def discard_pending(self) -> None:
        """Drop uncommitted writes (mode ``"w"`` starting over)."""
        if self.tmp is not None:
            self.close_files()
            if os.path.exists(self.tmp):
                os.unlink(self.tmp)
            self.tmp = None

    def write(self, key: str, value: BytesLike, compression: int) -> None:
        """Append an entry for ``key`` (superseding an older one)."""
        assert self.zf is not None
        info = zipfile.ZipInfo(key, date_time=time.localtime()[:6])
        info.compress_type = compression
        info.external_attr = 0o644 << 16
        if key in self.live:
            self.dead += 1
        # the new entry supersedes an older one, live or removed (a node deleted and
        # written again by an overwrite): skip zipfile's duplicate warning
        self.zf.NameToInfo.pop(key, None)
        self.zf.writestr(info, bytes(value))
        assert self.zf.fp is not None
        self.zf.fp.flush()  # reads use a separate descriptor
        self.live[key] = self.zf.getinfo(key)
        self.offsets.pop(key, None)
        self.size = os.fstat(self.fd).st_size if self.fd is not None else 0

    def remove(self, key: str) -> None:
        """Hide ``key`` (the entry is dropped at commit)."""
        if self.live.pop(key, None) is not None:
            self.dead += 1
            self.offsets.pop(key, None)

    def pread(self, count: int, offset: int) -> bytes:
        """At most ``count`` bytes of the open archive at ``offset``."""
        assert self.fd is not None
        return os.pread(self.fd, count, offset)

    def data_offset(self, info: zipfile.ZipInfo) -> int:
        """Where the bytes of an entry start (after its local header)."""
        offset = self.offsets.get(info.filename)
        if offset is None:
            header = self.pread(_LOCAL_HEADER.size, info.header_offset)
            if len(header) < _LOCAL_HEADER.size or header[:4] != b"PK\x03\x04":
                raise BadArchiveError(f"{self.path}: bad local header for entry "
                                      f"{info.filename!r} (corrupt or truncated archive)")
            fields = _LOCAL_HEADER.unpack(header)
            offset = info.header_offset + _LOCAL_HEADER.size + fields[9] + fields[10]
            self.offsets[info.filename] = offset
        return offset

    def close_files(self) -> None:
        """Close the open archive and descriptor."""
        if self.zf is not None:
            self.zf.close()
            self.zf = None
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def commit(self) -> None:
        """Write the central directory (compacting if needed), replace the archive and
        close the session (call with ``lock`` held)."""
        if self.closed or os.getpid() != self.pid:  # a forked child never commits
            return
        self.closed = True
        _forget(self)
        if self.tmp is None:
            self.close_files()
            self._set_base(None)
            return
        tmp, self.tmp = self.tmp, None
        try:
            if self.dead:
                self._compact(tmp)
            else:
                self.close_files()
            with _directory_lock(self.path):
                if not still_there(self.path, self.base):  # another process committed since
                    kept = _keep_beside(tmp, self.path)
                    raise ConcurrentWriteError(
                        f"{self.path}: another process replaced or changed the archive while "
                        f"this one was writing to it; zip archives take one writer at a time. This "
                        f"process's version is kept as {kept} (nothing was overwritten)")
                os.replace(tmp, self.path)
        except BaseException:
            self.close_files()
            for name in (tmp, tmp + ".compact"):
                if os.path.exists(name):
                    os.unlink(name)
            raise
        finally:
            self.live, self.offsets, self.dead = {}, {}, 0
            self._set_base(None)

    def _compact(self, tmp: str) -> None:
        """Rewrite ``tmp`` with only the live entries, streaming each one."""
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


# -- the sessions of this process, by archive path --------------------------------------
class ZipSessions(Part):
    """The open sessions of the process by archive path (a part of its Runtime: a forked
    child starts with none, and with new locks), and the counter of temporary names."""

    def __init__(self) -> None:
        self.by_path: dict[str, Session] = {}
        self.lock = threading.RLock()
        self.counter = itertools.count()


def _sessions() -> ZipSessions:
    return current().part(ZipSessions)


def _keep_beside(tmp: str, path: str) -> str:
    """Move ``tmp`` to a new name beside ``path`` (never over an earlier kept version)."""
    n = 0
    while True:
        kept = f"{path}.conflict-{os.getpid()}{f'-{n}' if n else ''}.zip"
        try:  # reserve the name: a second conflict of this process keeps both
            os.close(os.open(kept, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644))
        except FileExistsError:
            n += 1
            continue
        os.replace(tmp, kept)
        return kept


@contextlib.contextmanager
def _directory_lock(path: str) -> Iterator[None]:
    """An exclusive flock on the archive's directory: a check-and-replace of one process
    is not interleaved with another's."""
    fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def session_for(path: str, compression: int, writing: bool = False) -> Session:
    """The open session of ``path`` in this process (a new one if none); ``writing``: the
    caller is about to write."""
    registry = _sessions()
    with registry.lock:
        session = registry.by_path.get(path)
        if (session is None or session.closed or session.pid != os.getpid()
                or (not writing and session.opened and not session.pending
                    and session.read_sig != current_version(path))):
            # (a reading session whose archive another process has since replaced: the
            # stores move to a new session on their next read and see the new archive;
            # the old one closes when its last store has moved on. Its ``fd`` holds the
            # archive it read, so a replacement cannot show the same inode number. A
            # write keeps it: its values may come from the old archive's, so it writes
            # on the version read, and the commit raises ConcurrentWriteError)
            session = registry.by_path[path] = Session(path, compression)
        return session


def pending_session(path: str) -> Session | None:
    """The session of ``path`` if it holds uncommitted writes."""
    session = _sessions().by_path.get(path)
    if session is None or session.closed or session.pid != os.getpid():
        return None
    return session if session.pending else None


def release(session: Session) -> None:
    """A ZipStore of ``session`` is gone; the last one commits it."""
    with _sessions().lock:
        session.users -= 1
        last = session.users <= 0
    if last:
        with session.lock:
            session.commit()


def _forget(session: Session) -> None:
    registry = _sessions()
    with registry.lock:
        if registry.by_path.get(session.path) is session:
            del registry.by_path[session.path]
