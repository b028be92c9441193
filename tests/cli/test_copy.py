"""``copy`` / ``convert``: .npy, HDF5 and stores in, stores and .npy out; new chunks,
shards, compressor and format; "already exists" hints at --overwrite."""

from __future__ import annotations

import json

import numpy as np
import pytest

import chunkstore as cs

from .conftest import DATA


def test_npy_roundtrip_and_v2_convert(cli, tmp_path):
    npy = tmp_path / "x.npy"
    assert cli("copy", "s.zarr", str(npy), "--node", "x").status == 0
    np.testing.assert_array_equal(np.load(npy), DATA)
    v2 = tmp_path / "v2.zarr"
    result = cli("convert", str(npy), str(v2), "--zarr-format", "2", "--chunks", "5,-1",
                 "--compressor", "zstd")
    assert result.status == 0, result.err
    a = cs.open_array(str(v2), mode="r")
    assert a.zarr_format == 2 and a.chunks == (5, 30)
    assert json.loads((v2 / ".zarray").read_text())["compressor"]["id"] == "zstd"
    np.testing.assert_array_equal(a[:], DATA)
    assert cli("convert", str(v2), str(tmp_path / "same.zarr")).status == 0
    assert (tmp_path / "same.zarr" / ".zarray").exists()  # keeps the source's format


def test_copy_keeps_attributes_and_dimension_names_and_shards(cli, tmp_path):
    out = tmp_path / "sh.zarr"
    result = cli("copy", "s.zarr", str(out), "--node", "x", "--chunks", "4,5", "--shards",
                 "8,-1")
    assert result.status == 0, result.err
    a = cs.open_array(str(out), mode="r")
    assert a.shards == (8, 30) and a.chunks == (4, 5)
    assert a.attrs["units"] == "m" and tuple(a.dimension_names) == ("y", "x")
    np.testing.assert_array_equal(a[:], DATA)


def test_convert_hdf5_dataset(cli, tmp_path):
    pytest.importorskip("h5py")
    out = tmp_path / "h5.zarr"
    result = cli("convert", "src.h5", str(out), "--node", "grp/data")
    assert result.status == 0, result.err
    a = cs.open_array(str(out), mode="r")
    assert a.chunks == (5, 30) and a.attrs["units"] == "K"
    np.testing.assert_array_equal(a[:], DATA)


def test_overwrite(cli, tmp_path):
    out = str(tmp_path / "o.zarr")
    assert cli("convert", "plain.npy", out).status == 0
    again = cli("convert", "plain.npy", out)
    assert again.status == 2 and "--overwrite" in again.err
    assert cli("convert", "plain.npy", out, "--overwrite", "--chunks", "2,2").status == 0
    assert cs.open_array(out, mode="r").chunks == (2, 2)


def test_zip_destination_is_complete_when_the_command_returns(cli, tmp_path):
    """Issue 15, item 10, as the command line sees it: a copy into a .zip is on disk and
    readable at once (in the same process, too)."""
    out = tmp_path / "o.zip"
    assert cli("convert", "plain.npy", str(out)).status == 0
    assert out.is_file()
    result = cli("verify", str(out))
    assert result.status == 0 and result.out.splitlines()[-1] == "1 array checked: 1 chunks, 0 bad"
    np.testing.assert_array_equal(cs.open_array(str(out), mode="r")[:], DATA)
