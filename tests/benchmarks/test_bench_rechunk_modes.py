"""bench_rechunk's peers in their own environments, its S3 rows and its rows beyond the
machine's memory, at tiny sizes or without running them (no timing assertions)."""

import math

import numcodecs
import numpy as np
import psutil
import pytest

from benchmarks import bench_rechunk, rechunk_beyond, rechunk_peers, rechunk_s3
from benchmarks.rechunk_measure import pattern
from tests.multiproc import start_fork_server

pytestmark = pytest.mark.starts_first  # a real cluster or server: see tests/conftest.py


def test_tiny_makes_no_peer_environment(tmp_path, monkeypatch):
    # --tiny (CI) never downloads packages: a peer whose environment is missing is skipped
    monkeypatch.chdir(tmp_path)
    assert rechunk_peers.peer_env("cubed", create=False) is None
    src = tmp_path / "src.zarr"
    assert rechunk_peers.run_cubed(src, tmp_path / "dst", tmp_path / "w", (8, 8), 10**6,
                                   None, create_env=False) is None
    assert rechunk_peers.run_rechunker(src, tmp_path / "dst", tmp_path / "t", (8, 8), 10**6,
                                       create_env=False) is None
    rows = bench_rechunk.main(["--tiny", "--cases", "rechunk", "--methods",
                               "rechunker,cubed"])
    assert rows == []
    assert not list((tmp_path / "bench-out").glob("*-venv"))
    assert set(rechunk_peers.PEER_PINS) == {"rechunker", "cubed"}


def test_s3_method_names():
    assert rechunk_s3.parse("chunkstore-s3") == ("chunkstore", 0.0)
    assert rechunk_s3.parse("dask-p2p-s3-20ms") == ("dask-p2p", 20.0)
    assert rechunk_s3.parse("chunkstore") is None and rechunk_s3.parse("cubed-s3") is None
    assert all(rechunk_s3.parse(m) for m in rechunk_s3.METHODS)
    assert set(rechunk_s3.METHODS) <= set(bench_rechunk.DEFAULT_METHODS)


def test_s3_rows_tiny(tmp_path, monkeypatch):
    """chunkstore's S3 row with 20 ms per request, in a child that is killed if it hangs,
    on a fresh LocalCluster, as a full run does (dask's S3 row: the rechunk smoke, on its
    shared cluster)."""
    pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    monkeypatch.chdir(tmp_path)
    start_fork_server()  # the suite's: a process started before this test, not by it
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    rows = bench_rechunk.main(["--tiny", "--cases", "rechunk", "--methods",
                               "chunkstore-s3-20ms"])
    check_s3_rows(rows, "chunkstore-s3-20ms", 20.0)
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    assert not left, [p.cmdline() for p in left]


def check_s3_rows(rows: list[dict], method: str, latency: float) -> None:
    """``rows`` are one S3 row of ``method``, correct, the work done through the server."""
    assert [r["method"] for r in rows] == [method]
    r = rows[0]
    assert r["s3_latency_ms"] == latency
    assert r["correct"], r
    assert math.isfinite(r["wall_s"]) and len(r["peak_rss_mb"]) == 2
    # the work went through the S3 server: chunks read and written there
    assert r["s3_requests_by_kind"].get("PUT", 0) > 0 and r["s3_mb_out"] > 0
    assert r["target_stored_mb"] > 0


def test_big_cases_keep_the_chunks_and_grow_the_array():
    for gib in (4, 8, 32):
        cases = rechunk_beyond.big_cases(gib, 512_000_000)
        for shape, chunks, _target, _axes, max_mem in cases.values():
            assert math.prod(shape) * 4 == gib * 2**30
            assert max_mem == 512_000_000
            assert all(n % c == 0 for n, c in zip(shape, chunks, strict=True))
        assert cases["rechunk"][1:3] == ((32768, 32), (32, 32768))
        assert cases["transpose"][1:4] == ((1024, 1024, 16), (16, 1024, 1024), (2, 1, 0))
    assert rechunk_beyond.big_cases(32, 1)["transpose"][0] == (2048, 2048, 2048)
    with pytest.raises(ValueError):
        rechunk_beyond.big_cases(6, 1)


def test_pattern_compresses_and_no_two_chunks_alike():
    codec = numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE)
    shape, chunks = (65536, 131072), (32768, 32)  # the 32 GiB rechunk's source
    grid = [(r, c) for r in (0, 1) for c in (*range(24), *range(2048, 4096, 256), 4095)]
    blocks = [pattern((slice(32768 * r, 32768 * (r + 1)), slice(32 * c, 32 * (c + 1))),
                      shape, chunks) for r, c in grid]
    assert all(b.dtype == np.float32 and b.min() != b.max() for b in blocks)
    assert len({b.tobytes() for b in blocks}) == len(blocks)
    assert all(b.nbytes / len(codec.encode(b)) > 3 for b in blocks[:5])
    # an element has the same value whatever the region it is made in
    shape3, chunks3 = (64, 64, 64), (32, 32, 16)
    whole = pattern((slice(0, 64),) * 3, shape3, chunks3)
    assert np.array_equal(whole[8:40, 4:8, 60:64],
                          pattern((slice(8, 40), slice(4, 8), slice(60, 64)), shape3, chunks3))
    assert len({whole[i:i + 32, j:j + 32, k:k + 16].tobytes() for i in (0, 32)
                for j in (0, 32) for k in range(0, 64, 16)}) == 16


def test_scaling_table(capsys):
    rows = [{"base_case": "rechunk", "method": "chunkstore", "gib": g, "wall_s": w,
             "cpu_s": 2 * w, "peak_rss_mb": [400.0, 410.0], "bound_mb": 712.0,
             "correct": True} for g, w in ((32, 160.0), (4, 10.0))]
    rechunk_beyond.print_scaling(rows)
    out = capsys.readouterr().out
    assert "| rechunk | chunkstore | 4 | 10.0 | 2.50 | 1.00 | 5.00 | 1.00 |" in out
    assert "| rechunk | chunkstore | 32 | 160.0 | 5.00 | 2.00 | 10.00 | 2.00 |" in out


def test_s3_limit_row_tiny(tmp_path, monkeypatch, capsys):
    """The limit on S3 (20 ms per request): one GET per source chunk in the first stage,
    one PUT per chunk in the last, nothing else through the server; every object written,
    and the table gives chunkstore's S3 row its fraction of this limit."""
    pytest.importorskip("moto.server")
    pytest.importorskip("obstore")
    monkeypatch.chdir(tmp_path)
    rows = bench_rechunk.main(["--tiny", "--cases", "rechunk", "--methods",
                               "limit-s3-20ms"])
    check_s3_rows(rows, "limit-s3-20ms", 20.0)
    r = rows[0]
    chunks = 1024 // 32  # the tiny rechunk's source: (1024, 1024) in (1024, 32) chunks
    assert r["stages"] == 2
    assert r["s3_requests_by_kind"] == {"GET": chunks, "PUT": chunks}
    assert not list(tmp_path.glob("**/limit-stage-*/*"))  # the local stage's files removed
    capsys.readouterr()
    cs_row = {**r, "method": "chunkstore-s3-20ms", "wall_s": 2 * r["wall_s"]}
    bench_rechunk.print_table([r, cs_row])
    assert "chunkstore-s3-20ms: 0.50 of the limit on S3" in capsys.readouterr().out
