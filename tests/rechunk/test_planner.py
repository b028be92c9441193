"""The rechunk planner is pure arithmetic: tested without Dask or IO."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkstore.io.buffers import contiguous_in
from chunkstore.rechunk.planner import (
    BLOCK_BYTES,
    PlanError,
    Stage,
    plan_rechunk,
)
from chunkstore.sizes import parse_bytes


def test_parse_bytes():
    import chunkstore.dask
    # one parser of byte sizes (issue 31): the Dask layer's public name is sizes' function
    assert chunkstore.dask.parse_bytes is parse_bytes
    with pytest.raises(ValueError, match="byte size"):
        parse_bytes("1.2.3MiB")  # the fix the planner's copy lacked
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


@pytest.mark.parametrize("tiles", [17, 18])
def test_a_prime_number_of_tiles_still_gets_tall_intermediate_chunks(tiles):
    """17 tiles of 512 (a prime number): the intermediate chunks need not divide the
    axis, so they are as tall as for 18 tiles instead of one tile (8x the objects)."""
    side = 512 * tiles
    stages = plan_rechunk((side, side), (512, 512), (side, 128), 4, "16MiB")
    assert len(stages) == 2
    inter = stages[0].target_chunks
    assert inter == stages[1].source_chunks and inter[1] == 128
    assert inter[0] >= 4096 and inter[0] % 512 == 0
    assert all(s.task_memory <= parse_bytes("16MiB") for s in stages)


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
    budget = data.draw(st.integers(one * itemsize * 3, one * itemsize * 400))
    try:
        stages = plan_rechunk(shape, cx, cy, itemsize, budget)
    except PlanError:
        return  # allowed only when no intermediate fits; the message says so
    _check(stages, shape, cx, cy, itemsize, budget)


# -- the memory model ----------------------------------------------------------------------
MiB = 2**20


def test_issue_plans_model_terms():
    """The figures of the benchmark's S3 rechunk (4 GiB float32 on 2 workers x 1 thread,
    pool of 8 threads): per worker measured 481 MiB; predicted 572 MiB when the model
    counted the 8 pool threads as encoders of stage 2, 524 MiB with the 2 (a thread per
    core) the writes use."""
    stages = plan_rechunk((32768, 32768), (32768, 32), (32, 32768), 4, 512_000_000,
                          codec_threads=8)
    first, second = stages
    assert first.block == (32768, 2048) and first.target_chunks == (2048, 2048)
    # a quarter of the block in flight, whole chunks; source chunks land strided
    assert first.read_piece == (32768, 512) and first.write_piece == (8192, 2048)
    # 16 strided source chunks per piece: 8 threads decode into scratch; 4 target chunks
    # of 16 MiB per piece, contiguous: each encoding thread holds 2 chunks, and the
    # 32 MiB write budget (threading.write_bytes) lets 2 threads encode at once
    assert first.memory == {"block": 256 * MiB, "compressed": 64 * MiB,
                            "decode_scratch": 8 * 4 * MiB, "encode_copy": 2 * 2 * 16 * MiB,
                            "total": 416 * MiB}
    # stage 2: target chunks of 4 MiB, each of the 2 encoding threads (one per core: S3's
    # commits do not block) holds its output and trimmed copy
    assert second.memory["encode_copy"] == 2 * 2 * 4 * MiB
    assert second.memory["total"] == 400 * MiB
    (t,) = plan_rechunk((1024,) * 3, (16, 1024, 1024), (16, 1024, 1024), 4, 512_000_000,
                        transposed=True, codec_threads=8)
    # the transposed source decodes a piece (one chunk) in its own order, then permutes it;
    # a one-chunk piece is encoded by the task's thread: its output is the piece in flight
    # blocks stop at BLOCK_BYTES (64 MiB): 64 tasks to balance, not 13 of 320 MiB
    assert t.block == (16, 1024, 1024)
    assert t.memory == {"block": 64 * MiB, "compressed": 64 * MiB, "decode_scratch": 64 * MiB,
                        "encode_copy": 0, "total": 192 * MiB}


def test_contiguous_in():
    assert contiguous_in((4, 10), (8, 10))
    assert not contiguous_in((8, 5), (8, 10))
    assert contiguous_in((1, 1, 5), (3, 4, 10))
    assert not contiguous_in((1, 2, 5), (3, 4, 10))
    assert contiguous_in((2, 4, 10), (3, 4, 10))


def test_model_terms():
    # strided target chunks need an encode copy per codec thread; sharded targets hold
    # the encoded inner chunks and the assembled shard (twice the piece)
    s = Stage((64, 64), (64, 8), (8, 64), (64, 64), 8, codec_threads=2)
    assert s.memory["decode_scratch"] == 2 * 64 * 8 * 8
    assert s.memory["encode_copy"] == 2 * 2 * 64 * 8 * 8  # output buffer + trimmed copy
    s2 = Stage((64, 64), (8, 64), (64, 8), (64, 64), 8, codec_threads=3)
    # a piece holds two strided target chunks: two of the three threads encode at once,
    # each with a contiguous copy, the output buffer and its trimmed copy
    assert s2.memory["decode_scratch"] == 0 and s2.memory["encode_copy"] == 2 * 3 * 64 * 8 * 8
    plain = Stage((64, 64), (8, 64), (32, 64), (64, 64), 8)
    sharded = Stage((64, 64), (8, 64), (32, 64), (64, 64), 8, write_chunks=(8, 64))
    assert sharded.memory["compressed"] == 2 * plain.memory["compressed"]
    for st_ in (s, s2, plain, sharded):
        m = st_.memory
        assert m["total"] >= m["block"] + m["compressed"] // 2
        assert m["total"] <= m["block"] + m["compressed"] + m["decode_scratch"] \
            + m["encode_copy"]


def test_blocks_grow_until_the_model_says_stop():
    budget = 64 * MiB
    (s,) = plan_rechunk((4096, 4096), (4096, 64), (4096, 64), 4, budget)
    assert s.task_memory <= budget
    bigger = Stage(s.shape, s.source_chunks, s.target_chunks,
                   (s.block[0], s.block[1] + 64), 4)
    assert bigger.task_memory > budget  # one more column of chunks would not fit


def test_blocks_grow_up_to_block_bytes_only():
    # aligned blocks of 1 MiB grow to BLOCK_BYTES, not to what max_mem would allow
    (s,) = plan_rechunk((8192, 8192), (256, 1024), (256, 1024), 4, 2 * 2**30)
    assert s.block_bytes == BLOCK_BYTES and s.ntasks == 4
    (small,) = plan_rechunk((8192, 8192), (256, 1024), (256, 1024), 4, 2 * 2**30,
                            block_bytes=2**20)
    assert small.block == (256, 1024)
    # an aligned block larger than BLOCK_BYTES is kept whole (it cannot be cut)
    first, _ = plan_rechunk((32768, 32768), (32768, 32), (32, 32768), 4, 512_000_000)
    assert first.block_bytes > BLOCK_BYTES


def test_block_region_matches_blocks():
    s = Stage((10, 7, 5), (3, 2, 5), (3, 2, 5), (3, 4, 5), 1)
    assert [s.block_region(j) for j in range(s.ntasks)] == s.blocks()


def test_more_codec_threads_smaller_blocks():
    few = plan_rechunk((8192, 8192), (8192, 16), (16, 8192), 4, 96 * MiB, codec_threads=2)
    many = plan_rechunk((8192, 8192), (8192, 16), (16, 8192), 4, 96 * MiB, codec_threads=16)
    assert all(s.task_memory <= 96 * MiB for s in few + many)
    # stage 1 decodes many strided source chunks per piece: one scratch per codec thread
    assert many[0].memory["decode_scratch"] == 8 * few[0].memory["decode_scratch"]


def test_raw_intermediate_needs_no_codec_buffers():
    """A local intermediate is stored uncompressed: stage 1 writes it from the block
    without encoding, stage 2 reads it from the mapped file without a decode scratch."""
    packed = plan_rechunk((32768, 32768), (32768, 32), (32, 32768), 4, 512_000_000)
    raw = plan_rechunk((32768, 32768), (32768, 32), (32, 32768), 4, 512_000_000,
                       raw_intermediate=True)
    assert [(s.raw_source, s.raw_target) for s in raw] == [(False, True), (True, False)]
    assert raw[0].memory["encode_copy"] == 0 and raw[1].memory["decode_scratch"] == 0
    assert all(r.task_memory < p.task_memory for r, p in zip(raw, packed, strict=True))
    # a one-stage plan has no intermediate: nothing changes
    (one,) = plan_rechunk((1024,) * 3, (16, 1024, 1024), (16, 1024, 1024), 4, 512_000_000,
                          transposed=True, raw_intermediate=True)
    assert not one.raw_source and not one.raw_target


def test_limit_notes_use_the_thresholds_given():
    """The report is pure: the nanny's thresholds come from the caller (the Dask layer
    reads them from dask.config), dask's defaults otherwise."""
    from chunkstore.rechunk.report import NANNY_THRESHOLDS, limit_notes
    assert NANNY_THRESHOLDS["spill"] == 0.7
    assert limit_notes(60, 1, 100) == []
    notes = limit_notes(60, 1, 100, {"spill": 0.5})
    assert len(notes) == 1 and "spills" in notes[0]


