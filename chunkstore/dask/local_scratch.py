"""A rechunk's intermediate on this machine's disk, when its target is not.

``rechunk`` without ``temp_store`` keeps its intermediate arrays beside the target. For a
target in an object store that means the intermediate goes through the store too: written
once and read once more, as many bytes again as the source and the target (the 4 GiB
rechunk on S3: 8 GiB each way instead of 4), and requests paid for. dask's p2p rechunk
keeps its shuffle on the workers' local disks; rechunker asks for a ``temp_store``.

:func:`local_temp_store` finds a directory of this machine for the intermediate when every
worker that will run the plan reaches it: no ``distributed`` client (this process's
threads, or Dask's local processes), or one whose every worker found a probe file written
there (workers on this machine sharing its file system; a worker elsewhere, or in a
container with its own, does not). It must have room for the intermediate's decoded bytes
with a margin, and not be memory-backed (tmpfs, ramfs: the intermediate would count as
RAM). The directory is ``chunkstore-scratch`` in Dask's ``temporary-directory``, else the
system's temporary directory. A ``temp_store`` given always wins (the target's own
location keeps the intermediate beside it). A local intermediate is stored raw and read from its
mapped files (``Stage.raw_target``), removed when the plan ends (and its runs whose owner
died by the next plan that uses the directory, or ``chunkstore clean <directory>``).
"""

from __future__ import annotations

import inspect
import os
import shutil
import tempfile
import uuid
from typing import Any

from chunkstore.api.locations import resolve_location
from chunkstore.group.scratch import sweep_scratch

#: the directory under the temporary directory that holds the intermediates
SCRATCH_NAME = "chunkstore-scratch"
#: free space kept on top of the intermediate: at least this many bytes ...
MARGIN_BYTES = 1 << 30
#: ... or this share of the intermediate, whichever is larger
MARGIN_SHARE = 0.1
#: file systems whose files live in memory
MEMORY_FILE_SYSTEMS = frozenset({"tmpfs", "ramfs"})


def local_temp_store(nbytes: int, client: Any) -> Any:
    """A store (a LocalStore) of this machine for ``nbytes`` of intermediate arrays that
    every worker of ``client`` (None: no ``distributed`` client) reads and writes; None
    when there is none (see the module docstring)."""
    base = os.path.join(base_directory(), SCRATCH_NAME)
    try:
        os.makedirs(base, exist_ok=True)
        free = shutil.disk_usage(base).free
    except OSError:
        return None
    if free < nbytes + max(MARGIN_BYTES, int(MARGIN_SHARE * nbytes)):
        return None
    if file_system_type(base) in MEMORY_FILE_SYSTEMS:
        return None
    if client is not None and not workers_reach(client, base):
        return None
    store, _ = resolve_location(base)
    _sweep(store)
    return store


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
        try:
            os.unlink(probe)
        except OSError:
            pass
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


def _sweep(store: Any) -> None:
    """Remove the directory's runs whose owner died (a plan killed before its clean-up)."""
    try:
        sweep_scratch(store)
    except Exception:  # noqa: BLE001  (best effort: a run left is found again next time)
        pass
