"""Consolidated metadata follows changes made to the nodes it lists (zarr-python 2921)."""

import numpy as np
import pytest

import chunkstore as cs


@pytest.fixture(params=[2, 3])
def hierarchy(tmp_path, request):
    path = str(tmp_path / "g.zarr")
    root = cs.open_group(path, mode="w", zarr_format=request.param)
    root.create_dataset("x", data=np.arange(4), chunks=(2,))
    root.create_group("sub").create_dataset("y", data=np.ones((2, 2)), chunks=(1, 2))
    cs.consolidate_metadata(path)
    return path


def consolidated(path, name):
    return cs.open_group(path, mode="r", use_consolidated=True)[name]


def test_append_through_a_consolidated_group(hierarchy):
    g = cs.open_group(hierarchy, mode="a")
    g["x"].append(np.arange(3))
    assert g["x"].shape == (7,)  # the in-memory snapshot followed too
    x = consolidated(hierarchy, "x")
    assert x.shape == (7,)
    np.testing.assert_array_equal(x[:], [0, 1, 2, 3, 0, 1, 2])


def test_resize_and_attrs_of_an_array_opened_by_path(hierarchy):
    y = cs.open_array(hierarchy, path="sub/y", mode="r+")
    y.resize(3, 2)
    y.attrs["units"] = "m"
    seen = consolidated(hierarchy, "sub/y")
    assert seen.shape == (3, 2) and seen.attrs["units"] == "m"
    np.testing.assert_array_equal(seen[:2], np.ones((2, 2)))


def test_attrs_of_a_group_opened_by_path(hierarchy):
    sub = cs.open_group(hierarchy, path="sub", mode="r+", use_consolidated=False)
    sub.attrs["title"] = "t"
    assert consolidated(hierarchy, "sub").attrs["title"] == "t"


def test_arrays_outside_a_consolidated_group_cost_one_batched_read(tmp_path):
    store = cs.MemoryStore()
    a = cs.create_array(store, "a/b/c", shape=(4,), chunks=(2,))
    calls = []
    original = store.get_many
    store.get_many = lambda keys: calls.append(list(keys)) or original(keys)
    a.resize(8)
    assert calls == [["zarr.json", "a/zarr.json", "a/b/zarr.json"]]  # nothing rewritten
    assert cs.open_array(store, path="a/b/c").shape == (8,)


def test_error_classes_are_value_errors_as_in_zarr_python(tmp_path):
    for cls in (cs.ReadOnlyError, cs.ContainsArrayError, cs.ContainsGroupError):
        assert issubclass(cls, ValueError), cls
    a = cs.zeros((4,), store=str(tmp_path / "a.zarr"))
    with pytest.raises(ValueError, match="read-only"):
        cs.open_array(str(tmp_path / "a.zarr"), mode="r")[0] = 1
    with pytest.raises(ValueError):
        cs.zeros((4,), store=str(tmp_path / "a.zarr"))
    assert a.shape == (4,)
