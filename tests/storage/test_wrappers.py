"""Wrapper stores (``chunkstore.storage.wrappers``): the store contract holds through them,
arrays read and write through them unchanged, and what they add (counts, latency) is real."""

from __future__ import annotations

import pickle
import time
from typing import Any

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.storage import LatencyStore, LocalStore, MemoryStore, MetricsStore, Store
from chunkstore.testing.store_contract import StoreContract


class TestMetricsOverMemory(StoreContract):
    conditional_writes = conditional_delete = True

    def location(self, request: pytest.FixtureRequest) -> dict:
        return {}

    def make_store(self, location: dict) -> Store:
        return MetricsStore(MemoryStore(location))


class TestLatencyOverLocal(StoreContract):
    conditional_writes = conditional_delete = True

    def make_store(self, location: Any) -> Store:
        return LatencyStore(LocalStore(location / "root.zarr"), 0.0)


def test_array_through_wrappers_equals_numpy_and_the_bytes_of_the_inner_store(tmp_path):
    data = np.arange(60 * 70, dtype="i4").reshape(60, 70)
    inner = LocalStore(tmp_path / "x.zarr")
    store = MetricsStore(LatencyStore(inner, 0.0))
    a = cs.create_array(store, shape=data.shape, dtype="i4", chunks=(16, 16), shards=(32, 32))
    a[:] = data
    a[5:40, 3:9] = -1
    expect = data.copy()
    expect[5:40, 3:9] = -1
    np.testing.assert_array_equal(a[:], expect)
    np.testing.assert_array_equal(cs.open_array(inner, mode="r")[:], expect)
    assert sorted(inner.list()) == sorted(store.list())
    assert store.calls["commit_many"] >= 1 and store.bytes_read > 0


def test_metrics_count_one_batched_call_once_and_the_bytes_it_returned():
    store = MetricsStore(MemoryStore())
    store.set_many({"a": b"12345", "b": b"xy"})
    store.reset()
    assert store.get_many(["a", "b", "missing"]) == [b"12345", b"xy", None]
    assert store.get_ranges([("a", (1, 3)), ("b", None)]) == [b"23", b"xy"]
    assert dict(store.calls) == {"get_many": 1, "get_ranges": 1}
    assert store.requests == 2 and store.bytes_read == 5 + 2 + 2 + 2
    with store.read_session() as reader:
        out = np.empty(5, dtype="u1")
        assert reader.read_into("a", out) and bytes(out) == b"12345"
    assert store.calls["read_into"] == 1 and store.bytes_read == 16



def test_wrappers_forward_pinned_ranges_and_metrics_count_them():
    """``get_versioned_ranges`` goes through a wrapper to the inner store (generations,
    pins and CHANGED included) and counts once, with the bytes it returned."""
    from chunkstore.storage.base import ABSENT, ANY, CHANGED

    inner = MemoryStore()
    store = MetricsStore(LatencyStore(inner, 0))
    store.set("a", b"12345")
    store.reset()
    (part, gen), (missing, absent) = store.get_versioned_ranges(
        [("a", (1, 3), ANY), ("nope", (0, 1), ANY)])
    assert (part, missing, absent) == (b"23", None, ABSENT) and gen is not ANY
    assert store.get_versioned_ranges([("a", (0, 2), gen)]) == [(b"12", gen)]
    inner.set("a", b"54321")  # replaced: a read pinned to the old version is refused
    assert store.get_versioned_ranges([("a", (0, 2), gen)]) == [(None, CHANGED)]
    inner.set("a", b"12345")  # the same bytes again: the same version
    assert store.get_versioned_ranges([("a", (0, 2), gen)])[0][0] == b"12"
    assert dict(store.calls) == {"get_versioned_ranges": 4}
    assert store.bytes_read == 2 + 2 + 2


def test_latency_waits_once_per_call(tmp_path):
    store = LatencyStore(MemoryStore(), 0.05)
    store.set("k", b"v")
    t0 = time.perf_counter()
    assert store.get_many(["k"] * 20) == [b"v"] * 20
    one = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(3):
        store.get("k")
    three = time.perf_counter() - t0
    assert 0.05 <= one and 0.15 <= three


def test_wrappers_pickle_read_only_and_location_follow_the_inner_store(tmp_path):
    inner = LocalStore(tmp_path / "x.zarr")
    store = LatencyStore(inner, 0.01)
    back = pickle.loads(pickle.dumps(store))
    assert isinstance(back, LatencyStore) and back.seconds == 0.01
    assert back.location() == inner.location() == store.location()
    ro = store.with_read_only()
    assert isinstance(ro, LatencyStore) and ro.read_only and not store.read_only
    with pytest.raises(cs.errors.ReadOnlyError):
        ro.set("k", b"v")
    assert store.capabilities is inner.capabilities


def test_bad_arguments_are_refused_naming_the_wrapper():
    with pytest.raises(TypeError, match="MetricsStore wraps a chunkstore Store"):
        MetricsStore({})
    with pytest.raises(ValueError, match="LatencyStore: seconds"):
        LatencyStore(MemoryStore(), -1)
