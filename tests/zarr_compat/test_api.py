"""Ported from zarr-python's tests/test_api.py and tests/test_api/test_synchronous.py
(behaviour, not code)."""

from __future__ import annotations

import numpy as np
import pytest

import chunkstore as cs
from chunkstore import Array, Group


def test_create_array(store):
    z = cs.create(shape=100, store=store)
    assert isinstance(z, Array) and z.shape == (100,)
    z = cs.create(shape=200, chunk_shape=20, store=store, overwrite=True)
    assert z.shape == (200,) and z.chunks == (20,)
    z = cs.create(shape=400, chunks=40, store=store, overwrite=True)
    assert z.shape == (400,) and z.chunks == (40,)


@pytest.mark.parametrize("path", ["foo", "/", "/foo", "///foo/bar"])
@pytest.mark.parametrize("node_type", ["array", "group"])
def test_open_normalized_path(store, path, node_type):
    node = (cs.group(store=store, path=path) if node_type == "group"
            else cs.create(store=store, path=path, shape=(2,)))
    assert node.path == path.strip("/")


def test_open_array(tmp_path, zarr_format):
    where = str(tmp_path / "a.zarr")
    z = cs.open(where, shape=100, zarr_format=zarr_format)
    assert isinstance(z, Array) and z.shape == (100,)
    z = cs.open(where, mode="w", shape=200, zarr_format=zarr_format)
    assert z.shape == (200,)
    z = cs.open(where, mode="r", zarr_format=zarr_format)
    assert isinstance(z, Array) and z.shape == (200,) and z.read_only


def test_open_path_not_found(store, zarr_format):
    with pytest.raises(FileNotFoundError):
        cs.open(store=store, path="doesnotexist", mode="r", zarr_format=zarr_format)


def test_open_group(tmp_path):
    where = str(tmp_path / "g.zarr")
    g = cs.open_group(where)
    g.create_group("foo")
    assert isinstance(g, Group) and "foo" in g
    g = cs.open_group(where, mode="r")
    assert isinstance(g, Group) and g.read_only


def test_open_array_or_group(store, zarr_format):
    grp_w = cs.group(store=store, path="group", zarr_format=zarr_format,
                     attributes={"foo": "bar"})
    arr_w = grp_w.create_array(name="foo", shape=(1,))
    grp_r = cs.open(store=store, path="group", mode="r", zarr_format=zarr_format)
    assert isinstance(grp_r, Group) and grp_r.attrs == {"foo": "bar"}
    arr_r = cs.open(store=store, path="group/foo", mode="r", zarr_format=zarr_format)
    assert isinstance(arr_r, Array) and arr_r.shape == arr_w.shape


@pytest.mark.parametrize("zarr_format", [None, 2, 3])
def test_open_group_unspecified_version(store, zarr_format):
    cs.open_group(store=store, mode="a", zarr_format=zarr_format, attributes={"foo": "bar"})
    g2 = cs.open_group(store=store, mode="r")
    assert g2.attrs == {"foo": "bar"}
    if zarr_format is not None:
        assert g2.metadata.zarr_format == zarr_format


def test_save_errors(tmp_path):
    where = str(tmp_path / "group.zarr")
    with pytest.raises(ValueError):
        cs.save_group(where)
    with pytest.raises(TypeError):
        cs.save_array(where)  # type: ignore[call-arg]
    with pytest.raises(ValueError):
        cs.save(where)


def test_open_with_mode_r(store):
    with pytest.raises(FileNotFoundError):
        cs.open(store=store, mode="r")
    z1 = cs.ones(store=store, shape=(3, 3))
    assert z1.fill_value == 1
    z2 = cs.open(store=store, mode="r")
    assert isinstance(z2, Array) and z2.fill_value == 1 and (z2[:] == 1).all()
    with pytest.raises(ValueError):
        z2[:] = 3


def test_open_with_mode_r_plus(store):
    with pytest.raises(FileNotFoundError):
        cs.open(store=store, mode="r+")
    cs.ones(store=store, shape=(3, 3))
    z2 = cs.open(store=store, mode="r+")
    assert isinstance(z2, Array) and (z2[:] == 1).all()
    z2[:] = 3


def test_open_with_mode_a(store):
    g = cs.open(store=store, mode="a")  # without shape: a group
    assert isinstance(g, Group)
    store.delete("zarr.json")
    arr = cs.open(store=store, mode="a", shape=(3, 3))
    assert isinstance(arr, Array)
    arr[...] = 1
    z2 = cs.open(store=store, mode="a")
    assert isinstance(z2, Array) and (z2[:] == 1).all()
    z2[:] = 3


def test_open_with_mode_w(store):
    arr = cs.open(store=store, mode="w", shape=(3, 3))
    assert isinstance(arr, Array)
    arr[...] = 3
    z2 = cs.open(store=store, mode="w", shape=(3, 3))
    assert isinstance(z2, Array) and not (z2[:] == 3).all()


def test_open_with_mode_w_minus(store):
    arr = cs.open(store=store, mode="w-", shape=(3, 3))
    assert isinstance(arr, Array)
    arr[...] = 1
    with pytest.raises(FileExistsError):
        cs.open(store=store, mode="w-")


