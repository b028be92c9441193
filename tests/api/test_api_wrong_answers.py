"""Issue 14's wrong answers and wrong errors of the creation API, each checked against
zarr-python (a test-only peer) where it has an answer."""

from __future__ import annotations

import json

import numpy as np
import pytest

import chunkstore as cs

zarr = pytest.importorskip("zarr")


# -- 3. non-integer shapes and chunks --------------------------------------------------------
@pytest.mark.parametrize("kwargs", [
    {"shape": (400.5, 100)},
    {"shape": (400.0, 100)},
    {"shape": 4.0},
    {"shape": "4"},
    {"shape": (400, 100), "chunks": (16, 16.5)},
    {"shape": (400, 100), "chunks": (16, 16.0)},
])
def test_non_integer_shapes_and_chunks_raise_type_error_as_zarr(kwargs):
    with pytest.raises(TypeError):
        zarr.create_array(store={}, dtype="i4", **kwargs)
    with pytest.raises(TypeError):
        cs.create_array(None, dtype="i4", **kwargs)


@pytest.mark.parametrize("kwargs", [
    {"shape": (np.int64(4),), "chunks": (np.int32(2),)},
    {"shape": (True, 3)},  # bool is an int: zarr-python accepts it, so do we
    {"shape": (4, 3), "chunks": (True, 3)},
    {"shape": (0, 3), "chunks": (0, 3)},  # a 0 chunk length on a 0-length axis
])
def test_numpy_integers_and_bools_are_accepted_as_zarr(kwargs):
    z = zarr.create_array(store={}, dtype="i4", **kwargs)
    c = cs.create_array(None, dtype="i4", **kwargs)
    assert c.shape == z.shape
    assert all(isinstance(n, int) and not isinstance(n, bool) for n in c.shape + c.chunks)


def test_zero_chunks_on_a_non_empty_axis_are_refused():
    # zarr-python creates it, then every read divides by zero: refuse up front
    with pytest.raises(ValueError, match="positive"):
        cs.create_array(None, shape=(4, 3), chunks=(0, 3), dtype="i4")
    with pytest.raises(ValueError, match="negative"):
        cs.create_array(None, shape=(-1, 3), dtype="i4")


# -- 4. *_like with overrides -----------------------------------------------------------------
@pytest.mark.parametrize("fn", ["zeros_like", "ones_like", "empty_like", "full_like"])
def test_like_functions_take_shape_chunks_and_dtype_overrides(fn):
    src = cs.zeros((10, 10), chunks=(5, 5), dtype="i4")
    extra = {"fill_value": 3} if fn == "full_like" else {}
    a = getattr(cs, fn)(src, shape=(20, 4), **extra)
    assert (a.shape, a.chunks, a.dtype) == ((20, 4), (5, 5), np.dtype("i4"))
    b = getattr(cs, fn)(src, shape=(7,), chunks=(3,), dtype="f8", **extra)
    assert (b.shape, b.chunks, b.dtype) == ((7,), (3,), np.dtype("f8"))
    z = getattr(zarr, fn)(zarr.zeros((10, 10), chunks=(5, 5), dtype="i4"), shape=(20, 4),
                          **extra)
    assert (z.shape, z.chunks) == (a.shape, a.chunks)
    c = getattr(cs, fn)(np.zeros((3, 2), dtype="u1"), **extra)
    assert (c.shape, c.dtype) == ((3, 2), np.dtype("u1"))


def test_full_like_keeps_the_source_fill_value_and_values():
    src = cs.full((4,), 9, dtype="i2")
    assert cs.full_like(src)[:].tolist() == [9] * 4
    assert cs.ones_like(src)[:].tolist() == [1] * 4
    assert cs.zeros_like(src, zarr_format=2).zarr_format == 2


