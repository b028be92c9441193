"""Writes of FsspecStore as functions of its filesystem: batched PUTs in a sliding
window, atomic replaces of local files by rename, batched removes (local files: with the
directories they leave empty)."""

from __future__ import annotations

import os
from typing import Any

from chunkstore.storage.local.temp import temp_name

#: at most this many bytes of values are being sent at once by ``set_many`` ...
PUT_WINDOW_BYTES = 64 * 2**20
#: ... in at most this many concurrent requests (each holds a copy of its value)
PUT_WINDOW_REQUESTS = 16


def is_local(fs: Any) -> bool:
    """Whether ``fs`` is the local filesystem (its files are replaced by rename, and
    directories left empty are removed)."""
    protocol = fs.protocol
    return bool({"file", "local"} & set((protocol,) if isinstance(protocol, str) else protocol))


def put(fs: Any, data: dict[str, bytes]) -> None:
    """Store ``data`` (path -> value) on ``fs``: local files by rename
    (:func:`set_by_rename`), async filesystems with a sliding window of concurrent PUTs,
    others with one ``pipe``."""
    if is_local(fs):
        set_by_rename(fs, data)
    elif getattr(fs, "async_impl", False):
        largest = max(len(v) for v in data.values())
        window = max(1, min(PUT_WINDOW_REQUESTS, PUT_WINDOW_BYTES // max(1, largest)))
        fs.pipe(data, batch_size=window)
    else:
        fs.pipe(data)


def set_by_rename(fs: Any, data: dict[str, bytes]) -> None:
    """Local files: write a temporary sibling and rename it over the path."""
    for path, value in data.items():
        parent = path.rsplit("/", 1)[0]
        tmp = f"{parent}/{temp_name()}"
        fs.makedirs(parent, exist_ok=True)
        try:
            fs.pipe_file(tmp, value)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise


def remove(fs: Any, paths: list[str], root: str) -> None:
    """Remove ``paths`` with one batched ``fs.rm`` (missing ones ignored); local files:
    then the directories left empty up to ``root``."""
    try:
        fs.rm(paths)
    except FileNotFoundError:  # some filesystems refuse missing paths in a batch
        for path in paths:
            try:
                fs.rm_file(path)
            except FileNotFoundError:
                pass
    if is_local(fs):
        prune_dirs(paths, root)


def prune_dirs(paths: list[str], root: str) -> None:
    """Remove the directories of ``paths`` left empty, up to (not including) ``root``."""
    for parent in sorted({p.rsplit("/", 1)[0] for p in paths}, key=len, reverse=True):
        while parent.startswith(root + "/"):
            try:
                os.rmdir(parent)
            except OSError:
                break
            parent = parent.rsplit("/", 1)[0]
