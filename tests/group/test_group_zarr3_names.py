"""Group and create_array spellings of zarr-python 3 that users switching expect."""

import numpy as np
import pytest

import chunkstore as cs

zarr = pytest.importorskip("zarr")

DATA = np.arange(100, dtype="i4").reshape(10, 10)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_create_array_with_data_matches_zarr(tmp_path, zarr_format):
    ours = cs.create_array(str(tmp_path / "a.zarr"), data=DATA, chunks=(5, 5),
                           zarr_format=zarr_format)
    theirs = zarr.create_array(str(tmp_path / "b.zarr"), data=DATA, chunks=(5, 5),
                               zarr_format=zarr_format)
    assert (ours.shape, ours.dtype, ours.chunks) == (theirs.shape, theirs.dtype, theirs.chunks)
    np.testing.assert_array_equal(ours[:], DATA)
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "a.zarr"))[:], DATA)


def test_create_array_needs_shape_or_data():
    with pytest.raises(TypeError, match="shape= or data="):
        cs.create_array(None)
    assert cs.create_array(None, shape=(3,)).dtype == np.float64  # the default dtype


def test_create_array_data_with_an_explicit_dtype_converts():
    a = cs.create_array(None, data=[1.5, 2.5], dtype="f4")
    assert a.dtype == np.float32 and a[:].tolist() == [1.5, 2.5]
    s = cs.create_array(None, data=np.array(["a", "bc"], dtype=object))
    assert s[:].tolist() == ["a", "bc"]  # object arrays of str: variable-length strings


def test_group_create_array_setitem_and_values(tmp_path):
    g = cs.group(str(tmp_path / "g.zarr"))
    x = g.create_array("x", data=DATA, chunks=(5, 5))
    np.testing.assert_array_equal(x[:], DATA)
    g["y"] = np.arange(5)
    g["y"] = np.arange(3)  # replaces, as zarr-python's __setitem__
    assert g["y"][:].tolist() == [0, 1, 2]
    assert g.require_dataset("z", shape=(4,), dtype="i4").shape == (4,)
    assert [grp.name for grp in g.require_groups("a", "b")] == ["/a", "/b"]
    assert sorted(a.name for a in g.array_values()) == ["/x", "/y", "/z"]
    assert sorted(grp.name for grp in g.group_values()) == ["/a", "/b"]
    assert g.update_attributes({"k": 1}) is g and dict(g.attrs) == {"k": 1}
    reopened = zarr.open_group(str(tmp_path / "g.zarr"), mode="r")
    assert sorted(reopened.array_keys()) == ["x", "y", "z"]
    np.testing.assert_array_equal(reopened["y"][:], [0, 1, 2])


def test_group_setitem_on_read_only_group_refuses(tmp_path):
    cs.group(str(tmp_path / "g.zarr"))
    g = cs.open_group(str(tmp_path / "g.zarr"), mode="r")
    with pytest.raises(cs.ReadOnlyError):
        g["x"] = np.arange(3)
    assert "x" not in cs.open_group(str(tmp_path / "g.zarr"), mode="r")
