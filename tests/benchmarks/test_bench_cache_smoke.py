"""The cache benchmark runs at tiny size so it never rots (no timing assertions); the
cached repeat reads of chunkstore send no request to the S3 endpoint."""

import pytest

pytest.importorskip("moto.server")
pytest.importorskip("s3fs")
pytest.importorskip("zarr")
pytest.importorskip("tensorstore")

from benchmarks import bench_cache  # noqa: E402


def test_bench_cache_tiny(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = bench_cache.main(["--tiny", "--methods", "chunkstore,chunkstore+cache,tensorstore"])
    cases = {(r["case"], r["method"]) for r in rows}
    for source in ("local", "s3"):
        for kind in ("first read", "repeated read"):
            for m in ("chunkstore", "chunkstore +cache", "tensorstore"):
                assert (f"{source} region, {kind}", m) in cases
    s3 = {r["method"]: r for r in rows if r["case"] == "s3 region, repeated read"}
    assert s3["chunkstore +cache"]["requests_per_read"] == 0
    assert s3["chunkstore"]["requests_per_read"] > 0


def test_the_s3_rows_end_without_unclosed_sessions(tmp_path):
    """The s3fs sessions the run opens (its own, zarr-python's) are closed: no aiohttp
    "Unclosed client session / connector" at the end of the run."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "PYTHONWARNINGS": "default"}
    run = subprocess.run([sys.executable, "-m", "benchmarks.bench_cache", "--tiny", "--sources",
                          "s3", "--methods", "chunkstore,zarr-python,zarrs"],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr
    assert "s3 region, repeated read | zarr-python" in run.stdout
    for text in ("Unclosed client session", "Unclosed connector", "different loop"):
        assert text not in run.stdout + run.stderr, run.stdout + run.stderr
