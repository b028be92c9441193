"""Which version of a zip archive a session is based on, and whether the archive's path
still names it: the conflict check of a commit and the staleness check of a read view
(``zip_session``).

A ``stat`` does not name a version (``local_clock``): a replacement by temporary file +
rename may get the freed inode number back (ext4 does at once) with the same size, and
timestamps repeat within one tick of the file system's clock (1-2 s on ext3, ext4 with
128-byte inodes, HFS+, FAT, NFS). Comparing ``(device, inode, size, mtime)`` let a commit
overwrite another process's archive, and a read view miss an edit. The rule here:

1. **Hold it open.** A session keeps a descriptor on the version it is based on (the
   archive it reads; the archive it copied when it began writing) until it closes. A
   file system does not free an open file, so no other file of that device can get its
   inode number meanwhile: when the path shows another ``(device, inode)`` the archive
   was replaced, whatever its size and timestamps; when it shows the same, the path
   still names the very file the session holds. That file can only have been edited in
   place (chunkstore never does; Python's ``zipfile`` in mode ``"a"`` does).
2. **An edit in place** changes ``size``, ``mtime`` or ``ctime`` (the change time, which
   nobody can set back), except within one tick of the file system's clock, or ``mtime``
   forced by ``utime`` and ``ctime`` within a tick. So a commit also compares a digest of
   the archive from the start of its central directory to its end (:func:`directory_digest`):
   every edit by a zip writer rewrites the directory (entry count, sizes, offsets, CRCs).
   It is read through a fresh descriptor of the path, which also covers an NFS mount,
   where an open on this client does not stop the server from reusing the inode number
   for another client's file (a replacement there is caught unless every entry's name,
   size, offset, date and CRC-32 is the same).

Why this rule: the held descriptor costs nothing per check and needs no clock; the
digest costs one read of the central directory per commit (and one when writing
begins), which the session reads when it opens the archive and writes when it commits
anyway: a small part of a commit's own I/O. A rule on timestamps alone (trust a stat
once its ctime is older than the measured tick, as the chunk cache does) would skip that
read for old archives but rests on the clocks of this machine and of an NFS server; the
digest does not. A read view is checked on every call of a store, where one ``stat`` is
all a check may cost: it compares ``(device, inode, size, mtime, ctime)`` with the held
descriptor's at open. That is exact for replacements (rule 1); an edit in place is seen
unless it falls within the same clock tick as the archive's last change before the view
was opened (``ZipStore.snapshot_ranges`` assumes no edits in place at all: a reader of
an archive being edited in place would see it torn anyway).
"""

from __future__ import annotations

import errno
import hashlib
import os
import struct

from chunkstore.storage.local.clock import FileVersion, version

_OPEN_FLAGS = os.O_RDONLY | os.O_CLOEXEC
_END = struct.Struct("<4s4H2LH")  # end of central directory record, 22 bytes
_END64 = 56  # the zip64 end record zip writers write (no extensible data)
_LOCATOR64 = 20  # the zip64 end record locator
#: bytes at the end of an archive that hold its end records (the longest comment too)
_TAIL = _END.size + 0xFFFF + _LOCATOR64 + _END64
_STEP = 1 << 20
#: sendfile errors that mean "not between these files here": copy by reads instead
_NO_SENDFILE = {errno.EINVAL, errno.ENOSYS, errno.ENOTSOCK, errno.EOPNOTSUPP,
                errno.ENOTSUP}


