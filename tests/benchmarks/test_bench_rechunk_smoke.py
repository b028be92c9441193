"""The rechunk benchmark runs at tiny size so it never rots (no timing assertions)."""

import math

from benchmarks import bench_rechunk


def test_bench_rechunk_tiny(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # in this process (no child interpreter per run); the child route is run by the S3
    # and CLI smokes
    rows = bench_rechunk.main(["--tiny", "--methods", "chunkstore,dask-tasks", "--in-process"])
    assert {(r["case"], r["method"]) for r in rows} == {
        ("rechunk", "chunkstore"), ("rechunk", "dask-tasks"),
        ("transpose", "chunkstore"), ("transpose", "dask-tasks")}
    for r in rows:
        assert r["correct"]
        assert math.isfinite(r["wall_s"]) and r["wall_s"] > 0
        assert len(r["peak_rss_mb"]) == 2 and all(p > 0 for p in r["peak_rss_mb"])
    assert (tmp_path / "bench-out" / "bench_rechunk.json").exists()
