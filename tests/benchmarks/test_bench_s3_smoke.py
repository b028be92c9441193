"""The S3 benchmark runs at tiny size so it never rots (no timing assertions)."""

import math

import pytest

pytest.importorskip("moto.server")
pytest.importorskip("s3fs")
pytest.importorskip("zarr")

from benchmarks import bench_s3  # noqa: E402
from chunkstore.storage.obstore.setup import available  # noqa: E402

KINDS = {"GET", "PUT", "HEAD", "LIST", "DELETE", "POST"}


def test_bench_s3_tiny(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = bench_s3.main(["--tiny", "--repeats", "1", "--group-size", "3"])
    array_cases = {"write", "read", "open array", "read one chunk", "read one element"}
    group_cases = {"create 2 groups of 3 arrays", "open group of 3 (plain)",
                   "open group of 3 (consolidated)"}
    ours = ("chunkstore", "chunkstore-fsspec")
    # zarrs is skipped (saying why) where it has no adapter for zarr-python's S3 store
    ran = {r["method"] for r in rows}
    assert ran >= {*ours, "zarr-python", "tensorstore"} and ran <= set(bench_s3.METHODS)
    with_groups = {m for m in ran if bench_s3.PEERS[m].groups}
    assert with_groups == ran - {"tensorstore", "obstore-alone"}
    assert {(r["case"], r["method"]) for r in rows} == (
        {(c, m) for c in array_cases for m in ran}
        | {(c, m) for c in group_cases for m in with_groups})
    for r in rows:
        assert r["correct"], r
        assert math.isfinite(r["wall_s"]) and r["wall_s"] > 0
        assert set(r["by_kind"]) <= KINDS and r["requests"] == sum(r["by_kind"].values())
        assert r["requests"] >= 1 and r["peak_rss_mb"] >= 0
        assert 1 <= r["max_in_flight"] <= r["requests"]
    for method in ours:
        _check_requests({r["case"]: r for r in rows if r["method"] == method})
    if available():  # the floor: one request per object, nothing else
        floor = {r["case"]: r["by_kind"] for r in rows if r["method"] == "obstore-alone"}
        assert floor == {"write": {"PUT": 17}, "read": {"GET": 16}, "open array": {"GET": 1},
                         "read one chunk": {"GET": 1}, "read one element": {"GET": 1}}
    _check_backends(rows)
    assert (tmp_path / "bench-out" / "bench_s3.json").exists()


def test_bench_s3_tiny_with_latency(tmp_path, monkeypatch):
    """The 20 ms latency rows are labelled as such (chunkstore's two backends only; obstore
    named too)."""
    monkeypatch.chdir(tmp_path)
    rows = bench_s3.main(["--tiny", "--repeats", "1", "--group-size", "2", "--latency-ms",
                          "20", "--methods", "chunkstore,chunkstore-fsspec,chunkstore-obstore"])
    assert {r["method"] for r in rows} == {"chunkstore", "chunkstore-fsspec",
                                           "chunkstore-obstore"}
    _check_backends(rows)
    for r in rows:
        assert r["correct"] and r["case"].endswith("(20 ms latency)") and r["latency_ms"] == 20
        # every request waits 20 ms at the server
        assert r["wall_s"] >= 0.02


def _check_backends(rows: list) -> None:
    """Each row names the S3 client that served it: the default is obstore when it is
    installed, and an fsspec row stays."""
    default = "obstore" if available() else "fsspec"
    expected = {"chunkstore": default, "chunkstore-fsspec": "fsspec",
                "chunkstore-obstore": "obstore", "zarr-python": "fsspec", "zarrs": "fsspec",
                "tensorstore": "tensorstore", "obstore-alone": "obstore"}
    for r in rows:
        assert r["backend"] == expected[r["method"]], r


def _check_requests(mine: dict) -> None:
    # counted at the server: the whole array is 16 chunks of 16 KiB
    assert mine["write"]["by_kind"].get("PUT", 0) >= 17 and mine["write"]["mb_in"] > 0.25
    assert mine["read"]["by_kind"] == {"GET": 16}
    assert mine["read"]["max_in_flight"] > 1 and mine["read one chunk"]["max_in_flight"] == 1
    assert mine["read one chunk"]["by_kind"] == {"GET": 1}
    assert mine["open group of 3 (consolidated)"]["requests"] < \
        mine["open group of 3 (plain)"]["requests"]
    assert mine["read"]["lists"] == mine["read one chunk"]["lists"] == 0


@pytest.mark.skipif(not available(), reason="obstore is not installed")
def test_obstore_alone_stores_the_array_chunkstore_stores():
    """The floor's objects are chunkstore's array: chunkstore reads what it wrote, and it
    reads what chunkstore wrote, byte for byte the same chunks."""
    import numpy as np
    import s3fs

    import chunkstore as cs
    bench_s3.set_aws_env()
    data = np.random.default_rng(0).standard_normal((128, 128), dtype="f4")
    with bench_s3.Endpoint() as ep:
        options = {"key": "testing", "secret": "testing",
                   "client_kwargs": {"endpoint_url": ep.url}}
        fs = s3fs.S3FileSystem(**options)
        fs.mkdir("bench")
        alone = bench_s3.ObstoreAlone(ep.url, "bench", options)
        ours = bench_s3.Chunkstore(ep.url, "bench", options)
        alone.create_and_write(data, (64, 64))
        ours.create_and_write(data, (64, 64))
        got = cs.open_array(alone.url, mode="r", storage_options=options)[...]
        assert np.array_equal(got, data)
        a = alone.open()
        assert (a.shape, a.chunks) == ((128, 128), (64, 64))
        alone.key = ours.key  # the floor reading chunkstore's array
        assert np.array_equal(alone.read_all(alone.open()), data)
        assert np.array_equal(alone.read_chunk(a, (64, 64)), data[:64, :64])
        assert alone.read_element(a) == data[1, 1]
        chunk_keys = [f"c/{i}/{j}" for i in (0, 1) for j in (0, 1)]
        assert [fs.cat(f"bench/obstore-alone.zarr/{k}") for k in chunk_keys] == [
            fs.cat(f"bench/chunkstore.zarr/{k}") for k in chunk_keys]
        with pytest.raises(ValueError, match="whole chunks"):
            alone.create_and_write(data[:100], (64, 64))