class Pinned:
    """One version of an archive, held open (``fd``, until :meth:`close`), with its
    ``stat`` (``version``) and the digest of its central directory (``digest``)."""

    __slots__ = ("digest", "fd", "version")

    def __init__(self, fd: int, version: FileVersion, digest: bytes) -> None:
        self.fd, self.version, self.digest = fd, version, digest

    def close(self) -> None:
        """Release the descriptor (the version is no longer pinned)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def open_existing(path: str) -> int | None:
    """A read-only descriptor of ``path``, or None if there is no such file."""
    try:
        return os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        return None


def current_version(path: str) -> FileVersion | None:
    """The :class:`FileVersion` of the file at ``path`` now (None: no file)."""
    try:
        return version(os.stat(path))
    except FileNotFoundError:
        return None


def held_version(fd: int) -> FileVersion:
    """The :class:`FileVersion` of the file open as ``fd``."""
    return version(os.fstat(fd))


def _pinned(fd: int) -> Pinned:
    """The version of the archive open as ``fd``, pinned by it (closed on failure)."""
    try:
        st = held_version(fd)
        return Pinned(fd, st, directory_digest(fd, st.size))
    except BaseException:
        os.close(fd)
        raise


def pin(path: str) -> Pinned | None:
    """Open the archive at ``path`` and take its version (None: no archive there)."""
    fd = open_existing(path)
    return None if fd is None else _pinned(fd)


def pin_held(fd: int) -> Pinned:
    """The version of the archive already open as ``fd`` (the one a session read),
    pinned by a descriptor of its own."""
    return _pinned(os.dup(fd))


def still_there(path: str, base: Pinned | None) -> bool:
    """Whether ``path`` holds the version ``base`` (None: no archive) unchanged: the same
    file (rule 1 of the module docstring), the same stat and central directory."""
    fd = open_existing(path)
    if fd is None or base is None:
        if fd is not None:
            os.close(fd)
        return fd is None and base is None
    try:
        now = held_version(fd)
        return now == base.version and directory_digest(fd, now.size) == base.digest
    finally:
        os.close(fd)


def directory_digest(fd: int, size: int) -> bytes:
    """A digest of the archive open as ``fd`` (``size`` bytes) from the start of its
    central directory to its end; of its last bytes only if it has no end record."""
    tail_start = max(0, size - _TAIL)
    tail = os.pread(fd, size - tail_start, tail_start)
    start = min(tail_start, _directory_start(fd, tail, tail_start))
    h = hashlib.blake2b(digest_size=16)
    h.update(size.to_bytes(8, "little"))
    for offset in range(start, tail_start, _STEP):
        h.update(os.pread(fd, min(_STEP, tail_start - offset), offset))
    h.update(tail)
    return h.digest()


def _directory_start(fd: int, tail: bytes, tail_start: int) -> int:
    """Where the central directory starts, from the end records in ``tail`` (the last
    bytes of the file, from ``tail_start``); ``tail_start`` if they cannot be read."""
    found, at = -1, len(tail)
    while (at := tail.rfind(b"PK\x05\x06", 0, at)) >= 0:
        if at + _END.size <= len(tail):
            found = at if found < 0 else found  # the last one, as zipfile reads it ...
            if at + _END.size + _END.unpack_from(tail, at)[-1] == len(tail):
                found = at  # ... unless an earlier one ends the file exactly (its comment)
                break
    if found < 0:
        return tail_start
    cd_size = _END.unpack_from(tail, found)[5]
    end = tail_start + found
    locator = end - _LOCATOR64
    if locator >= 0 and os.pread(fd, 4, locator) == b"PK\x06\x07":
        record = os.pread(fd, _END64, locator - _END64) if locator >= _END64 else b""
        if len(record) < _END64 or record[:4] != b"PK\x06\x06":
            return tail_start
        end = locator - _END64
        (cd_size,) = struct.unpack_from("<Q", record, 40)
    return max(0, end - cd_size)


def copy_archive(fd: int, dst: str) -> None:
    """Copy the file open as ``fd`` (all of it) to a new file ``dst``."""
    with open(dst, "xb") as out:
        offset = 0
        try:
            while n := os.sendfile(out.fileno(), fd, offset, _STEP):
                offset += n
            return
        except OSError as e:
            if offset or e.errno not in _NO_SENDFILE:
                raise
        while block := os.pread(fd, _STEP, offset):  # no sendfile between these files
            out.write(block)
            offset += len(block)
