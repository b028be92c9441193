"""Concurrent unaligned writers lose nothing: by conditional commits on stores with
compare-and-swap, by synchronizers elsewhere.

Each writer owns a strided set of elements (``a[w::nw]``), so writers never touch the
same element, but every chunk is shared: each write is a chunk read-modify-write. A
store with a little latency on reads widens the race window; on a store without
compare-and-swap (the control group) the unsynchronized run reliably loses updates —
proving the test can fail.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.storage import LocalStore
from chunkstore.storage.reference import object_ref
from tests.multiproc import NoCasLocalStore, context

N_WRITERS, N_ROUNDS, SHAPE, CHUNKS = 4, 25, (40,), (20,)


class SlowReadStore(LocalStore):
    """LocalStore whose reads take 2 ms, to widen read-modify-write races."""

    def get(self, key, byte_range=None):
        time.sleep(0.002)
        return super().get(key, byte_range)

    def get_many(self, keys):
        return [self.get(k) for k in keys]

    def get_versioned_many(self, keys):
        time.sleep(0.002)
        return super().get_versioned_many(keys)


class SlowNoCasStore(SlowReadStore, NoCasLocalStore):
    """The control group: commits without checking generations."""

    def get_versioned_many(self, keys):
        time.sleep(0.002)
        return NoCasLocalStore.get_versioned_many(self, keys)


STORES = {"cas": SlowReadStore, "nocas": SlowNoCasStore}


def _increment_own_elements(root: str, writer: int, synchronizer, kind: str = "cas",
                            start=None) -> None:
    a = cs.open_array(STORES[kind](root), mode="r+", synchronizer=synchronizer)
    if start is not None:  # all writers begin together (spawned interpreters start apart)
        start.wait(120)
    for _ in range(N_ROUNDS):
        a[writer::N_WRITERS] = a[writer::N_WRITERS] + 1


def _make(tmp_path) -> str:
    root = str(tmp_path / "counts.zarr")
    cs.create_array(root, shape=SHAPE, chunks=CHUNKS, dtype="i4", fill_value=0)
    return root


def _run_processes(root: str, synchronizer, kind: str = "cas") -> np.ndarray:
    ctx = context()
    start = ctx.Barrier(N_WRITERS)
    procs = [ctx.Process(target=_increment_own_elements,
                         args=(root, w, synchronizer, kind, start))
             for w in range(N_WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    return cs.open_array(root, mode="r")[:]


def _run_threads(root: str, synchronizer, kind: str = "cas") -> np.ndarray:
    # all writers begin together: a thread started late on a loaded machine could find
    # the others done, and the control group would then have no race to lose
    start = threading.Barrier(N_WRITERS)
    threads = [threading.Thread(target=_increment_own_elements,
                                args=(root, w, synchronizer, kind, start))
               for w in range(N_WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return cs.open_array(root, mode="r")[:]


@pytest.mark.parametrize("kind", ["cas", "nocas"])
def test_process_synchronizer_loses_nothing(tmp_path, kind):
    counts = _run_processes(_make(tmp_path), cs.ProcessSynchronizer(tmp_path / "locks"), kind)
    assert (counts == N_ROUNDS).all(), counts


def test_without_synchronizer_processes_lose_nothing_by_conditional_commits(tmp_path):
    counts = _run_processes(_make(tmp_path), None)
    assert (counts == N_ROUNDS).all(), counts


def test_without_synchronizer_or_compare_and_swap_processes_lose_updates(tmp_path):
    counts = _run_processes(_make(tmp_path), None, "nocas")
    assert (counts < N_ROUNDS).any(), "expected lost updates without a synchronizer"


@pytest.mark.parametrize("kind", ["cas", "nocas"])
def test_thread_synchronizer_loses_nothing(tmp_path, kind):
    counts = _run_threads(_make(tmp_path), cs.ThreadSynchronizer(), kind)
    assert (counts == N_ROUNDS).all(), counts


def test_without_synchronizer_threads_lose_nothing_by_conditional_commits(tmp_path):
    counts = _run_threads(_make(tmp_path), None)
    assert (counts == N_ROUNDS).all(), counts


def test_without_synchronizer_or_compare_and_swap_threads_lose_updates(tmp_path):
    counts = _run_threads(_make(tmp_path), None, "nocas")
    assert (counts < N_ROUNDS).any(), "expected lost updates without a synchronizer"


class RecordingSynchronizer(cs.ThreadSynchronizer):
    def __init__(self):
        super().__init__()
        self.requested: list[str] = []

    def __getitem__(self, key):
        self.requested.append(key)
        return super().__getitem__(key)


def test_aligned_writes_take_no_lock():
    sync = RecordingSynchronizer()
    a = cs.zeros((40, 40), chunks=(10, 10), dtype="i4", synchronizer=sync)
    a[:20, 10:40] = 5
    a.write_chunk((3, 3), np.ones((10, 10), "i4"))
    assert sync.requested == []
    a[5:15, 0] = 1  # unaligned: two chunks partly covered
    # locks are named after the objects (``storage.reference``), not the relative keys
    assert sorted(sync.requested) == [object_ref(a.store, k).name for k in ("c/0/0", "c/1/0")]
    assert (a[5:15, 0] == 1).all() and a[:20, 10:40].min() == 5


@pytest.mark.parametrize("sync", [cs.ThreadSynchronizer(), None])
def test_synchronizers_pickle(sync, tmp_path):
    import pickle
    p = cs.ProcessSynchronizer(tmp_path)
    assert pickle.loads(pickle.dumps(p)).lock_dir == p.lock_dir
    if sync is not None:
        assert isinstance(pickle.loads(pickle.dumps(sync)), cs.ThreadSynchronizer)