# -- 5. open(mode="w-") on an existing node ------------------------------------------------
def test_open_w_minus_without_shape_on_an_existing_array(tmp_path):
    path = str(tmp_path / "a.zarr")
    cs.open(path, mode="w", shape=(4,), dtype="i4")
    with pytest.raises(cs.ContainsArrayError):
        cs.open(path, mode="w-")
    with pytest.raises(FileExistsError):
        cs.open(path, mode="w-")
    cs.open_group(str(tmp_path / "g.zarr"), mode="w")
    with pytest.raises(cs.ContainsGroupError):
        cs.open(str(tmp_path / "g.zarr"), mode="w-")
    assert isinstance(cs.open(str(tmp_path / "new.zarr"), mode="w-"), cs.Group)


def test_open_w_without_shape_replaces_an_array_by_a_group(tmp_path):
    path = str(tmp_path / "a.zarr")
    cs.open(path, mode="w", shape=(4,), dtype="i4")[:] = 1
    g = cs.open(path, mode="w")
    assert isinstance(g, cs.Group) and list(g) == []


# -- 6. from_array keeps the source's format and v2 separator ------------------------------
@pytest.mark.parametrize("sep", [".", "/"])
def test_from_array_keeps_the_format_and_separator_of_a_v2_source(tmp_path, sep):
    src = cs.create_array(str(tmp_path / "src.zarr"), shape=(4, 4), chunks=(2, 2), dtype="i4",
                          zarr_format=2, dimension_separator=sep)
    src[:] = np.arange(16).reshape(4, 4)
    dst = cs.from_array(str(tmp_path / "dst.zarr"), data=src, zarr_format=None)
    assert dst.zarr_format == 2 and dst.metadata.dimension_separator == sep
    np.testing.assert_array_equal(dst[:], src[:])
    doc = json.loads((tmp_path / "dst.zarr" / ".zarray").read_text())
    assert doc["dimension_separator"] == sep
    assert (tmp_path / "dst.zarr" / f"1{sep}1").exists()
    z = zarr.open_array(str(tmp_path / "dst.zarr"), mode="r")
    np.testing.assert_array_equal(z[:], src[:])
    v3 = cs.from_array(str(tmp_path / "v3.zarr"), data=src, zarr_format=3)
    assert v3.zarr_format == 3
    copied = cs.copy(src, str(tmp_path / "copy.zarr"))
    assert copied.zarr_format == 2 and copied.metadata.dimension_separator == sep


# -- 7. v2 fill_value=None is null ----------------------------------------------------------
@pytest.mark.parametrize("dtype", ["i4", "f8", "M8[s]"])
def test_v2_fill_value_none_is_written_as_null_as_zarr(tmp_path, dtype):
    ours, theirs = tmp_path / "ours.zarr", tmp_path / "theirs.zarr"
    a = cs.create_array(str(ours), shape=(2,), dtype=dtype, zarr_format=2, fill_value=None)
    zarr.create_array(str(theirs), shape=(2,), dtype=dtype, zarr_format=2, fill_value=None)
    read = lambda p: json.loads((p / ".zarray").read_text())["fill_value"]  # noqa: E731
    assert read(ours) is None and read(theirs) is None
    assert a.fill_value is None
    assert cs.open_array(str(ours), mode="r").fill_value is None
    assert zarr.open_array(str(ours), mode="r").fill_value is None
    # without fill_value, the dtype's default is written (as zarr-python does)
    b = cs.create_array(str(tmp_path / "d.zarr"), shape=(2,), dtype="i4", zarr_format=2)
    assert json.loads((tmp_path / "d.zarr" / ".zarray").read_text())["fill_value"] == 0
    assert b.fill_value == 0


def test_xarray_does_not_mask_zeros_of_a_v2_group_we_wrote(tmp_path):
    xr = pytest.importorskip("xarray")
    g = cs.open_group(str(tmp_path / "g.zarr"), mode="w", zarr_format=2)
    g.create_array("v", data=np.array([0, 1, 2], dtype="i4"), fill_value=None,
                   dimension_names=["x"])
    cs.consolidate_metadata(str(tmp_path / "g.zarr"))
    ds = xr.open_zarr(str(tmp_path / "g.zarr"), zarr_format=2)
    assert ds["v"].values.tolist() == [0, 1, 2]
