"""CI runs the xarray engine benchmark at tiny size so it never rots (no timing asserts)."""

import pytest

pytest.importorskip("xarray")
pytest.importorskip("zarr")

from benchmarks import bench_xarray  # noqa: E402


def test_bench_xarray_tiny():
    rows = bench_xarray.main(["--tiny"])
    cases = {(r["case"], r["library"]) for r in rows}
    for fmt in (2, 3):
        for case in ("open", "open not consolidated", "load", "load dask", "point series"):
            for lib in ("chunkstore", "zarr-python"):
                assert (f"v{fmt} {case}", lib) in cases
    assert all(r["correct"] for r in rows)  # both engines read what was written
    ours = [r for r in rows if r["library"] == "chunkstore"]
    assert all(r["ratio_vs_zarr-python"] > 0 for r in ours)
    assert all(r["mb_per_s"] > 0 for r in rows if "load" in r["case"])
