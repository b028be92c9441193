"""Scratch arrays (rechunk/transpose intermediates): where they live, who owns them, and
sweeping those whose owner is dead.

A plan's intermediates live in one *run* directory,
``<target's parent>/__chunkstore_tmp__/<target name>.rechunk-<hex>/`` (inside the
target's own directory when the target is the root array of its store; at the root of
``temp_store`` when one is given). ``__chunkstore_tmp__`` holds no metadata document, so
it is never a node: no listing of a group (chunkstore's, zarr-python's) shows it, no
consolidated copy lists it, and the intermediates' documents are written without
creating the groups above them (``documents.write_detached``).

The run's first key, written before any intermediate, and its last, removed after them,
is ``owner.json``: the host identity (``storage.host_identity``), PID and start time of
the process that runs the plan, and a heartbeat that process refreshes while it runs.
:func:`sweep_scratch` removes a run when its owner is a dead process of this host, or
its heartbeat is older than a threshold (an owner on another host, or one that stopped
beating); a run without a readable owner record is never touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from chunkstore.array.array import Array
from chunkstore.metadata.nodes import NodeMetadata, is_array, join_path
from chunkstore.nodes.documents import write_detached
from chunkstore.nodes.paths import SCRATCH_DIR
from chunkstore.nodes.placement import check_parents
from chunkstore.nodes.reading import META_NAMES, probe_nodes
from chunkstore.storage.base import Store
from chunkstore.storage.bounds import ObjectSizeError
from chunkstore.storage.host_identity import HOST_ID, dead_here, process_start

#: the owner record of a run
OWNER = "owner.json"
#: how often a running plan refreshes its owner record (seconds)
HEARTBEAT = 60.0
#: a foreign owner is gone when its heartbeat is older than this, at least (seconds)
MIN_SILENCE = 5 * HEARTBEAT
#: names of run directories (anything else in a scratch directory is not ours)
RUN_NAME = re.compile(r"(?:.+\.)?rechunk-[0-9a-f]{16}")
_FORMAT = 1
#: the settings of a scratch array's handles (``ScratchRun.add_array``)
INTERMEDIATE_CONFIG = MappingProxyType({"write_empty_chunks": True,
                                        "read_missing_chunks": False})
#: a larger owner record is not ours (not read whole)
_MAX_OWNER_BYTES = 4096


def run_path(target_path: str, in_temp_store: bool) -> str:
    """A new run directory for a plan whose target is at ``target_path`` (see the module
    docstring); nothing is created."""
    token = uuid.uuid4().hex[:16]
    if in_temp_store or not target_path:
        return f"{SCRATCH_DIR}/rechunk-{token}"
    parent, _, name = target_path.rpartition("/")
    return join_path(parent, f"{SCRATCH_DIR}/{name}.rechunk-{token}")


def temp_run_path(store: Store) -> str:
    """A new run directory at the root of a temp store (``run_path("", True)``), nothing
    created; ContainsArrayError when nothing can be created there (its root, or a node
    above the run, is an array)."""
    where = run_path("", in_temp_store=True)
    check_parents(store, f"{where}/0")
    return where


def owner_record(now: float | None = None) -> dict[str, Any]:
    """What ``owner.json`` says about this process."""
    now = time.time() if now is None else now
    return {"chunkstore_scratch": _FORMAT, "host": HOST_ID, "pid": os.getpid(),
            "start": process_start(os.getpid()), "created": round(now, 3),
            "heartbeat": round(now, 3)}


class ScratchRun:
    """One plan's run directory in ``store``: the owner record, the scratch arrays made
    in it, and their removal (arrays first, owner record last)."""

    def __init__(self, store: Store, path: str) -> None:
        self.store, self.path = store, path
        self.arrays: list[Array] = []
        self._created: float | None = None
        self._beat: tuple[threading.Event, threading.Thread] | None = None

    @property
    def owner_key(self) -> str:
        return join_path(self.path, OWNER)

    def _write_owner(self) -> None:
        record = owner_record()
        if self._created is None:
            self._created = record["created"]
        record["created"] = self._created
        self.store.set(self.owner_key, json.dumps(record).encode())

    def add_array(self, meta: NodeMetadata) -> Array:
        """A new scratch array with the metadata ``meta`` (the owner record is written
        first, with the run's first array)."""
        if self._created is None:
            self._write_owner()
        path = join_path(self.path, str(len(self.arrays)))
        write_detached(self.store, path, meta)
        # every chunk stored, and a chunk missing when read is an error: an intermediate
        # removed under the plan (a cleaner of the temporary directory) fails it loudly
        # instead of reading as fill_value into the target
        array = Array(self.store, path, meta, config=INTERMEDIATE_CONFIG)
        self.arrays.append(array)
        return array

    def start_heartbeat(self, interval: float = HEARTBEAT) -> None:
        """Refresh the owner record every ``interval`` seconds until :meth:`remove` (a
        thread of this process; failed refreshes are retried at the next beat)."""
        if self._beat is not None or self._created is None:
            return
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(interval):
                with contextlib.suppress(Exception):
                    self._write_owner()

        # not named "chunkstore...": that prefix marks the IO pool's threads
        thread = threading.Thread(target=beat, name="scratch-heartbeat", daemon=True)
        thread.start()
        self._beat = (stop, thread)

    def remove(self) -> None:
        """Remove the scratch arrays, then the owner record."""
        if self._beat is not None:
            stop, thread = self._beat
            stop.set()
            thread.join()
            self._beat = None
        for array in self.arrays:
            self.store.delete_prefix(array.path)
        self.arrays.clear()
        if self._created is not None:
            remove_run(self.store, self.path)
            self._created = None


def remove_run(store: Store, path: str) -> None:
    """Delete what is in the run directory ``path``, its owner record last."""
    for name in list(store.list_dir(path)):
        if name != OWNER:
            store.delete_prefix(join_path(path, name))
    store.delete(join_path(path, OWNER))


def owner_is_gone(record: Any, older_than: float, now: float | None = None) -> bool:
    """Whether the owner of a run is gone: a dead process of this host (one that still
    runs is never gone, however old), or, for another host, a heartbeat older than
    ``older_than`` seconds (and than :data:`MIN_SILENCE`: a live owner beats every
    :data:`HEARTBEAT` seconds). A record that cannot be read says nothing (False)."""
    if not isinstance(record, dict):
        return False
    host, pid, start, beat = (record.get(k) for k in ("host", "pid", "start", "heartbeat"))
    if not (isinstance(host, str) and type(pid) is int
            and (start is None or type(start) is int)
            and isinstance(beat, int | float) and not isinstance(beat, bool)):
        return False
    if host == HOST_ID:
        return dead_here(host, pid, start)
    return (time.time() if now is None else now) - beat > max(older_than, MIN_SILENCE)


def _has_runs(store: Store, path: str) -> bool:
    return any(True for _ in store.list_dir(join_path(path, SCRATCH_DIR)))


def scratch_dirs(store: Store) -> list[str]:
    """The scratch directories of ``store`` (those holding something, and not nodes
    themselves): beside every group and array of its hierarchy, and at its root; walked
    level by level (one listing per group and per array, one batched read of the
    children's documents per level)."""
    root = probe_nodes(store, [""])[""]
    found = [""] if _has_runs(store, "") else []
    groups = [] if root is not None and is_array(root) else [""]
    while groups:
        children = [join_path(p, n) for p in groups for n in store.list_dir(p)
                    if n not in META_NAMES and n != SCRATCH_DIR]
        nodes = probe_nodes(store, children) if children else {}
        groups = []
        for child in children:
            node = nodes[child]
            if node is None:
                continue
            if _has_runs(store, child):  # an array's: a root target's (``run_path``)
                found.append(child)
            if not is_array(node):
                groups.append(child)
    dirs = [join_path(p, SCRATCH_DIR) for p in found]
    nodes = probe_nodes(store, dirs) if dirs else {}
    return [d for d in dirs if nodes[d] is None]  # one made a node by others is theirs


@dataclass
class ScratchSweep:
    """What :func:`sweep_scratch` did: the runs removed, and those kept (live owner, or
    no readable owner record)."""

    removed: list[str] = field(default_factory=list)
    live: list[str] = field(default_factory=list)
    unowned: list[str] = field(default_factory=list)


def sweep_scratch(store: Store, older_than: float = 3600.0) -> ScratchSweep:
    """Remove the scratch runs of ``store`` whose owner is gone (:func:`owner_is_gone`)."""
    report = ScratchSweep()
    for directory in scratch_dirs(store):
        for name in list(store.list_dir(directory)):
            if not RUN_NAME.fullmatch(name):
                continue
            run = join_path(directory, name)
            try:
                raw = store.get_many([join_path(run, OWNER)], max_bytes=_MAX_OWNER_BYTES)[0]
                record = json.loads(raw) if raw is not None else None
            except (ObjectSizeError, ValueError, RecursionError):
                record = None
            if not isinstance(record, dict) or record.get("chunkstore_scratch") != _FORMAT:
                report.unowned.append(run)
            elif owner_is_gone(record, older_than):
                remove_run(store, run)
                report.removed.append(run)
            else:
                report.live.append(run)
    return report
