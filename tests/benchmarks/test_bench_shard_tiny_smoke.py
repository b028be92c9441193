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
    rows = bench_shard_tiny.main(["--tiny", "--libraries", "chunkstore,tensorstore"])
    by = {(r["case"], r["library"]): r for r in rows}
    for n in (100, 1000):
        for op in ("write", "read"):
            for library in ("chunkstore", "tensorstore"):
                r = by[(f"tiny-in-shards-{n} local {op}", library)]
                assert r["correct"] and r["cross_read"]
                assert math.isfinite(r["seconds"]) and r["seconds"] > 0
                assert r["chunks_per_shard"] == n
            assert by[(f"tiny-in-shards-{n} local {op}", "chunkstore")][
                "ratio_vs_tensorstore"] > 0
    assert (tmp_path / "bench-out" / "bench_shard_tiny.json").exists()


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
