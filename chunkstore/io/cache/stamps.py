"""When a local file's stat may stand for its content in the decoded-chunk cache
(``chunk_cache``): the "racy" rule, with each file system's timestamps measured.

A chunk file's token is its :class:`~chunkstore.storage.local.clock.FileVersion`
(device, inode, size, mtime, ctime). Two versions of a file can share all five: a
replacement by temporary file + rename may get the freed inode number back, and
timestamps only move once per tick of the file system's clock (1-2 s on ext3, ext4 with
128-byte inodes, HFS+, FAT, many NFS mounts; a kernel clock tick elsewhere). But every
change sets ctime to the file system's current time, which cannot be set back. So:

    a token is trusted only if, when it was taken, the file's last change (its mtime
    and ctime) was older than the file system's *window*: its timestamp resolution
    plus how far its clock trails this machine's, plus 10 ms (the longest kernel tick).

Any later change is then stamped later than the token's times, so the token never
comes back. A token taken too soon after a change is :class:`Unsettled`: its chunk is
read and decoded as usual but not kept. The rule is applied when an entry is kept, so a
hit only needs an equal stat: an entry's token was settled when taken, and any change
since would have moved its ctime. Files written long ago (the case a cache is for) are
trusted on their stat alone: a hit costs one ``stat``, as before.

The window is measured once per store root and cache (:class:`StampWindows`, kept by
each ``ChunkCache``): three probe files written, stat'ed and removed in the root
(``LocalStore.timestamp_probe``). A read-only store never writes, and a root that
refuses the probe cannot be measured: they get :data:`DEFAULT_WINDOW_NS` (3 s: FAT's
2 s stamps, a tick, and a second of clock skew), as do files on another device than
the root's (a mount below it).

Why this rule: it costs nothing per hit beyond the ``stat`` the cache already took, and
it holds on every file system that keeps a ctime (all POSIX ones), however coarse its
clock; it fails only if the clock is set back by more than the window. Not chosen:
validating every hit by content (a read per hit: what the cache is there to save);
the inode generation (``FS_IOC_GETVERSION``: an open, an ioctl and a close per file per
hit, three system calls where the ``stat`` is one, on a few file systems only, and
nothing the ctime rule leaves open); not caching where timestamps are coarse (the rule
already keeps every file older than a couple of seconds there).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from chunkstore.storage.local.clock import FileVersion

#: the window of a file system that could not be measured (ns)
DEFAULT_WINDOW_NS = 3_000_000_000
#: added to every measured window: the longest kernel clock tick (HZ=100), which a few
#: probes may not catch at its worst
TICK_NS = 10_000_000
_MAX_ROOTS = 1024  # roots measured per cache (the oldest forgotten first)


class Unsettled:
    """The token of a version whose timestamps were too recent to tell it from the next
    one: a chunk read with it is never kept (``place.keepable``). It still
    compares as the version it wraps (``_same``): an entry kept earlier, for a settled
    token, is served while the stat equals that token (a change since would show)."""

    __slots__ = ("token",)

    def __init__(self, token: Any) -> None:
        self.token = token

    def __repr__(self) -> str:
        return f"Unsettled({self.token!r})"


class StampWindows:
    """The measured window of each store root (see the module docstring), by the
    store's type and location; thread-safe, each root probed once."""

    def __init__(self) -> None:
        #: (store type, location) -> (device probed or None, window in ns)
        self._roots: dict[Any, tuple[int | None, int]] = {}
        self._lock = threading.Lock()

    def window(self, store: Any, device: int) -> int:
        """The window (ns) of ``store``'s files on ``device``: measured in its root (on
        first use) when the root is on that device, else :data:`DEFAULT_WINDOW_NS`."""
        try:
            key = (type(store), store.location())
            entry = self._roots.get(key)
        except Exception:  # no hashable location: nothing to remember it by
            return DEFAULT_WINDOW_NS
        if entry is None:
            entry = self._measure(store, key)
        return entry[1] if entry[0] == device else DEFAULT_WINDOW_NS

    def _measure(self, store: Any, key: Any) -> tuple[int | None, int]:
        with self._lock:
            entry = self._roots.get(key)
            if entry is None:
                stamps = store.timestamp_probe()
                entry = (None, DEFAULT_WINDOW_NS) if stamps is None else (
                    stamps.device, stamps.resolution_ns + stamps.lag_ns + TICK_NS)
                while len(self._roots) >= _MAX_ROOTS:
                    self._roots.pop(next(iter(self._roots)))
                self._roots[key] = entry
        return entry

    def settle(self, store: Any, tokens: Sequence[Any], since_ns: int) -> list[Any]:
        """``tokens`` (taken from ``store`` after ``since_ns``, ``time.time_ns()``) with
        every :class:`FileVersion` changed within its window of ``since_ns`` made
        :class:`Unsettled`; other tokens as they are."""
        out = list(tokens)
        device, cutoff = None, 0  # the last device seen and its cutoff (one, mostly)
        for i, t in enumerate(out):
            if type(t) is FileVersion:
                if t[0] != device:
                    device = t[0]
                    cutoff = since_ns - self.window(store, device)
                if t[3] >= cutoff or t[4] >= cutoff:  # mtime, ctime: within the window
                    out[i] = Unsettled(t)
        return out