@pytest.mark.parametrize("order", ["C", "F", None])
def test_array_order(order, zarr_format):
    arr = cs.ones(shape=(2, 2), order=order, zarr_format=zarr_format)
    expected = order or cs.config.get("array.order")
    assert arr.order == expected
    np.testing.assert_array_equal(np.asarray(arr), np.ones((2, 2)))


def test_load_array(store):
    foo, bar = np.arange(100), np.arange(100, 0, -1)
    cs.save(store, foo=foo, bar=bar)
    for name, expected in (("foo", foo), ("bar", bar)):
        array = cs.load(store, path=name)
        assert isinstance(array, np.ndarray)
        np.testing.assert_array_equal(array, expected)


def test_open_falls_back_to_open_group(store):
    cs.open_group(store, attributes={"key": "value"})
    group = cs.open(store)
    assert isinstance(group, Group) and group.attrs == {"key": "value"}


@pytest.mark.parametrize("fn", ["zeros", "ones", "empty", "full"])
def test_creation_functions(fn):
    kwargs = {"fill_value": 7} if fn == "full" else {}
    a = getattr(cs, fn)(shape=(10, 10), chunks=(5, 5), **kwargs)
    assert a.shape == (10, 10) and a.chunks == (5, 5)
    assert a.fill_value == {"zeros": 0, "ones": 1, "empty": 0, "full": 7}[fn]


def test_consolidate_metadata_zarr_format(store, zarr_format):
    root = cs.group(store, zarr_format=zarr_format)
    root.create_array("x", shape=(3,), dtype="i1")
    g = cs.consolidate_metadata(store, zarr_format=zarr_format)
    assert g.info["Consolidated"] == "True" and g.keys() == ["x"]
    with pytest.raises(FileNotFoundError):  # no group of the other format there
        cs.consolidate_metadata(store, zarr_format=5 - zarr_format)


def test_create_array_config_and_global_config(store):
    a = cs.create_array(store, "a", shape=(4,), chunks=(2,), dtype="i4",
                        config={"write_empty_chunks": True})
    a[:] = 0  # fill values only: stored because write_empty_chunks
    assert a.nchunks_initialized == 2
    with cs.config.set({"array.write_empty_chunks": True}):
        b = cs.create_array(store, "b", shape=(4,), chunks=(2,), dtype="i4")
        assert cs.config.get("array.write_empty_chunks") is True
    assert cs.config.get("array.write_empty_chunks") is False
    b[:] = 0
    assert b.nchunks_initialized == 2
    c = cs.create_array(store, "c", shape=(4,), chunks=(2,), dtype="i4")
    c[:] = 0
    assert c.nchunks_initialized == 0
    with pytest.raises(TypeError, match=r"Unknown array config keys: \['nope'\]"):
        cs.create_array(store, "d", shape=(4,), config={"nope": 1})


def test_default_compressor_from_config(store):
    import numcodecs

    with cs.config.set({"array.default_compressor": numcodecs.Zlib(level=3)}):
        a = cs.create_array(store, "a", shape=(4,), dtype="i4", zarr_format=2)
    assert a.compressor.get_config() == {"id": "zlib", "level": 3}
    with cs.config.set({"array.default_compressor": None}):
        b = cs.create_array(store, "b", shape=(4,), dtype="i4")
    assert b.compressors == ()
    with pytest.raises(KeyError, match="unknown"):
        cs.config.set({"no.such.key": 1})


def test_v3_refuses_v2_spellings_as_zarr():
    import numcodecs

    with pytest.raises(ValueError, match="dimension_separator cannot be used"):
        cs.create(shape=(4,), zarr_format=3, dimension_separator=".")
    with pytest.raises(ValueError, match="compressor cannot be used"):
        cs.create(shape=(4,), zarr_format=3, compressor=numcodecs.Zlib())
    with pytest.raises(ValueError, match="filters cannot be used"):
        cs.create(shape=(4,), zarr_format=3, filters=[numcodecs.Delta("i4")])
    with pytest.raises(ValueError, match="dimension_separator cannot be used"):
        cs.create_array(None, shape=(4,), dtype="i4", dimension_separator="/")
    assert cs.create(shape=(4,), zarr_format=2, dimension_separator="/",
                     compressor=numcodecs.Zlib()).zarr_format == 2


def test_overwrite_removes_what_was_there(store):
    g = cs.group(store)
    g.create_group("x").create_array("inner", shape=(2,), dtype="i1")[:] = 1
    a = cs.create_array(store, "x", shape=(3,), dtype="i4", overwrite=True)
    assert not any(k.startswith("x/inner") for k in store.list())
    assert isinstance(cs.open(store, path="x"), Array) and a.shape == (3,)
    a[:] = 5
    cs.open_group(store, path="x", mode="w")
    assert isinstance(cs.open(store, path="x"), Group)
    assert [k for k in store.list() if k.startswith("x/")] == [
        "x/zarr.json"]  # the array's chunks went with it
