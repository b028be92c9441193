"""What a ``stat`` says of one version of a local file, and how fine a file system's
timestamps are (measured), for the decoded-chunk cache's rule (``io.cache_stamps``).

A version is ``(device, inode, size, mtime, ctime)``. None of it is unique on its own:
a file replaced by temporary file + rename can get the freed inode number back (ext4
does at once), with the same size, and timestamps only move once per tick of the file
system's clock (1-2 s on ext3, ext4 with 128-byte inodes, HFS+, FAT, many NFS mounts;
one kernel clock tick, 1-10 ms, elsewhere on kernels without multigrain timestamps).
What does hold: every change of a file (a write, a rename, a ``utime``, a new file) sets
its ctime to the file system's current time, which nobody can set back. So a version
whose change time was already older than one tick of that clock when its ``stat`` was
taken can never come back: any later change is stamped later. :func:`probe` measures
the tick (the coarsest unit every probe timestamp is a multiple of) and how far the
file system's clock trails this machine's (an NFS server's skew), once per store root.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import NamedTuple

from chunkstore.storage.local.temp import discard, write_temp

#: timestamp units a file system may keep, coarsest first (FAT: 2 s; ext3, HFS+: 1 s;
#: exFAT: 10 ms; NTFS, SMB: 100 ns)
RESOLUTIONS_NS = (2_000_000_000, 1_000_000_000, 10_000_000, 1_000_000, 1_000, 100, 1)
PROBES = 3  # files written per probe (6 stamps: a fine clock never looks coarse by chance)


class FileVersion(NamedTuple):
    """One version of a file as ``stat`` shows it; the decoded-chunk cache's token of a
    local chunk (equal tokens: the same version, if mtime and ctime were old enough when
    it was taken, see ``io.cache_stamps``)."""

    device: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int


def version(st: os.stat_result) -> FileVersion:
    """The :class:`FileVersion` of a ``stat`` result."""
    # tuple.__new__: a third of the cost of the named tuple's own constructor (per hit)
    return _new(FileVersion, (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns,
                              st.st_ctime_ns))


_new = tuple.__new__


class Stamps(NamedTuple):
    """What a :func:`probe` found of a file system's timestamps."""

    device: int
    resolution_ns: int  # the coarsest unit every probe stamp was a multiple of
    lag_ns: int  # the most a fresh stamp trailed this machine's clock (>= 0)


def probe(dir_fd: int, version_of: Callable[[os.stat_result], FileVersion] = version
          ) -> Stamps:
    """Write, ``stat`` and remove :data:`PROBES` temporary files in the directory
    ``dir_fd`` (named like every temporary file of a write: never listed, swept if a
    crash leaves one) and measure its file system's timestamps. OSError if it cannot."""
    stamps: list[int] = []
    lag, device = 0, 0
    for _ in range(PROBES):
        name = write_temp(dir_fd, b"\0")
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            after = time.time_ns()
        finally:
            discard(dir_fd, name)
        v = version_of(st)
        stamps += [v.mtime_ns, v.ctime_ns]
        lag = max(lag, after - min(v.mtime_ns, v.ctime_ns))
        device = st.st_dev
    resolution = next(r for r in RESOLUTIONS_NS if all(s % r == 0 for s in stamps))
    return Stamps(device, resolution, lag)
