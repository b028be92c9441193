"""How LocalStore commits a batch of writes and deletes.

1. Each new value is written to a temporary file in its key's directory, in parallel
   and without any lock (a directory pruned by a concurrent delete meanwhile is made
   again).
2. Items are grouped by directory; each group takes that directory's commit lock once
   (``local_locks.directory_lock``, and the walk's mutex of that directory, for the
   threads of a write session that share its descriptor), checks each item's
   generation and renames its temporary file over the key (or unlinks the key), then
   releases the lock. Groups of
   different directories commit in parallel.
3. Temporary files of items that were not applied are removed; directories emptied by
   deletes are pruned.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from functools import partial
from typing import Any

from chunkstore.runtime import current
from chunkstore.storage.base import ABSENT, ANY, Commit
from chunkstore.storage.errors import StoreError
from chunkstore.storage.local.locks import directory_lock, unchanged
from chunkstore.storage.local.maps import map_cache
from chunkstore.storage.local.paths import Walk
from chunkstore.storage.local.temp import discard, write_temp

_RETRIES = 100  # a directory pruned under a writer again and again


def commit(walk: Walk, items: Sequence[Commit], located: Sequence[tuple[str, str]],
           map_prefix: str) -> list[bool]:
    """Apply ``(key, value or None, generation)`` items whose keys are at
    ``located`` ``(directory, name)``; returns per item whether it was applied."""
    n = len(items)
    temps: list[tuple[int, str] | None] = [None] * n
    done = [False] * n

    def write(i: int) -> None:
        key, value, _ = items[i]
        head = located[i][0]
        for _ in range(_RETRIES):
            dir_fd = walk.dir(head, key, create=True)
            if dir_fd is None:
                raise NotADirectoryError(errno.ENOTDIR, f"cannot store key {key!r}: its "
                                         "directory cannot be made")
            try:
                temps[i] = (dir_fd, write_temp(dir_fd, value))  # type: ignore[arg-type]
                return
            except FileNotFoundError:  # the directory was pruned since it was opened
                walk.forget(head, dir_fd)
        raise OSError(errno.EAGAIN, f"directory of key {key!r} kept disappearing")

    def apply(group: tuple[int, list[int]]) -> None:
        dir_fd, positions = group
        with walk.mutex(dir_fd), directory_lock(dir_fd):
            for i in positions:
                key, value, generation = items[i]
                head, name = located[i]
                if generation is not ANY and not unchanged(
                        generation, partial(walk.open_file, dir_fd, head, name, key)):
                    continue
                if value is None:
                    _unlink(dir_fd, name)
                else:
                    entry = temps[i]
                    assert entry is not None
                    _rename(dir_fd, entry[1], name, key, walk.owner)
                    temps[i] = None
                map_cache().discard(map_prefix + key)
                done[i] = True

    try:
        writes = [i for i in range(n) if items[i][1] is not None]
        # tiny files are written inline when the first few prove quick (see run_batched)
        largest = max((memoryview(items[i][1]).nbytes for i in writes), default=0)
        current().pool.run_batched(write, writes, min_parallel=8, item_bytes=largest)
        groups: dict[int, list[int]] = {}
        for i in range(n):
            entry = temps[i]
            dir_fd = entry[0] if entry is not None else walk.dir(located[i][0], items[i][0])
            if dir_fd is None:  # deleting in a missing directory: nothing to delete
                done[i] = not _expects_a_value(items[i][2])
            else:
                groups.setdefault(dir_fd, []).append(i)
        # renames are quick on local disks: done inline when the first few prove so
        # (handing tiny groups to pool threads costs more than the renames)
        current().pool.run_batched(apply, list(groups.items()), min_parallel=2, item_bytes=1,
                    weight=max(1, n // max(1, len(groups))))
    finally:
        for entry in temps:
            if entry is not None:
                discard(*entry)
    emptied = {located[i][0] for i in range(n) if done[i] and items[i][1] is None}
    for head in sorted(emptied, key=lambda h: h.count("/"), reverse=True):
        walk.prune(head)
    return done


def _expects_a_value(generation: Any) -> bool:
    return generation is not ANY and generation is not ABSENT


def _rename(dir_fd: int, tmp: str, name: str, key: str, owner: Any) -> None:
    try:
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError as e:
        if e.errno not in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
            raise
        raise StoreError(f"cannot store key {key!r} of {owner!r}: a directory is in its "
                         "place") from None


def _unlink(dir_fd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except (FileNotFoundError, IsADirectoryError):
        pass  # missing, or a directory: not a key
    except OSError as e:
        if e.errno != errno.ENAMETOOLONG:  # a name no file here can have: missing
            raise
