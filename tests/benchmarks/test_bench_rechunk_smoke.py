"""The rechunk benchmark runs at tiny size so it never rots (no timing assertions)."""

import math

from benchmarks import bench_rechunk
from benchmarks.rechunk_measure import local_cluster


def test_bench_rechunk_tiny(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # in this process (no child interpreter per run), the four rows on one cluster (a
    # LocalCluster start is seconds of CPU); the child route and a fresh cluster per row
    # are run by the S3 and CLI smokes
    with local_cluster(2_000_000) as cluster:
        rows = bench_rechunk.main(["--tiny", "--methods", "chunkstore,dask-tasks",
                                   "--in-process", "--scheduler", cluster.scheduler_address])
    assert {(r["case"], r["method"]) for r in rows} == {
        ("rechunk", "chunkstore"), ("rechunk", "dask-tasks"),
        ("transpose", "chunkstore"), ("transpose", "dask-tasks")}
    for r in rows:
        assert r["correct"]
        assert math.isfinite(r["wall_s"]) and r["wall_s"] > 0
        assert len(r["peak_rss_mb"]) == 2 and all(p > 0 for p in r["peak_rss_mb"])
    assert (tmp_path / "bench-out" / "bench_rechunk.json").exists()
