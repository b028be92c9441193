"""Synchronizer locks name the object, not the key relative to a handle's root.

Two writers own every other element of one chunk; one reaches the array through its
group (root ``.../g``, path ``x``: key ``x/c/0``), the other through the array itself
(root ``.../g/x``: key ``c/0``). Both keys are one object, so both must take one lock.
The stores here have no compare-and-swap (fsspec memory and local files), so the lock is
all that keeps the element updates of one chunk from overwriting each other. When the
lock was named after the relative key, threads lost about half of the 256 updates and
processes about a third.
"""

from __future__ import annotations

import os
import threading
import uuid

import numpy as np

import chunkstore as cs
from chunkstore.storage.fsspec.store import FsspecStore

from ..multiproc import run_together

N = 256


def _expected() -> np.ndarray:
    return np.arange(1, N + 1, dtype="i4")


def _write_own(a, writer: int) -> None:
    for i in range(writer, N, 2):
        a[i] = i + 1  # one element: a read-modify-write of the one chunk


def _lost(got: np.ndarray) -> int:
    return int((got != _expected()).sum())


def test_thread_synchronizer_group_and_array_handles_lose_nothing():
    root = f"memory://{uuid.uuid4().hex}"
    g = cs.open_group(f"{root}/g", mode="w")
    g.create_array("x", shape=(N,), chunks=(N,), dtype="i4", fill_value=0)
    sync = cs.ThreadSynchronizer()
    handles = [cs.open_array(f"{root}/g", path="x", mode="r+", synchronizer=sync),
               cs.open_array(f"{root}/g/x", mode="r+", synchronizer=sync)]
    assert handles[0].store.read_only is handles[1].store.read_only is False
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def run(w: int) -> None:
        try:
            start.wait(10)
            _write_own(handles[w], w)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(w,)) for w in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    got = cs.open_array(f"{root}/g/x", mode="r")[:]
    assert _lost(got) == 0, f"lost {_lost(got)} of {N} updates"
    np.testing.assert_array_equal(got, _expected())


def _process_writer(url: str, path: str, lock_dir: str, writer: int, start) -> None:
    a = cs.open_array(FsspecStore(url), path=path, mode="r+",
                      synchronizer=cs.ProcessSynchronizer(lock_dir))
    start.wait(120)
    _write_own(a, writer)


def test_process_synchronizer_roots_through_group_array_and_symlink(tmp_path):
    data = tmp_path / "data"
    g = cs.open_group(str(data / "g"), mode="w")
    g.create_array("x", shape=(N,), chunks=(N,), dtype="i4", fill_value=0)
    os.symlink(data, tmp_path / "link")
    # writer 0: file:// URL of the group (real path), array path "x"; writer 1: the
    # array's own directory, reached through a symlink and a relative-looking spelling
    roots = [(f"file://{data}/g", "x"), (f"file://{tmp_path}/link/./g/x/", "")]
    lock_dir = str(tmp_path / "locks")
    run_together(_process_writer, lambda w: (*roots[w], lock_dir, w), n=2, timeout=120)
    got = cs.open_array(str(data / "g" / "x"), mode="r")[:]
    assert _lost(got) == 0, f"lost {_lost(got)} of {N} updates"
    np.testing.assert_array_equal(got, _expected())
    # bytes on disk: the one chunk decodes to the same values without chunkstore's cache
    on_disk = cs.open_array(str(data / "g" / "x"), mode="r", cache=0)[:]
    np.testing.assert_array_equal(on_disk, _expected())
