"""The bulk matrix benchmark runs at tiny size and checks what it reads (no timings)."""

import numpy as np
import pytest

from benchmarks import bench_core, bench_matrix


def test_shapes_follow_the_requested_sizes():
    assert bench_matrix.array_shape(1024, 4) == (16384, 16384)
    assert bench_matrix.array_shape(1024, 8) == (16384, 8192)
    for kib, itemsize in [(256, 4), (1024, 8), (16384, 4)]:
        rows, cols = bench_matrix.chunk_shape(kib, itemsize, (1 << 20, 1 << 20))
        assert rows * cols * itemsize == kib * 1024


def test_matrix_tiny_covers_every_cell(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = bench_matrix.main(["--tiny", "--stores", "memory", "--workdir", str(tmp_path / "w")])
    cells = {r["case"] for r in rows if r["library"] == "chunkstore"}
    expected = {f"{d} 64KiB {c} memory {op}" for d in bench_matrix.DATA_DTYPES
                for c in bench_matrix.MATRIX_CODECS for op in ("write", "read")}
    assert cells == expected
    for r in rows:
        if r["library"] == "chunkstore":
            assert r["ratio_vs_zarr-python"] > 0 and r["ratio_vs_tensorstore"] > 0
            assert r["ratio_vs_zarrs"] > 0
            # the best peer is the faster of zarrs and tensorstore in that cell
            assert bench_matrix.best_ratio(r) == min(r["ratio_vs_zarrs"],
                                                     r["ratio_vs_tensorstore"])
    table = bench_matrix.summary(rows)
    assert "| write | best of zarrs / tensorstore |" in table
    assert "| read | best of zarrs / tensorstore |" in table
    floors = {r["case"] for r in rows if r["library"] == "numpy"}
    assert floors == {f"{d} numpy-floor memory {op}" for d in bench_matrix.DATA_DTYPES
                      for op in ("write", "read")}


@pytest.mark.parametrize("data", bench_core.DATA_SETS)
def test_data_sets_are_never_all_fill(data):
    case = bench_core.Case("x", (64, 48), (16, 16), "float64" if data == "noise" else "int32",
                           "raw", "memory", data=data)
    values = bench_core.make_data(case)
    assert values.shape == (64, 48) and not np.any(values == 0)
    assert len(np.unique(values)) > 100  # noise and ramp are not constant
