"""Issue 15, items 1 and 5: every bad input is one line on stderr naming the path and what
was expected, exit status 2, never a traceback; in a terminal and through a pipe."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

# (argv, words the one error line must contain)
BAD_INPUTS = [
    (["verify", "nonexistent.zarr"], ["nonexistent.zarr", "no such file or directory",
                                      "expected a Zarr store"]),
    (["verify", "notzarr"], ["notzarr", "not a Zarr store", "zarr.json"]),
    (["ls", "nonexistent"], ["nonexistent", "no such file or directory"]),
    (["ls", "notzarr"], ["notzarr", "not a Zarr store"]),
    (["tree", "notzarr"], ["notzarr", "not a Zarr store"]),
    (["attrs", "nonexistent.zarr"], ["nonexistent.zarr", "no such file"]),
    (["dump", "nonexistent.zarr"], ["nonexistent.zarr", "no such file"]),
    (["info", "nonexistent.zarr"], ["nonexistent.zarr", "no such file or directory"]),
    (["info", "plain.npy"], ["plain.npy", "NumPy .npy file", "not a Zarr store", "convert"]),
    (["info", "s.zarr", "--node", "nope"], ["s.zarr", "no Zarr array or group", "'nope'"]),
    (["dump", "s.zarr"], ["s.zarr", "is a group, not an array", "--node"]),
    (["rechunk", "nonexistent.zarr", "out.zarr", "--chunks", "1,1"], ["nonexistent.zarr"]),
    (["info", "bad.zip"], ["bad.zip", "not a zip archive"]),
    (["info", "truncated.zip"], ["truncated.zip", "truncated"]),
    (["info", "zip::bad.zip"], ["zip::bad.zip", "not a zip archive"]),
    (["info", "zip::missing.zip"], ["zip::missing.zip", "no such file"]),
    (["info", "nosuchprotocol://x/y.zarr"], ["nosuchprotocol://x/y.zarr", "unknown URL protocol"]),
    (["info", "deep.zarr"], ["deep.zarr", "nest"]),
    (["verify", "deep.zarr"], ["deep.zarr", "nest"]),
    (["info", "huge.zarr"], ["huge.zarr", "shape", "1180591620717411303424"]),
    (["ls", "huge.zarr"], ["huge.zarr", "shape"]),
    (["info", "overflow.zarr"], ["overflow.zarr", "shape", "4294967296"]),
    (["dump", "overflow.zarr"], ["overflow.zarr", "shape"]),
    (["convert", "plain.npy", "out.zarr", "--chunks", "500,abc"], ["--chunks", "'abc'",
                                                                    "not a whole number"]),
    (["convert", "plain.npy", "out.zarr", "--chunks", "0,5"], ["--chunks", "must be positive"]),
    (["convert", "plain.npy", "out.zarr", "--chunks", "5,5,5"], ["--chunks", "3 values",
                                                                  "2 dimensions"]),
    (["convert", "plain.npy", "s.zarr"], ["already exists", "--overwrite"]),
    (["convert", "plain.npy", "plain.npy"], ["plain.npy", "is the source itself"]),
    (["convert", "missing.npy", "out.zarr"], ["missing.npy", "no such file"]),
    (["rechunk", "s.zarr", "v2.zarr", "--node", "x", "--chunks", "-1,5"],
     ["already exists", "--overwrite"]),
    (["rechunk", "s.zarr", "out.zarr", "--node", "x", "--chunks", "5"], ["--chunks", "1 values"]),
    (["rechunk", "s.zarr", "out.zarr", "--node", "x", "--chunks", "5,5", "--max-mem", "lots"],
     ["lots"]),
    (["dump", "s.zarr", "--node", "x", "--selection", "0:5, a"], ["--selection", "'a'"]),
    (["dump", "s.zarr", "--node", "x", "--selection", "25"], ["out of bounds", "axis 0"]),
    (["dump", "s.zarr", "--node", "x", "--selection", "1,2,3"], ["3 indices", "2 dimensions"]),
    (["info"], ["path"]),
    (["frobnicate"], ["frobnicate"]),
]

HDF5_INPUTS = [
    (["convert", "src.h5", "out.zarr", "--node", "grp/nope"], ["src.h5", "'grp/nope'",
                                                               "grp/data"]),
    # a group, or a file of several datasets, is copied as a group (tests/cli/
    # test_convert_netcdf.py); external files are refused (tests/api/test_hdf5_sources.py)
]


def check_one_line(result, words) -> None:
    assert result.status == 2, (result.status, result.out, result.err)
    assert len(result.err_lines) == 1, result.err
    line = result.err_lines[0]
    assert line.startswith("chunkstore") and ": error: " in line, line
    for word in words:
        assert word in line, (word, line)
    assert "Traceback" not in result.err and "\r" not in result.err


@pytest.mark.parametrize(("argv", "words"), BAD_INPUTS, ids=[" ".join(a) for a, _ in BAD_INPUTS])
def test_bad_input_is_one_line_exit_2(cli, argv, words):
    check_one_line(cli(*argv), words)


@pytest.mark.parametrize(("argv", "words"), HDF5_INPUTS,
                         ids=[" ".join(a) for a, _ in HDF5_INPUTS])
def test_bad_hdf5_node_is_named(cli, argv, words):
    pytest.importorskip("h5py")
    check_one_line(cli(*argv), words)


def test_missing_fsspec_backend_names_the_package(cli):
    if importlib.util.find_spec("gcsfs") is not None:
        pytest.skip("gcsfs is installed")
    check_one_line(cli("info", "gs://bucket/data.zarr"),
                   ["gs://bucket/data.zarr", "gcsfs", "pip install gcsfs"])


# Each of these failures in a real ``python -m chunkstore`` process, and each output kind
# twice (every input of BAD_INPUTS is run in this process on a pty and on a pipe above):
# the entry point turns them into one line and exit status 2 as ``main`` does.
@pytest.mark.parametrize(("mode", "argv", "word"), [
    ("pipe", ["verify", "nonexistent.zarr"], "nonexistent.zarr"),
    ("pty", ["info", "bad.zip"], "bad.zip"),
    ("pipe", ["info", "deep.zarr"], "deep.zarr"),
    ("pty", ["convert", "plain.npy", "o.zarr", "--chunks", "500,abc"], "'abc'")])
def test_real_process_prints_no_traceback(cli_process, argv, word):
    result = cli_process(*argv)
    check_one_line(result, [word])
    assert result.out == ""


@pytest.mark.parametrize("mode", ["pty"])  # in this process on both: test_newcomer_hints.py
def test_traceback_option_shows_the_traceback(cli_process):
    result = cli_process("--traceback", "info", "deep.zarr")
    # the traceback, then the usual line and exit status 2, as the README promises
    assert result.status == 2 and "Traceback" in result.err
    assert result.err_lines[-1].startswith("chunkstore info: error: ")


def test_closed_pipe_ends_quietly(samples):
    """``chunkstore dump ... | head -2``: no "Broken pipe" message, exit status 0."""
    # 100,000 values: about 0.8 MB of text, many times a pipe's buffer (64 KiB), so the
    # command is still writing when the pipe closes
    proc = subprocess.Popen([sys.executable, "-m", "chunkstore", "dump", "big.zarr",
                             "--selection", "0:100", "--max-elements", "100000"],
                            cwd=samples, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()  # what `head` does once it has its lines
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0, err
    assert first.startswith(b"array /") and err == ""
