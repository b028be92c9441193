"""The Runtime (``chunkstore.runtime``): the one owner of the process's mutable state."""

from __future__ import annotations

import os
import sys
import threading

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.codecs.limits import decode_limits, variable_cap
from chunkstore.config import ENVIRONMENT, environ
from chunkstore.io.cache import chunk_cache
from chunkstore.runtime import Budgets, Part, Runtime, current, reset, scratch, set_map_bytes
from chunkstore.storage.local.maps import MapCache, map_cache
from chunkstore.storage.obstore.setup import ObstoreState
from chunkstore.storage.s3_conditional import Conditions, conditional_probes


def test_current_is_one_runtime_until_reset():
    first = current()
    assert current() is first
    assert chunk_cache.shared() is first.part(chunk_cache.Caches).shared
    assert map_cache() is first.part(MapCache)
    reset()
    second = current()
    assert second is not first
    assert chunk_cache.shared() is not first.part(chunk_cache.Caches).shared
    assert current().pool.run_batched(lambda x: x + 1, list(range(100))) == list(range(1, 101))


def test_parts_are_per_runtime_and_made_once():
    class Counter(Part):
        made = 0

        def __init__(self) -> None:
            Counter.made += 1

    a, b = Runtime(), Runtime()
    parts = []
    threads = [threading.Thread(target=lambda: parts.append(a.part(Counter)))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert Counter.made == 1 and all(p is parts[0] for p in parts)
    assert b.part(Counter) is not parts[0]


def test_a_part_is_closed_with_its_runtime_and_kept_by_a_fork_only_if_it_says_so():
    """Every part is a :class:`Part`: closing the Runtime closes each one, and a forked
    child starts with a new part unless the part's ``forked()`` gives the child's."""
    closed = []

    class Plain(Part):
        pass

    class Kept(Part):
        def forked(self) -> Kept:
            child = Kept()
            child.parent = self
            return child

        def close(self) -> None:
            closed.append(self)

    a = Runtime()
    plain, kept = a.part(Plain), a.part(Kept)
    child = a.forked()
    assert child.part(Plain) is not plain
    assert child.part(Kept).parent is kept
    a.close()
    assert closed == [kept]
    child.close()
    assert len(closed) == 2 and closed[1].parent is kept


def test_budgets_follow_the_config():
    before = current().budgets
    with cs.config.set({"cache.chunk_bytes": "3MiB", "codecs.vlen_ratio": 7,
                        "threading.write_bytes": 1 << 20}):
        budgets = current().budgets
        assert budgets.chunk_bytes == 3 << 20 and budgets.write_bytes == 1 << 20
        assert chunk_cache.shared().budget == 3 << 20
        assert decode_limits().vlen_ratio == 7
        assert variable_cap(100 << 20) == 700 << 20
    assert current().budgets == before
    assert isinstance(before, Budgets)


def test_set_map_bytes_sets_the_budget_and_gives_the_previous():
    previous = set_map_bytes(5 << 20)
    try:
        assert current().budgets.map_bytes == 5 << 20
        assert cs.config.get("cache.map_bytes") == 5 << 20
        assert map_cache().nbytes == 5 << 20
    finally:
        assert set_map_bytes(previous) == 5 << 20
    assert cs.config.get("cache.map_bytes") == previous


def test_set_map_bytes_takes_sizes_and_refuses_none():
    """A size such as '2MiB' is a bound, and the previous setting it returns (in bytes)
    restores it; None is no bound the config knows: refused, nothing set."""
    import inspect

    previous = set_map_bytes("2MiB")
    try:
        assert current().budgets.map_bytes == 2 << 20
        assert set_map_bytes(previous) == 2 << 20
        with pytest.raises(ValueError, match="cache.map_bytes"):
            set_map_bytes(None)  # type: ignore[arg-type]
        assert cs.config.get("cache.map_bytes") == previous
    finally:
        set_map_bytes(previous)
    assert "None" not in str(inspect.signature(set_map_bytes))


def test_bad_vlen_caps_are_refused_by_the_config():
    with pytest.raises(ValueError, match="codecs.vlen_min_bytes"):
        cs.config.set({"codecs.vlen_min_bytes": 0})


def test_vlen_caps_from_the_environment(monkeypatch):
    monkeypatch.setenv("CHUNKSTORE_VLEN_MIN_BYTES", "1000")
    monkeypatch.setenv("CHUNKSTORE_VLEN_RATIO", "3")
    budgets = Budgets.from_config()
    assert (budgets.vlen_min_bytes, budgets.vlen_ratio) == (1000, 3)
    with cs.config.set({"codecs.vlen_ratio": 5}):  # the config wins over the environment
        assert Budgets.from_config().vlen_ratio == 5


def test_the_environment_is_read_in_one_place():
    module = sys.modules["chunkstore.config"]
    with pytest.raises(KeyError, match="ENVIRONMENT"):
        environ("HOME")
    for name in ENVIRONMENT:  # every variable read is documented
        assert f"``{name}``" in module.__doc__, name


def test_close_stops_the_pool_and_forgets_the_parts():
    runtime = Runtime()
    executor = runtime.pool.executor()
    assert runtime.pool.run_batched(lambda x: x * 2, list(range(64))) == list(range(0, 128, 2))
    state = runtime.part(ObstoreState)
    runtime.close()
    assert executor._shutdown
    assert runtime.part(ObstoreState) is not state
    assert runtime.pool.executor() is not executor  # usable again: a new executor
    runtime.close()


def test_reset_drops_the_caches_and_scratch():
    with cs.config.set({"cache.chunk_bytes": 1 << 20}):
        a = cs.array(np.arange(10), chunks=(5,))
        _ = a[:]
        assert len(chunk_cache.shared()) > 0
        scratch.scratch_buffer((1000,), np.float64)
        assert scratch.held_bytes() > 0
        reset()
        assert len(chunk_cache.shared()) == 0
        assert scratch.held_bytes() == 0
        assert int(a[3]) == 3


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_gets_a_new_runtime_keeping_what_must_survive():
    parent = current()
    key = ("http://probe.invalid", "bucket")
    conditional_probes().get(key, lambda: Conditions(True, True), "test")
    parent.part(ObstoreState).used_in = os.getpid()
    parent_cache = chunk_cache.shared()
    parent_maps = map_cache()
    parent.pool.executor()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (child)
        try:
            child = current()
            ok = (child is not parent
                  and child.pool is not parent.pool and child.buffers is not parent.buffers
                  and conditional_probes().known(key) == Conditions(True, True)
                  and child.part(ObstoreState).used_in == os.getppid()
                  and chunk_cache.shared() is parent_cache  # arrays of the child use it
                  and map_cache() is not parent_maps
                  and child.pool.run_batched(lambda x: -x, list(range(50)))
                  == [-x for x in range(50)])
            os.write(w, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    assert os.read(r, 8) == b"1" and status == 0
    assert current() is parent
