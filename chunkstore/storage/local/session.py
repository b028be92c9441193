"""The directories of one write operation, opened once (``LocalStore.commit_session``).

A large array write commits many runs of chunks from several threads. Each plain
``commit_many`` opens the root and every directory of its keys and closes them again
after: six system calls around a run of one chunk, beside the four (open, write,
close, rename) that write it, and each one a turn at the GIL. A session opens them once
for the whole operation and lends that :class:`~.local_paths.Walk` to its runs.

Confinement is unchanged: every directory is still reached from a descriptor of the
root, one component at a time; a directory swapped for a symlink is seen by the next
operation, where an operation is now the whole write instead of one run. A directory
removed meanwhile is walked to again (and a symlink then found in its place is
resolved inside the root or refused); one moved away keeps receiving this write's
chunks, as a descriptor follows its directory: only that directory, never another.

Bounds: a session holds at most ``DIRS_PER_SLICE`` directories; a run that would need
more uses its own walk, as without a session. The walk is closed when the session has
ended and no run still borrows it, so no descriptor is closed under a thread using it
(nor reused by the system for something else while a run still writes through it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from chunkstore.storage.local.paths import DIRS_PER_SLICE, Walk


def _with_parents(heads: Iterable[str]) -> set[str]:
    """Every directory a walk opens to reach ``heads`` (``c/0`` -> ``c``, ``c/0``)."""
    out: set[str] = set()
    for head in heads:
        while head and head not in out:
            out.add(head)
            head = head.rpartition("/")[0]
    return out


class SharedWalk:
    """The walk that the commits of one operation share; ``open_walk()`` opens it
    (making the root) on the first commit that writes a value."""

    def __init__(self, open_walk: Callable[[], Walk], limit: int | None = None) -> None:
        self._open_walk = open_walk
        self._limit = DIRS_PER_SLICE if limit is None else limit
        self._walk: Walk | None = None
        self._dirs: set[str] = set()
        self._users = 0
        self._ended = False
        self._lock = threading.Lock()

    @contextmanager
    def borrow(self, heads: Iterable[str], create: bool) -> Iterator[Walk | None]:
        """The shared walk for a commit into the directories ``heads``, or None when the
        commit should use its own (the session ended, it would exceed the directory
        bound, or it only deletes and nothing was written yet)."""
        walk = self._take(heads, create)
        try:
            yield walk
        finally:
            if walk is not None:
                self._give_back()

    def _take(self, heads: Iterable[str], create: bool) -> Walk | None:
        with self._lock:
            if self._ended or self._walk is None and not create:
                return None
            new = _with_parents(heads) - self._dirs
            if len(self._dirs) + len(new) > self._limit:
                return None
            if self._walk is None:
                self._walk = self._open_walk()
            self._dirs |= new
            self._users += 1
            return self._walk

    def _give_back(self) -> None:
        with self._lock:
            self._users -= 1
        self._close_when_done()

    def end(self) -> None:
        """No more commits will borrow the walk; it is closed now, or by the last
        commit still using it."""
        with self._lock:
            self._ended = True
        self._close_when_done()

    def _close_when_done(self) -> None:
        with self._lock:
            walk = self._walk if self._ended and not self._users else None
            self._walk = None if walk is not None else self._walk
        if walk is not None:
            walk.close()
