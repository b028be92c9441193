"""A rechunk's intermediate on this machine's disk, when its target is not.

``rechunk`` without ``temp_store`` keeps its intermediate arrays beside the target. For a
target in an object store that means the intermediate goes through the store too: written
once and read once more, as many bytes again as the source and the target (the 4 GiB
rechunk on S3: 8 GiB each way instead of 4), and requests paid for. dask's p2p rechunk
keeps its shuffle on the workers' local disks; rechunker asks for a ``temp_store``.

:func:`local_temp_store` gives a plan a directory of its own on this machine instead,
made by ``tempfile.mkdtemp`` (mode 0700, a name nobody could make first) in Dask's
``temporary-directory``, else the system's temporary directory (its real path: a symlink
re-pointed later changes nothing), when:

* that directory and those above it are this user's or root's, writable by nobody else
  unless sticky (``/tmp``): nobody else can rename or replace the plan's directory;

* every worker that will run the plan reaches it: there is no ``distributed`` client
  (this process's threads, or Dask's local processes), or every worker of the client
  read a probe file written there and made one beside it (workers on this machine, as
  this user, on its file system; a worker elsewhere, or in a container with its own
  file system, does not);
* the temporary directory has room for the intermediate's stored bytes (its chunks
  whole, edge chunks padded) plus max(1 GiB, 10%);
* it is not memory-backed (tmpfs, ramfs: the intermediate would count as RAM).

A ``temp_store`` given always wins. The plan stores its intermediate raw there and
removes it, and the directory, when it ends (``RechunkPlan.remove_intermediates``). The
directories of this user's plans whose owner died (SIGKILLed before their clean-up) are
removed when a plan next makes one; ``chunkstore clean <directory>`` removes their runs.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import shutil
import stat
import tempfile
import time
import uuid
from typing import Any

from chunkstore.api.locations import resolve_location
from chunkstore.group.scratch import sweep_scratch

#: the name of each plan's directory starts so (``tempfile.mkdtemp``'s prefix)
PREFIX = "chunkstore-rechunk-"
#: free space kept on top of the intermediate: at least this many bytes ...
MARGIN_BYTES = 1 << 30
#: ... or this share of the intermediate, whichever is larger
MARGIN_SHARE = 0.1
#: file systems whose files live in memory
MEMORY_FILE_SYSTEMS = frozenset({"tmpfs", "ramfs"})
#: a directory of this user's without any run is left alone this long (a plan made but
#: not run yet), then removed (seconds)
UNUSED_FOR = 24 * 3600.0


def local_temp_store(nbytes: int, client: Any) -> tuple[Any, str] | None:
    """``(store, directory)``: a new directory of this machine for ``nbytes`` of
    intermediate arrays that every worker of ``client`` (None: no ``distributed``
    client) reads and writes, as a LocalStore; None when there is none (see the module
    docstring). The caller removes the directory when done."""
    base = os.path.realpath(base_directory())
    if not safe_path(base) or file_system_type(base) in MEMORY_FILE_SYSTEMS:
        return None
    try:
        os.makedirs(base, exist_ok=True)
        if shutil.disk_usage(base).free < needed(nbytes):
            return None
        sweep_directories(base)
        directory = tempfile.mkdtemp(prefix=PREFIX, dir=base)
    except OSError:  # no such directory can be made here (a file, no permission...)
        return None
    if client is not None and not workers_reach(client, directory):
        shutil.rmtree(directory, ignore_errors=True)
        return None
    store, _ = resolve_location(directory)
    return store, directory


def safe_path(base: str) -> bool:
    """Whether nobody but this user (and root) can rename or replace ``base`` or what it
    holds: ``base`` and every directory above it (those that exist) are this user's or
    root's, and writable by no one else unless sticky (as ``/tmp``). False where file
    owners cannot be told (no ``os.getuid``: Windows)."""
    if not hasattr(os, "getuid"):
        return False
    path = base
    while True:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            st = None
        except OSError:
            return False
        if st is not None:
            if not stat.S_ISDIR(st.st_mode) or st.st_uid not in (0, os.getuid()):
                return False
            if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
                return False
        parent = os.path.dirname(path)
        if parent == path:
            return True
        path = parent


def needed(nbytes: int) -> int:
    """Free bytes an intermediate of ``nbytes`` needs: itself and the margin."""
    return nbytes + max(MARGIN_BYTES, int(MARGIN_SHARE * nbytes))


def base_directory() -> str:
    """Dask's ``temporary-directory`` (where its workers spill), else the system's."""
    try:
        import dask
        chosen = dask.config.get("temporary-directory", None)
    except ImportError:
        chosen = None
    return os.path.abspath(os.path.expanduser(chosen)) if chosen else tempfile.gettempdir()


def file_system_type(path: str) -> str | None:
    """The type of the file system holding ``path`` (Linux: from ``/proc/self/mountinfo``,
    the mount point that is the longest prefix of its real path); None when unknown."""
    real = os.path.realpath(path)
    best, kind = "", None
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        point = fields[4].replace("\\040", " ")
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, line.split(" - ", 1)[1].split()[0]
    return kind


def workers_reach(client: Any, directory: str) -> bool:
    """Whether every worker of ``client`` reads a probe file written in ``directory`` by
    this process and can create files there (the same file system); False when there is
    no worker or one fails."""
    token = uuid.uuid4().hex
    probe = os.path.join(directory, f".probe-{token}")
    try:
        with open(probe, "w", encoding="ascii") as f:
            f.write(token)
        answers = client.run(_reaches, probe, token)
    except Exception:  # noqa: BLE001  (an unreachable worker: not a shared directory)
        return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(probe)
    if not isinstance(answers, dict):  # an asynchronous client's coroutine: not awaited
        if inspect.iscoroutine(answers):
            answers.close()
        return False
    return bool(answers) and all(answer is True for answer in answers.values())


def _reaches(probe: str, token: str) -> bool:
    """On a worker: the probe file holds ``token``, and a file can be made beside it."""
    try:
        with open(probe, encoding="ascii") as f:
            if f.read() != token:
                return False
        mine = tempfile.NamedTemporaryFile(dir=os.path.dirname(probe), prefix=".probe-")
        mine.close()
        return True
    except OSError:
        return False


def sweep_directories(base: str) -> list[str]:
    """Remove this user's plan directories in ``base`` whose runs' owners all died (a
    plan killed before its clean-up), or that never held a run for ``UNUSED_FOR``; a
    directory with a live run, another user's, or a symlink is left alone. Returns the
    directories removed."""
    removed: list[str] = []
    if not hasattr(os, "getuid"):  # owners cannot be told: nothing is taken for ours
        return removed
    try:
        names = [n for n in os.listdir(base) if n.startswith(PREFIX)]
    except OSError:
        return removed
    for name in names:
        directory = os.path.join(base, name)
        try:
            st = os.lstat(directory)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            continue
        store, _ = resolve_location(directory)
        try:
            swept = sweep_scratch(store)
        except Exception:  # noqa: BLE001  (best effort: looked at again next time)
            continue
        if swept.live or swept.unowned:
            continue
        unused = not os.listdir(directory) and time.time() - st.st_mtime > UNUSED_FOR
        if swept.removed or unused:
            shutil.rmtree(directory, ignore_errors=True)
            removed.append(directory)
    return removed