def test_the_model_adds_up_the_engines_own_buffers(monkeypatch):
    """One source (issue 31): the planner's codec terms are ``io.buffers``' figures, the
    ones the engine's write batching (``rmw``) uses, so an engine change moves the
    bound with it instead of silently breaking it: the encoding threads are those
    ``commit_threads`` gives the writes (one per core; two per core on a local target,
    whose commits block)."""
    from chunkstore.io import buffers, rmw
    assert rmw.commit_threads is buffers.commit_threads
    args = ((64, 64), (64, 8), (8, 64), (64, 64), 8)
    chunk = 8 * 64 * 8
    remote = Stage(*args, codec_threads=4, pieces=1).memory["encode_copy"]
    assert remote == 2 * chunk * 2  # two encoders (cores), output buffer + trimmed copy
    local = Stage(*args, codec_threads=4, pieces=1, run_writes=True).memory["encode_copy"]
    assert local == 4 * chunk * 2  # two per core
    monkeypatch.setattr(buffers, "commit_threads", lambda *a, **k: (1, 1))
    assert Stage(*args, codec_threads=4, pieces=1).memory["encode_copy"] == chunk * 2


def test_intermediate_chunks_that_do_not_divide_the_axis_rechunk_exactly(tmp_path):
    """The plan of a prime number of tiles (17 x 17 of 64), run: its intermediate chunks
    (512 rows) leave a partial edge chunk, and the result equals the source."""
    import dask
    import numpy as np

    import chunkstore as cs
    import chunkstore.dask as csd
    side = 64 * 17
    x = np.arange(side * side, dtype="f4").reshape(side, side)
    src = cs.array(x, store=str(tmp_path / "s.zarr"), chunks=(64, 64))
    with dask.config.set(scheduler="synchronous"):
        plan = csd.rechunk(src, (side, 16), str(tmp_path / "t.zarr"), max_mem="256KiB")
        inter = plan.stages[0].target_chunks
        assert len(plan.stages) == 2 and side % inter[0] != 0 and inter[0] > 64, plan.stages
        plan.execute()
    out = cs.open_array(str(tmp_path / "t.zarr"), mode="r")
    assert out.chunks == (side, 16)
    np.testing.assert_array_equal(out[...], x)
