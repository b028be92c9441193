"""The core benchmark and the report runner work at tiny size (no timing assertions); one
run of bench_core serves both."""

import json
import math
import sys
import types

import pytest

from benchmarks import bench_core, run_all

LIBRARIES = bench_core.DEFAULT_LIBRARIES

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def check_core_rows(rows: list[dict], tmp_path) -> None:
    """bench_core's tiny run (made by ``run_all`` below, which runs it in-process): every
    case for every library, ratios to each peer, its JSON file, its targets cleaned up."""
    cases = {r["case"] for r in rows}
    for name in ("lz4 local", "raw local", "tiny-chunks local", "lz4 memory", "lz4 local v2"):
        assert {f"{name} write", f"{name} read"} <= cases
    def expected(case: str) -> set[str]:
        # numpy: one file, not for the v2 variant; file-limit: the uncompressed case only
        return (set(LIBRARIES) - ({"numpy"} if "v2" in case else set())
                - (set() if case.startswith("raw local") else {"file-limit"}))

    for case in cases:
        libs = {r["library"] for r in rows if r["case"] == case}
        assert libs == expected(case), case
    for r in rows:
        assert math.isfinite(r["seconds"]) and r["seconds"] > 0
        assert r["mb_per_s"] > 0 and math.isfinite(r["peak_mb"])
        if r["library"] == "chunkstore":
            peers = {k for k in r if k.startswith("ratio_vs_")}
            assert peers == {f"ratio_vs_{lib}" for lib in expected(r["case"])
                             if lib != "chunkstore"}
    # local stores recorded what they wrote; compression made the lz4 case smaller than raw
    stored = {(r["case"], r["library"]): r.get("stored_mb") for r in rows}
    assert stored[("lz4 local write", "chunkstore")] < stored[("raw local write", "chunkstore")]
    assert ("lz4 memory write", "chunkstore") in stored
    assert json.loads((tmp_path / "bench-out" / "bench_core.json").read_text()) == rows
    assert not any((tmp_path / "work").iterdir())  # every target was cleaned up


def test_bench_core_detects_wrong_data(tmp_path, monkeypatch):
    """A library that reads back wrong values makes the benchmark fail, not report."""
    monkeypatch.chdir(tmp_path)
    lib = bench_core.ADAPTERS["numpy"]
    monkeypatch.setattr(lib, "read", lambda case, target: bench_core.make_data(case) * 0)
    with pytest.raises(AssertionError, match="numpy / lz4 local: values read back differ"):
        bench_core.main(["--tiny", "--cases", "lz4 local", "--libraries", "numpy"])


def test_normalize_other_modules_rows():
    r = run_all.normalize({"case": "rechunk", "method": "zarr", "wall_s": 4.0,
                           "nbytes_mb": 8.0, "peak_rss_mb": [3.0, 5.0]}, "bench_x")
    assert r == {"benchmark": "bench_x", "case": "rechunk", "library": "zarr-python",
                 "seconds": 4.0, "mb_per_s": 2.0, "peak_mb": 5.0}
    r = run_all.normalize({"case": "sel", "op": "read", "library": "tensorstore",
                           "seconds": "bad"}, "bench_y")
    assert (r["case"], r["seconds"], r["mb_per_s"], r["peak_mb"]) == ("sel read", None, None, None)


def test_run_all_tiny(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # a module with another row shape, and one that fails: both must not stop the others
    odd = types.ModuleType("benchmarks.bench_zz_odd")
    odd.main = lambda argv: [{"case": "odd", "method": "numpy", "wall_s": 0.5, "nbytes": 10**6},
                             {"case": "odd", "method": "chunkstore", "wall_s": 0.25,
                              "nbytes": 10**6, "peak_rss_mb": [1.0, 2.0]}]
    boom = types.ModuleType("benchmarks.bench_zz_boom")

    def explode(argv):
        raise RuntimeError("kaboom in the benchmark")

    boom.main = explode
    monkeypatch.setitem(sys.modules, "benchmarks.bench_zz_odd", odd)
    monkeypatch.setitem(sys.modules, "benchmarks.bench_zz_boom", boom)
    monkeypatch.setattr(run_all, "DOCS", tmp_path / "docs" / "benchmarks")
    core_rows: list[dict] = []
    real_core = bench_core.main

    def core(argv):  # the real bench_core, with a work directory that is checked after
        core_rows.extend(real_core([*argv, "--workdir", str(tmp_path / "work")]))
        return core_rows

    monkeypatch.setattr(bench_core, "main", core)
    out = tmp_path / "report"
    rows = run_all.main(["--tiny", "--out", str(out),
                         "--only", "core,zz_odd,zz_boom,zz_missing"])
    check_core_rows(core_rows, tmp_path)
    assert {r["benchmark"] for r in rows} == {"bench_core", "bench_zz_odd"}
    odd_rows = {r["library"]: r for r in rows if r["benchmark"] == "bench_zz_odd"}
    assert odd_rows["chunkstore"]["mb_per_s"] == pytest.approx(4.0)
    assert odd_rows["numpy"]["mb_per_s"] == pytest.approx(2.0)

    report = (out / "REPORT.md").read_text()
    assert report.startswith("# chunkstore benchmark report")
    for needle in ("## Machine", "| CPU |", "| RAM |", "| Python |", "| zarr |",
                   "| tensorstore |", "## bench_core", "## bench_zz_odd",
                   "| bench_zz_boom | failed |", "kaboom in the benchmark",
                   "| bench_zz_missing | missing |", "![throughput per case](throughput.png)",
                   "| lz4 local read |", "tiny sizes"):
        assert needle in report, needle
    # each table is well-formed: every row has as many cells as its header
    lines = report.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|---"):
            ncols = lines[i - 1].count(" | ") + 1
            j = i + 1
            while j < len(lines) and lines[j].startswith("| "):
                assert lines[j].count(" | ") + 1 == ncols, lines[j]
                j += 1
    png = (out / "throughput.png").read_bytes()
    assert png.startswith(PNG_MAGIC) and len(png) > 5000
    data = json.loads((out / "results.json").read_text())
    assert data["modules"] == {"bench_core": "ok", "bench_zz_odd": "ok",
                               "bench_zz_boom": "failed", "bench_zz_missing": "missing"}
    assert not (tmp_path / "docs").exists()  # --tiny never touches docs/benchmarks

    # a full-size run (here: only the cheap fake module) copies the report into docs/
    run_all.main(["--out", str(tmp_path / "full"), "--only", "zz_odd"])
    docs = tmp_path / "docs" / "benchmarks"
    assert (docs / "REPORT.md").read_text() == (tmp_path / "full" / "REPORT.md").read_text()
    assert (docs / "throughput.png").read_bytes().startswith(PNG_MAGIC)
