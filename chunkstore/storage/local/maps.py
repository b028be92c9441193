"""The process-wide cache of memory maps behind ``LocalStore.get_views`` (a part of the
process's Runtime: :func:`map_cache`).

Off by default (``config["cache.map_bytes"]`` = 0): each map is dropped once its reader
is done, so no mapped pages stay counted in the process's RSS between calls (the
decoded-chunk cache, ``io.chunk_cache``, is the cache users choose). With a budget,
maps of recently read files are kept by path, shared by every LocalStore, bounded in
files (each map holds a file descriptor) and in those bytes. A cached map is used only while a
confined ``stat`` of its key still shows the mapped file (device, inode, size, mtime):
a writer that replaces the file (rename, as every Zarr implementation does) creates a
new inode, so the next read maps the new file and never sees stale data. (Inode numbers
are reused, but not this one: the kept map holds the old file open, so its number cannot
be handed to the new one; and an in-place rewrite shows through the shared map.)
"""

from __future__ import annotations

import mmap
import os
import threading

from chunkstore.runtime import current
from chunkstore.runtime.part import Part


def signature(st: os.stat_result) -> tuple[int, ...]:
    """What identifies one version of a file: device, inode, size, mtime."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _map_files() -> int:
    """How many maps to keep: each holds a file descriptor, so at most an eighth of the
    process's limit (and 1024)."""
    try:
        import resource
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return 128
    return 1024 if soft == resource.RLIM_INFINITY else max(16, min(1024, soft // 8))


class MapCache(Part):
    """Memory maps of recently read files by path, the oldest dropped first, at most
    ``files`` maps of ``nbytes`` in all (a map of a deleted file keeps its disk space
    until dropped). Dropping a map never unmaps it under a reader: a map lives as long
    as any view of it."""

    def __init__(self, files: int | None = None, nbytes: int | None = None) -> None:
        self.files = _map_files() if files is None else files
        self._nbytes = nbytes
        self.reset()

    @property
    def nbytes(self) -> int:
        """The byte bound: ``config["cache.map_bytes"]`` unless set here."""
        n = self._nbytes if self._nbytes is not None else current().budgets.map_bytes
        return max(0, int(n or 0))

    @nbytes.setter
    def nbytes(self, value: int | None) -> None:
        self._nbytes = value

    def reset(self) -> None:
        """Forget every map."""
        self._maps: dict[str, tuple[tuple[int, ...], mmap.mmap, str]] = {}
        self._lock = threading.Lock()
        self._mapped = 0
        # ``get(path)``: ``(signature, map, root)`` if cached (a dict lookup is atomic)
        self.get = self._maps.get

    def put(self, path: str, sig: tuple[int, ...], mapped: mmap.mmap, root: str) -> None:
        """Remember the map of ``path`` (made by a store rooted at ``root``)."""
        bound = self.nbytes
        if bound <= 0:  # off: only drop an older map of the path
            if self._maps:
                self.discard(path)
            return
        with self._lock:
            self._pop(path)  # re-inserted last: a replaced file counts as new
            self._maps[path] = (sig, mapped, root)
            self._mapped += len(mapped)
            while len(self._maps) > self.files or self._mapped > bound:
                self._pop(next(iter(self._maps)))

    def _pop(self, path: str) -> None:
        entry = self._maps.pop(path, None)
        if entry is not None:
            self._mapped -= len(entry[1])

    def discard(self, path: str) -> None:
        """Drop the map of ``path``, if any."""
        if path in self._maps:
            with self._lock:
                self._pop(path)

    def discard_under(self, directory: str) -> None:
        """Drop every map of a file below ``directory``."""
        with self._lock:
            for path in [p for p in self._maps if p.startswith(directory)]:
                self._pop(path)



def map_cache() -> MapCache:
    """The process's map cache (a forked child starts with an empty one)."""
    return current().part(MapCache)
