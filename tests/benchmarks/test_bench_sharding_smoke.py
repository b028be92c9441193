"""The sharding benchmark runs at tiny size so it never rots (no timing assertions)."""

import math

import pytest

from benchmarks import bench_sharding


def test_bench_sharding_tiny(tmp_path, monkeypatch):
    pytest.importorskip("zarr")
    monkeypatch.chdir(tmp_path)
    rows = bench_sharding.main(["--tiny", "--no-s3"])
    by = {(r["case"], r["library"]): r for r in rows}
    for library in ("chunkstore", "zarr-python"):
        for case in ("read-inner-cold-local", "read-inner-warm-local"):
            r = by[(case, library)]
            assert r["correct"] and math.isfinite(r["seconds"]) and r["seconds"] > 0
            # only the index and one inner chunk, never the whole shard
            assert 0 < r["fetched_bytes"] < r["shard_bytes"] / 8
    cold = by[("read-inner-cold-local", "chunkstore")]
    # the index, then the chunk with the index again (checked in the same round trip)
    assert (cold["requests"], cold["round_trips"]) == (3, 2)
    assert by[("read-inner-warm-local", "chunkstore")]["round_trips"] == 1
    for case in ("write-aligned", "write-unaligned"):  # conditional commits: never lost
        assert by[(case, "chunkstore+ThreadSynchronizer")]["correct"]
        assert by[(case, "chunkstore+no-sync")]["correct"]
    assert (tmp_path / "bench-out" / "bench_sharding.json").exists()
