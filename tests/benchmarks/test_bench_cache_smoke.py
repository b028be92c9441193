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
