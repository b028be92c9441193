"""The indexing benchmark runs at tiny size so it never rots (no timing assertions)."""

import math

from benchmarks import bench_indexing


def test_bench_indexing_tiny(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = bench_indexing.main(["--tiny", "--repeat", "1"])
    names = {"element", "plane axis0", "plane axis1", "plane axis2", "column axis0",
             "column axis1", "column axis2", "1000 points"}
    assert {(r["codec"], r["selection"], r["library"]) for r in rows} == {
        (c, n, lib) for c in bench_indexing.CODECS for n in names
        for lib in bench_indexing.LIBRARIES}
    for r in rows:
        assert r["correct"], r
        assert math.isfinite(r["seconds"]) and r["seconds"] > 0
        if r["library"] == "chunkstore":
            peers = {k for k in r if k.startswith("ratio_vs_")}
            assert peers == {f"ratio_vs_{lib}" for lib in bench_indexing.LIBRARIES[1:]}
        if r["library"] == "h5py":
            assert r["h5py_filter"]
    assert (tmp_path / "bench-out" / "bench_indexing_tiny.json").exists()
