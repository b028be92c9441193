"""The rechunk benchmark runs at tiny size so it never rots (no timing assertions)."""

import importlib.util
import math

import psutil

from benchmarks import bench_rechunk
from benchmarks.rechunk_measure import local_cluster
from tests.benchmarks.test_bench_rechunk_modes import check_s3_rows
from tests.multiproc import start_fork_server


def test_bench_rechunk_tiny(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # in this process (no child interpreter per run), the rows on one cluster (a
    # LocalCluster start is seconds of CPU); the child route and a fresh cluster per row
    # are run by the S3 and CLI smokes
    with local_cluster(2_000_000) as cluster:
        rows = bench_rechunk.main(["--tiny", "--methods", "chunkstore,dask-tasks",
                                   "--in-process", "--scheduler", cluster.scheduler_address])
        _dask_s3_row(cluster.scheduler_address)
    assert {(r["case"], r["method"]) for r in rows} == {
        ("rechunk", "chunkstore"), ("rechunk", "dask-tasks"),
        ("transpose", "chunkstore"), ("transpose", "dask-tasks")}
    for r in rows:
        assert r["correct"]
        assert math.isfinite(r["wall_s"]) and r["wall_s"] > 0
        assert len(r["peak_rss_mb"]) == 2 and all(p > 0 for p in r["peak_rss_mb"])
    assert (tmp_path / "bench-out" / "bench_rechunk.json").exists()


def _dask_s3_row(scheduler: str) -> None:
    """dask's S3 row (tasks, no added latency) on the cluster at ``scheduler``: correct,
    through the S3 server, which is gone afterwards."""
    if not all(importlib.util.find_spec(m) for m in ("moto", "s3fs")):
        return  # (as the S3 smokes, which skip)
    start_fork_server()  # the suite's: a process started before this test, not by it
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    rows = bench_rechunk.main(["--tiny", "--cases", "rechunk", "--methods", "dask-tasks-s3",
                               "--in-process", "--scheduler", scheduler])
    check_s3_rows(rows, "dask-tasks-s3", 0.0)
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    assert not left, [p.cmdline() for p in left]

