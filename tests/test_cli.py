"""The chunkstore command, called in-process through ``main(argv)``."""

import json

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.cli import main


@pytest.fixture
def stored(tmp_path):
    data = np.arange(600, dtype="i4").reshape(20, 30)
    cs.array(data, store=str(tmp_path / "s.zarr"), path="x", chunks=(8, 8),
             attributes={"units": "m"})
    return tmp_path / "s.zarr", data


def test_info_and_ls(stored, capsys):
    path, _ = stored
    assert main(["info", str(path), "--node", "x"]) == 0
    out = capsys.readouterr().out
    assert "Shape" in out and "(20, 30)" in out and "Chunks initialized : 12/12" in out
    assert main(["ls", str(path)]) == 0
    assert "x" in capsys.readouterr().out


def test_copy_npy_roundtrip_and_convert_v2(stored, tmp_path):
    path, data = stored
    npy = tmp_path / "x.npy"
    assert main(["copy", str(path), str(npy), "--node", "x"]) == 0
    np.testing.assert_array_equal(np.load(npy), data)
    assert main(["convert", str(npy), str(tmp_path / "v2.zarr"), "--zarr-format", "2",
                 "--chunks", "5,-1", "--compressor", "zstd"]) == 0
    v2 = cs.open_array(str(tmp_path / "v2.zarr"), mode="r")
    assert v2.zarr_format == 2 and v2.chunks == (5, 30)
    assert json.loads((tmp_path / "v2.zarr" / ".zarray").read_text())["compressor"]["id"] == "zstd"
    np.testing.assert_array_equal(v2[:], data)
    assert main(["convert", str(tmp_path / "v2.zarr"), str(tmp_path / "v3.zarr")]) == 0
    assert (tmp_path / "v3.zarr" / ".zarray").exists()  # keeps the source's format by default
    assert main(["convert", str(tmp_path / "v2.zarr"), str(tmp_path / "v3b.zarr"),
                 "--zarr-format", "3"]) == 0
    np.testing.assert_array_equal(cs.open_array(str(tmp_path / "v3b.zarr"))[:], data)


def test_verify_lists_bad_chunks(stored, capsys):
    path, _ = stored
    assert main(["verify", str(path)]) == 0
    (path / "x" / "c" / "1" / "2").write_bytes(b"garbage")
    assert main(["verify", str(path)]) == 1
    out = capsys.readouterr().out
    assert "BAD x/c/1/2" in out and "1 bad" in out


def test_rechunk_command(stored, tmp_path):
    path, data = stored
    assert main(["rechunk", str(path), str(tmp_path / "r.zarr"), "--node", "x",
                 "--chunks", "20,1", "--max-mem", "1MB"]) == 0
    out = cs.open_array(str(tmp_path / "r.zarr"), mode="r")
    assert out.chunks == (20, 1)
    np.testing.assert_array_equal(out[:], data)


def test_errors_are_one_line_exit_2(tmp_path, capsys):
    assert main(["info", str(tmp_path / "missing.zarr")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("chunkstore info: error:")


def test_help_for_every_command(capsys):
    for cmd in ("info", "tree", "ls", "copy", "convert", "rechunk", "verify", "demo"):
        with pytest.raises(SystemExit) as e:
            main([cmd, "--help"])
        assert e.value.code == 0
    assert "rechunk" in capsys.readouterr().out


def test_demo_small(tmp_path, capsys):
    assert main(["demo", "--small", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "transpose matches: True; rechunk matches: True" in out and "0 bad" in out
