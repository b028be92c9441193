"""The tiny-inner-chunks-in-shards benchmark runs at tiny size so it never rots (no
timing assertions): every library's read equals the data, and what chunkstore wrote
tensorstore reads (and the other way round)."""

import math

import pytest

from benchmarks import bench_shard_tiny


def test_bench_shard_tiny_tiny(tmp_path, monkeypatch):
    pytest.importorskip("zarr")
    pytest.importorskip("tensorstore")
    monkeypatch.chdir(tmp_path)
    rows = bench_shard_tiny.main(["--tiny", "--libraries",
                                  "chunkstore,tensorstore,numcodecs-alone"])
    by = {(r["case"], r["library"]): r for r in rows}
    for n in (100, 1000):
        for op in ("write", "read"):
            # numcodecs-alone's read equals the data too (Slot.read checks every read)
            for library in ("chunkstore", "tensorstore", "numcodecs-alone"):
                r = by[(f"tiny-in-shards-{n} local {op}", library)]
                assert r["correct"] and r["cross_read"]
                assert math.isfinite(r["seconds"]) and r["seconds"] > 0
                assert r["chunks_per_shard"] == n
            ours = by[(f"tiny-in-shards-{n} local {op}", "chunkstore")]
            assert ours["ratio_vs_tensorstore"] > 0 and ours["ratio_vs_numcodecs-alone"] > 0
    assert (tmp_path / "bench-out" / "bench_shard_tiny.json").exists()


def test_codec_alone_round_trips_and_writes_blosc_frames_of_each_inner_chunk():
    import numcodecs
    import numpy as np
    case = bench_shard_tiny.cases(tiny=True)[0]
    data = bench_shard_tiny.make_data(case)
    alone = bench_shard_tiny.ADAPTERS["numcodecs-alone"]
    frames = alone.new_target(case, None)
    alone.write(case, frames, data)
    assert len(frames) == data.size // math.prod(case.chunks)
    # frame 1 is the inner chunk at (0, 20): C order over the grid of inner chunks
    second = np.frombuffer(numcodecs.Blosc().decode(frames[1]), data.dtype).reshape(20, 20)
    assert np.array_equal(second, data[:20, 20:40])
    assert np.array_equal(alone.read(case, frames), data)


def test_bench_shard_tiny_cross_read_catches_a_wrong_shard(tmp_path, monkeypatch):
    """A chunkstore that wrote other values is caught by tensorstore's read."""
    pytest.importorskip("tensorstore")
    monkeypatch.chdir(tmp_path)
    lib = bench_shard_tiny.ADAPTERS["chunkstore"]
    real = type(lib).write
    monkeypatch.setattr(type(lib), "write", lambda self, case, target, data: real(
        self, case, target, data + 1))
    monkeypatch.setattr(type(lib), "read", lambda self, case, target: bench_shard_tiny
                        .make_data(case))  # its own read hides the wrong values
    with pytest.raises(AssertionError, match="tensorstore reading chunkstore"):
        bench_shard_tiny.main(["--tiny", "--libraries", "chunkstore,tensorstore",
                               "--cases", "100"])
