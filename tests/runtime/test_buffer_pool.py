"""The pool of large buffers Dask tasks borrow (``chunkstore/runtime/buffers.py``): reused
between tasks, never lent twice, never reused while anything still refers to it, within
the running tasks' budgets, freed when idle; and the rechunks that use it give exact
results, also when a store keeps what it is given."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.dask import rechunk, transpose
from chunkstore.runtime import current

SHAPE = (256, 1024)  # 1 MiB of float32: pooled (MIN_BYTES)


@pytest.fixture(autouse=True)
def _empty_pool():
    current().buffers.release()
    yield
    current().buffers.release()


def _base_id(a: np.ndarray) -> int:
    return id(a.base)


def test_reused_within_a_task_budget():
    with current().buffers.retaining(8 << 20):
        a = current().buffers.borrow(SHAPE, "f4")
        first = _base_id(a)
        a[...] = 1
        current().buffers.give_back(a)
        del a
        assert current().buffers.pooled_bytes() == 4 << 20 >> 2
        b = current().buffers.borrow(SHAPE, np.float32)
        assert _base_id(b) == first and b.shape == SHAPE and b.dtype == np.float32
        assert b.flags.c_contiguous and b.flags.writeable
        current().buffers.give_back(b)
        del b


def test_nothing_kept_outside_a_task():
    a = current().buffers.borrow(SHAPE, "f4")
    current().buffers.give_back(a)
    del a
    assert current().buffers.pooled_bytes() == 0


@pytest.mark.parametrize("holder", ["view", "memoryview", "alias", "frombuffer"])
def test_a_buffer_still_referred_to_is_not_reused(holder):
    """What a store (or a traceback) keeps of a block must not be overwritten by the next
    task's data."""
    with current().buffers.retaining(64 << 20):
        a = current().buffers.borrow(SHAPE, "f4")
        a[...] = 7
        if holder == "view":
            kept = a[3]
        elif holder == "memoryview":
            kept = memoryview(a)
        elif holder == "alias":
            kept = a
        else:
            kept = np.frombuffer(a, "u1")
        current().buffers.give_back(a)
        del a
        assert current().buffers.pooled_bytes() == 0
        b = current().buffers.borrow(SHAPE, "f4")
        b[...] = -1
        assert (np.frombuffer(np.asarray(kept).tobytes(), "f4") == 7).all()
        current().buffers.give_back(b)
        del b


def test_never_lent_twice_across_threads():
    errors = []

    def work(k: int) -> None:
        with current().buffers.retaining(8 << 20):
            for _ in range(30):
                a = current().buffers.borrow(SHAPE, "i4")
                a[...] = k
                time.sleep(0.001)
                if not (a == k).all():
                    errors.append(k)
                current().buffers.give_back(a)
                del a

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert current().buffers.pooled_bytes() <= 4 * (8 << 20)


def test_pool_stays_within_the_budgets_and_frees_when_idle(monkeypatch):
    monkeypatch.setattr(current().buffers, "idle_seconds", 0.05)
    with current().buffers.retaining(3 << 20):
        arrays = [current().buffers.borrow(SHAPE, "f4") for _ in range(3)]  # 3 MiB lent
        while arrays:  # (a list still holding one would keep it from being reused)
            current().buffers.give_back(arrays.pop())
        assert current().buffers.pooled_bytes() == 3 << 20
        big = current().buffers.borrow((512, 1024), "f4")  # 2 MiB: a miss; room is made first
        assert current().buffers.pooled_bytes() + big.nbytes <= 3 << 20
        current().buffers.give_back(big)
        del big
        assert current().buffers.pooled_bytes() <= 3 << 20
    assert current().buffers.pooled_bytes() > 0  # kept for the next task ...
    deadline = time.monotonic() + 5
    while current().buffers.pooled_bytes() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert current().buffers.pooled_bytes() == 0  # ... and freed when none came


def test_a_much_larger_buffer_is_not_lent_for_a_small_array():
    with current().buffers.retaining(64 << 20):
        a = current().buffers.borrow((4096, 1024), "f4")  # 16 MiB
        current().buffers.give_back(a)
        del a
        b = current().buffers.borrow(SHAPE, "f4")  # 1 MiB: not a prefix of the 16 MiB buffer
        assert b.base.nbytes == 1 << 20
        current().buffers.give_back(b)
        del b


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_starts_with_an_empty_pool():
    with current().buffers.retaining(8 << 20):
        a = current().buffers.borrow(SHAPE, "f4")
        current().buffers.give_back(a)
        del a
        assert current().buffers.pooled_bytes()
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover (child)
            os.write(w, str(current().buffers.pooled_bytes()).encode())
            os._exit(0)
        os.waitpid(pid, 0)
        assert os.read(r, 64) == b"0"


@pytest.mark.parametrize("compressors", ["default", None])
def test_transpose_and_rechunk_reusing_blocks_are_exact(compressors, monkeypatch):
    """Many tasks, each borrowing the blocks the previous one gave back, into a
    MemoryStore (which keeps what it is given: raw chunks could be views of a block)."""
    monkeypatch.setattr(current().buffers, "idle_seconds", 60)
    rng = np.random.default_rng(1)
    data = rng.standard_normal((128, 128, 128), dtype="f4")
    kw = {} if compressors == "default" else {"compressors": None}
    src = cs.create_array(cs.MemoryStore(), shape=data.shape, chunks=(128, 128, 32),
                          dtype="f4", **kw)
    src[...] = data
    out = transpose(src, (2, 1, 0), cs.MemoryStore(), max_mem="16MB", **kw)
    np.testing.assert_array_equal(out[...], data.transpose(2, 1, 0))
    assert current().buffers.pooled_bytes() >= 2 << 20  # the tasks' blocks were kept for reuse
    plan = rechunk(src, (16, 128, 128), cs.MemoryStore(), max_mem="16MB",
                   temp_store=cs.MemoryStore(), **kw)
    got = plan.execute()
    np.testing.assert_array_equal(got[...], data)
