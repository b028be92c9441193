"""What every supported Python (3.11, 3.12, 3.13) must do: the smoke test that
tests/newest_zarr.sh runs on Python 3.13 (the whole suite runs on the default Python,
the interop suites also on 3.12 with the newest zarr-python)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import chunkstore as cs


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_round_trip_on_disk(tmp_path, zarr_format):
    data = np.arange(7 * 9, dtype="f8").reshape(7, 9) / 3
    a = cs.create_array(str(tmp_path / "a.zarr"), shape=data.shape, chunks=(3, 4),
                        dtype=data.dtype, zarr_format=zarr_format, fill_value=np.nan)
    a[:] = data
    b = cs.open_array(str(tmp_path / "a.zarr"), mode="r")
    np.testing.assert_array_equal(b[:], data)
    assert b.zarr_format == zarr_format
    np.testing.assert_array_equal(b.oindex[[6, 0], 1:8:3], data[[6, 0]][:, 1:8:3])


def test_sharded_and_dask(tmp_path):
    data = np.arange(64 * 48, dtype="i4").reshape(64, 48)
    path = str(tmp_path / "s.zarr")
    a = cs.create_array(path, shape=data.shape, chunks=(8, 8), shards=(32, 24), dtype="i4")
    a[5:60, 3:47] = data[5:60, 3:47]
    expected = np.zeros_like(data)
    expected[5:60, 3:47] = data[5:60, 3:47]
    x = cs.dask.from_store(path)
    cs.dask.to_store(x.T + 1, str(tmp_path / "t.zarr"))
    np.testing.assert_array_equal(cs.open_array(str(tmp_path / "t.zarr"))[:], expected.T + 1)


def test_cli_runs(tmp_path):
    path = str(tmp_path / "c.zarr")
    cs.save(path, np.arange(10))
    out = subprocess.run([sys.executable, "-m", "chunkstore", "info", path],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "(10,)" in out.stdout
