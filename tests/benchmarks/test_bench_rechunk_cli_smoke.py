"""The rechunk benchmark's row on a cluster started from the dask CLI with moto's S3 server
runs at tiny size, and leaves no process behind (no timing assertions)."""

import math

import psutil
import pytest

from benchmarks import bench_rechunk

pytestmark = pytest.mark.starts_first  # a real cluster or server: see tests/conftest.py


def test_bench_rechunk_cli_tiny(tmp_path, monkeypatch):
    pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    monkeypatch.chdir(tmp_path)
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    # both rows in this process on one CLI cluster (scheduler, 2 workers with their
    # nannies and the S3 server: 6 interpreter starts per cluster); a run in a child
    # that is killed if it hangs, on a fresh cluster, as a full run does: the S3 smoke
    # (test_bench_rechunk_modes.test_s3_rows_tiny)
    rows = bench_rechunk.main(["--tiny", "--cases", "rechunk,transpose", "--methods",
                               "chunkstore-cli-s3", "--in-process"])
    assert {(r["case"], r["method"]) for r in rows} == {
        ("rechunk", "chunkstore-cli-s3"), ("transpose", "chunkstore-cli-s3")}
    for r in rows:
        assert r["correct"] and not r["memory_events"], r
        assert math.isfinite(r["wall_s"]) and r["wall_s"] > 0
        assert len(r["peak_rss_mb"]) == 2 and all(p > 0 for p in r["peak_rss_mb"])
        assert r["predicted_worker_mb"] > 0 and r["target_stored_mb"] > 0
        assert r["scheduler"].startswith("tcp://127.0.0.1:")
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    assert not left, [p.cmdline() for p in left]
