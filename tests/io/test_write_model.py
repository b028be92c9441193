"""Hypothesis stateful test: threads writing random aligned and unaligned, disjoint regions
of sharded and unsharded arrays at the same time, checked against a NumPy model after
every step. Any lost update (a read-modify-write of a chunk or shard overwriting another
writer's region) shows as a mismatch."""

from __future__ import annotations

import shutil
import tempfile
import threading

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import chunkstore as cs

SHAPE = (24, 20)


@st.composite
def disjoint_regions(draw, n_max: int = 4):
    """Up to ``n_max`` regions with disjoint row ranges (each its own column range)."""
    cuts = sorted(draw(st.sets(st.integers(1, SHAPE[0] - 1), max_size=n_max - 1)))
    bounds = [0, *cuts, SHAPE[0]]
    regions = []
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        lo = draw(st.integers(0, SHAPE[1] - 1))
        hi = draw(st.integers(lo + 1, SHAPE[1]))
        r0 = draw(st.integers(a, b - 1))
        r1 = draw(st.integers(r0 + 1, b))
        regions.append((slice(r0, r1), slice(lo, hi)))
    return regions


class ConcurrentWriters(RuleBasedStateMachine):
    """One array, its NumPy model, and rounds of simultaneous writers."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.mkdtemp(prefix="chunkstore-model-")
        self.counter = 0

    @initialize(sharded=st.booleans(), local=st.booleans(),
                chunks=st.sampled_from([(4, 5), (3, 7), (24, 20), (5, 4)]))
    def make_array(self, sharded: bool, local: bool, chunks: tuple[int, int]) -> None:
        store = cs.LocalStore(self.tmp) if local else cs.MemoryStore()
        shards = (chunks[0] * 2, chunks[1] * 2) if sharded else None
        self.array = cs.create_array(store, shape=SHAPE, chunks=chunks, shards=shards,
                                     dtype="i4", fill_value=-1, overwrite=True)
        self.model = np.full(SHAPE, -1, dtype="i4")

    def _value(self) -> int:
        self.counter += 1
        return self.counter

    @rule(regions=disjoint_regions())
    def concurrent_writes(self, regions) -> None:
        values = [self._value() for _ in regions]
        barrier = threading.Barrier(len(regions))
        errors: list[BaseException] = []

        def write(region, value) -> None:
            # each writer has its own handle, as separate processes would
            mine = cs.open_array(self.array.store, mode="r+")
            barrier.wait()
            try:
                mine[region] = value
            except BaseException as e:  # surfaced below
                errors.append(e)

        threads = [threading.Thread(target=write, args=(r, v))
                   for r, v in zip(regions, values, strict=True)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        for region, value in zip(regions, values, strict=True):
            self.model[region] = value

    @rule(writer_count=st.integers(2, 4))
    def strided_writers(self, writer_count: int) -> None:
        """Writers of interleaved elements: every chunk is shared by all of them."""
        values = [self._value() for _ in range(writer_count)]
        barrier = threading.Barrier(writer_count)

        def write(w: int) -> None:
            mine = cs.open_array(self.array.store, mode="r+")
            barrier.wait()
            mine[:, w::writer_count] = values[w]

        threads = [threading.Thread(target=write, args=(w,)) for w in range(writer_count)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for w in range(writer_count):
            self.model[:, w::writer_count] = values[w]

    @rule(region=disjoint_regions(n_max=1))
    def single_write(self, region) -> None:
        value = self._value()
        self.array[region[0]] = value
        self.model[region[0]] = value

    @invariant()
    def matches_model(self) -> None:
        if hasattr(self, "array"):
            fresh = cs.open_array(self.array.store, mode="r")
            np.testing.assert_array_equal(fresh[...], self.model)

    def teardown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


ConcurrentWriters.TestCase.settings = settings(
    max_examples=25, stateful_step_count=8, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
TestConcurrentWriters = ConcurrentWriters.TestCase
