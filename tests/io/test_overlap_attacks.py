"""Red team: a store opened onto itself. Copy, rechunk, transpose and to_store whose
target is the source, its parent or its child, spelled differently (nested store roots,
``./x/../x.zarr``, a symlink, a ``file://`` URL), and the CLI. The source must stay
intact and the error must be SameLocationError (or the result must be right)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import SameLocationError
from tests.cli_run import run_cli

DATA = np.arange(64, dtype="i4").reshape(8, 8)


@pytest.fixture
def src(tmp_path):
    """The array ``arr`` of the group ``<tmp>/g.zarr``."""
    g = cs.group(str(tmp_path / "g.zarr"))
    a = g.create_array("arr", shape=(8, 8), chunks=(4, 4), dtype="i4")
    a[:] = DATA
    return a


def _intact(tmp_path):
    a = cs.open_array(str(tmp_path / "g.zarr"), path="arr", mode="r")
    np.testing.assert_array_equal(a[:], DATA)


def _targets(tmp_path):
    """(label, store, path) naming the source ``g.zarr/arr``, its parent or its child."""
    g, arr = str(tmp_path / "g.zarr"), str(tmp_path / "g.zarr" / "arr")
    return {
        # the array's own directory used as the store root: the very same files
        "own-directory-as-store": (arr, None),
        # the parent directory as the store, the path reaching the array
        "parent-store-path-to-array": (str(tmp_path), "g.zarr/arr"),
        # the parent directory as the store, the path reaching the group above the array
        "parent-store-path-to-group": (str(tmp_path), "g.zarr"),
        # same store, path spelled with ./x/../
        "dotdot-spelling": (str(tmp_path / "x" / ".." / "g.zarr"), "arr"),
        "file-url": ("file://" + g, "arr"),
        "file-url-own-directory": ("file://" + arr, None),
    }


TARGETS = ["own-directory-as-store", "parent-store-path-to-array",
           "parent-store-path-to-group", "dotdot-spelling", "file-url",
           "file-url-own-directory"]


@pytest.mark.parametrize("target", TARGETS)
def test_copy_onto_itself(tmp_path, src, target):
    store, path = _targets(tmp_path)[target]
    with pytest.raises(SameLocationError):
        cs.copy(src, store, path=path, overwrite=True)
    _intact(tmp_path)


@pytest.mark.parametrize("target", TARGETS)
def test_rechunk_onto_itself(tmp_path, src, target):
    store, path = _targets(tmp_path)[target]
    with pytest.raises(SameLocationError):
        cs.dask.rechunk(src, (8, 2), store, path=path, max_mem="1MB", overwrite=True).execute()
    _intact(tmp_path)


@pytest.mark.parametrize("target", TARGETS)
def test_transpose_onto_itself(tmp_path, src, target):
    store, path = _targets(tmp_path)[target]
    with pytest.raises(SameLocationError):
        cs.dask.transpose(src, (1, 0), store, path=path, overwrite=True)
    _intact(tmp_path)


@pytest.mark.parametrize("target", TARGETS)
def test_to_store_onto_itself(tmp_path, src, target):
    store, path = _targets(tmp_path)[target]
    with pytest.raises(SameLocationError):
        cs.dask.to_store(cs.dask.from_store(src) + 1, store, path=path, overwrite=True)
    _intact(tmp_path)


def test_copy_through_a_symlink_to_the_array_directory(tmp_path, src):
    link = tmp_path / "link.zarr"
    os.symlink(tmp_path / "g.zarr" / "arr", link)
    with pytest.raises(SameLocationError):
        cs.copy(src, str(link), overwrite=True)
    _intact(tmp_path)


def test_copy_through_a_symlink_to_the_group(tmp_path, src):  # held
    link = tmp_path / "glink.zarr"
    os.symlink(tmp_path / "g.zarr", link)
    with pytest.raises(SameLocationError):
        cs.copy(src, str(link), path="arr", overwrite=True)
    _intact(tmp_path)


# -- writing into a region of its own source with a transformed dask array ----------------------
def test_to_store_region_of_its_own_source_reversed(tmp_path):
    """``to_store(from_store(a)[::-1], a.store, region=...)``: NumPy's ``a[:] = a[::-1]``
    gives the reversed array; chunkstore must do the same or refuse.

    Observed: rows [0, 8, 40, 32, ...] instead of [56, 48, 40, ...] (blocks read after
    other tasks overwrote them); no error."""
    a = cs.create_array(str(tmp_path / "a.zarr"), shape=(8, 8), chunks=(2, 8), dtype="i4")
    a[:] = DATA
    try:
        cs.dask.to_store(cs.dask.from_store(a)[::-1], a.store, region=(slice(0, 8),
                                                                        slice(0, 8)))
    except SameLocationError:
        np.testing.assert_array_equal(a[:], DATA)
        return
    np.testing.assert_array_equal(a[:], DATA[::-1])


def test_to_store_into_its_own_array_transposed(tmp_path):
    a = cs.create_array(str(tmp_path / "b.zarr"), shape=(8, 8), chunks=(2, 8), dtype="i4")
    a[:] = DATA
    try:
        cs.dask.to_store(cs.dask.from_store(a).T, a)
    except SameLocationError:
        np.testing.assert_array_equal(a[:], DATA)
        return
    np.testing.assert_array_equal(a[:], DATA.T)


# -- the CLI -------------------------------------------------------------------------------------
def _cli(*args, cwd):
    return run_cli(*args, cwd=cwd)  # in this process: the refusal is what is tested


@pytest.mark.parametrize("dst", ["src.zarr", "./x/../src.zarr", "file://{cwd}/src.zarr"])
@pytest.mark.parametrize("command", ["copy", "rechunk"])
def test_cli_onto_itself(tmp_path, command, dst):
    """``chunkstore copy SRC SRC --overwrite`` and ``rechunk``: exit 2, one line naming
    the problem, source intact.

    Observed (copy): exit 0, "copied src.zarr -> src.zarr", the source is all fill."""
    a = cs.create_array(str(tmp_path / "src.zarr"), shape=(8, 8), chunks=(8, 2), dtype="i4")
    a[:] = DATA
    extra = ["--chunks", "2,8"] if command == "rechunk" else []
    r = _cli(command, "src.zarr", dst.format(cwd=tmp_path), *extra, "--overwrite",
             cwd=tmp_path)
    np.testing.assert_array_equal(cs.open_array(str(tmp_path / "src.zarr"), mode="r")[:], DATA)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "source" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_cli_copy_group_member_onto_itself(tmp_path):
    g = cs.group(str(tmp_path / "g.zarr"))
    g.create_array("arr", shape=(8, 8), chunks=(4, 4), dtype="i4")[:] = DATA
    r = _cli("copy", "g.zarr", "g.zarr", "--node", "arr", "--dst-node", "arr", "--overwrite",
             cwd=tmp_path)
    _intact(tmp_path)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)


@pytest.mark.parametrize("path", ["", "arr/sub", "arr"])
@pytest.mark.parametrize("how", ["copy", "rechunk", "transpose", "to_store"])
def test_same_store_parent_or_child_path(tmp_path, src, how, path):  # held
    store = src.store
    calls = {
        "copy": lambda: cs.copy(src, store, path=path, overwrite=True),
        "rechunk": lambda: cs.dask.rechunk(src, (8, 2), store, path=path,
                                           overwrite=True).execute(),
        "transpose": lambda: cs.dask.transpose(src, (1, 0), store, path=path, overwrite=True),
        "to_store": lambda: cs.dask.to_store(cs.dask.from_store(src), store, path=path,
                                             overwrite=True),
    }
    with pytest.raises(SameLocationError, match="source"):
        calls[how]()
    _intact(tmp_path)
