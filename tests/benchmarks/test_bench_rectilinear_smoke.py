"""The rectilinear to_store benchmark runs at tiny size so it never rots (no timing
assertions)."""

import math

import pytest

from benchmarks import bench_rectilinear

pytest.importorskip("distributed")
pytest.importorskip("zarr")


def test_bench_rectilinear_tiny(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # the three methods on one cluster (a LocalCluster start is seconds of CPU), made as
    # a run makes its own
    with bench_rectilinear.local_cluster(8 * bench_rectilinear.MiB) as cluster:
        rows = bench_rectilinear.main(["--tiny", "--scheduler", cluster.scheduler_address])
    assert [r["method"] for r in rows] == list(bench_rectilinear.METHODS)
    for r in rows:
        assert r["correct"], r
        assert math.isfinite(r["wall_s"]) and r["wall_s"] > 0
        assert len(r["peak_rss_mb"]) == 2 and all(p > 0 for p in r["peak_rss_mb"])
        assert r["blocks"] > 1
    assert rows[0]["wall_ratio"] == 1.0
    assert (tmp_path / "bench-out" / "bench_rectilinear.json").exists()
