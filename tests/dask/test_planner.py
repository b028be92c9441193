"""The rechunk planner is pure arithmetic: tested without Dask or IO."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkstore.dask.planner import MEMORY_FACTOR, PlanError, parse_bytes, plan_rechunk


def test_parse_bytes():
    assert parse_bytes("1GiB") == 2**30
    assert parse_bytes("512MB") == 512 * 10**6
    assert parse_bytes("64 kib") == 64 * 1024
    assert parse_bytes(1000) == 1000
    with pytest.raises(ValueError, match="byte size"):
        parse_bytes("lots")


def _check(stages, shape, cx, cy, itemsize, budget):
    assert stages[0].source_chunks == tuple(cx)
    assert stages[-1].target_chunks == tuple(cy)
    for a, b in zip(stages, stages[1:], strict=False):
        assert a.target_chunks == b.source_chunks
    for s in stages:
        assert s.task_memory <= budget
        for n, blk, c_in, c_out in zip(shape, s.block, s.source_chunks, s.target_chunks,
                                       strict=True):
            # blocks end on both chunk grids (or cover the whole axis)
            assert blk >= n or (blk % c_in == 0 and blk % c_out == 0)
        covered = sum(math.prod(r.stop - r.start for r in reg) for reg in s.blocks())
        assert covered == math.prod(shape)


def test_issue_case_two_stages_within_budget():
    budget = 512 * 10**6
    stages = plan_rechunk((32768, 32768), (32768, 32), (32, 32768), 4, budget)
    _check(stages, (32768, 32768), (32768, 32), (32, 32768), 4, budget)
    assert len(stages) == 2
    # the intermediate is not degenerate: MiB-sized chunks, few tasks
    inter = stages[0].target_chunks
    assert math.prod(inter) * 4 >= 2**20
    assert sum(s.ntasks for s in stages) <= 128


def test_single_stage_when_aligned_block_fits():
    stages = plan_rechunk((100, 100), (10, 100), (100, 10), 8, "1MiB")
    assert len(stages) == 1 and stages[0].block == (100, 100)


def test_impossible_plan_refused_with_message():
    with pytest.raises(PlanError, match="source chunk"):
        plan_rechunk((1000, 1000), (1000, 1000), (10, 10), 8, "1MB")


def test_zero_length_axis():
    stages = plan_rechunk((0, 10), (5, 5), (1, 10), 8, "1MB")
    assert stages[0].ntasks == 0 and stages[0].blocks() == []


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_random_plans_are_aligned_and_bounded(data):
    ndim = data.draw(st.integers(1, 4))
    shape = tuple(data.draw(st.integers(1, 60)) for _ in range(ndim))
    cx = tuple(data.draw(st.integers(1, 20)) for _ in range(ndim))
    cy = tuple(data.draw(st.integers(1, 20)) for _ in range(ndim))
    itemsize = data.draw(st.sampled_from([1, 4, 8]))
    one = max(math.prod(min(c, n) for c, n in zip(ch, shape, strict=True)) for ch in (cx, cy))
    budget = data.draw(st.integers(one * itemsize * MEMORY_FACTOR, one * itemsize * 400))
    try:
        stages = plan_rechunk(shape, cx, cy, itemsize, budget)
    except PlanError:
        return  # allowed only when no intermediate fits; the message says so
    _check(stages, shape, cx, cy, itemsize, budget)
