"""Ported from zarr-python's tests/test_array.py and tests/test_attributes.py (behaviour,
not code); the default chunk shape is checked against the installed zarr-python."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import chunkstore as cs


@pytest.mark.parametrize("shape", [(4,), (10000,), (1000, 1000), (100, 100, 100), (0,), (5, 0),
                                   (1,), (30, 40, 50, 60), (2**20,), (7, 13)])
@pytest.mark.parametrize("dtype", ["i1", "f8", "c16"])
def test_default_chunks_are_zarr_pythons(shape, dtype):
    zarr = pytest.importorskip("zarr")
    expected = zarr.create_array(store={}, shape=shape, dtype=dtype).chunks
    assert cs.create_array(None, shape=shape, dtype=dtype).chunks == expected


def test_nbytes_stored_both_spellings():
    a = cs.zeros((4,), chunks=(2,), dtype="i4")
    before = a.nbytes_stored()
    assert before == a.nbytes_stored and isinstance(before, int)
    a[:] = 1
    assert a.nbytes_stored() > before


def test_nchunks_initialized(zarr_format):
    a = cs.create_array(None, shape=(20, 20), chunks=(5, 5), dtype="f8",
                        zarr_format=zarr_format)
    assert (a.nchunks, a.nchunks_initialized) == (16, 0)
    a[:] = 1.0
    assert a.nchunks_initialized == 16


def test_serializable_array_equals_the_original(tmp_path, zarr_format):
    a = cs.create_array(str(tmp_path / "a.zarr"), shape=(3,), dtype="i4",
                        zarr_format=zarr_format, attributes={"foo": 999})
    b = pickle.loads(pickle.dumps(a))
    assert b == a and hash(b) == hash(a)
    assert cs.open_array(str(tmp_path / "a.zarr")) == a
    assert a != cs.create_array(str(tmp_path / "b.zarr"), shape=(3,), dtype="i4")
    assert len({a, b}) == 1


def test_shape_setter_resizes():
    a = cs.zeros((4, 4), chunks=(2, 2), dtype="i4")
    a[:] = 1
    a.shape = (6, 6)
    assert a.shape == (6, 6)
    assert a[:4, :4].tolist() == np.ones((4, 4)).tolist() and a[5, 5] == 0


def test_resize_and_append(zarr_format):
    a = cs.create_array(None, shape=(10, 10), chunks=(5, 5), dtype="i4", zarr_format=zarr_format)
    a[:] = 1
    a.resize((20, 5))
    assert a.shape == (20, 5)
    np.testing.assert_array_equal(a[:10], np.ones((10, 5)))
    np.testing.assert_array_equal(a[10:], np.zeros((10, 5)))
    assert a.append(np.full((5, 5), 2)) == (25, 5)
    np.testing.assert_array_equal(a[20:], np.full((5, 5), 2))


def test_array_open(store, zarr_format):
    cs.create_array(store, "x", shape=(3,), dtype="i2", zarr_format=zarr_format)
    a = cs.Array.open(store, path="x")
    assert a.shape == (3,) and not a.read_only
    assert cs.Array.open(store, path="x", mode="r").read_only
    with pytest.raises(FileNotFoundError):
        cs.Array.open(store, path="missing")


def test_info_complete_rows():
    a = cs.zeros((4,), chunks=(2,), dtype="f8")
    info = a.info_complete()
    for row in ("Type", "Zarr format", "Data type", "Fill value", "Shape", "Chunk shape",
                "Order", "Read-only", "Store type", "Filters", "Compressors", "No. bytes",
                "No. bytes stored", "Storage ratio", "Chunks initialized"):
        assert row in str(info), row
    assert info["Chunks initialized"] == "0/2"


def test_array_as_mask_selection():
    data = np.arange(20).reshape(4, 5)
    a = cs.array(data, chunks=(2, 2))
    mask = cs.array(data % 2 == 0)
    np.testing.assert_array_equal(a[mask], data[data % 2 == 0])


# -- tests/test_attributes.py ------------------------------------------------------------
def test_put():
    g = cs.Group.from_store(cs.MemoryStore(), attributes={"a": 1, "b": 2})
    g.attrs.put({"a": 3, "c": 4})
    assert dict(g.attrs) == {"a": 3, "c": 4}


def test_asdict():
    g = cs.Group.from_store(cs.MemoryStore(), attributes={"a": 1, "b": 2})
    assert g.attrs.asdict() == {"a": 1, "b": 2}


def test_update_attributes_preserves_existing():
    z = cs.create(10, store=cs.MemoryStore(), overwrite=True)
    z.attrs["a"] = []
    z.attrs["b"] = 3
    assert dict(z.attrs) == {"a": [], "b": 3}
    z.update_attributes({"a": [3, 4], "c": 4})
    assert dict(z.attrs) == {"a": [3, 4], "b": 3, "c": 4}


def test_update_empty_attributes_and_no_changes():
    z = cs.create(10, store=cs.MemoryStore(), overwrite=True)
    assert dict(z.attrs) == {}
    z.update_attributes({"a": [3, 4], "c": 4})
    assert dict(z.attrs) == {"a": [3, 4], "c": 4}
    z.update_attributes({})
    assert dict(z.attrs) == {"a": [3, 4], "c": 4}


def test_del_works():
    z = cs.create(10, store=cs.MemoryStore(), overwrite=True)
    z.update_attributes({"a": [3, 4], "c": 4})
    del z.attrs["a"]
    assert "c" in z.attrs and "a" not in z.attrs
