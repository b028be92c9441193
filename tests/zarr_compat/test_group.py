"""Ported from zarr-python's tests/test_group.py (behaviour, not code)."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest

import chunkstore as cs
from chunkstore import Group


def consolidated(store, zarr_format):
    return cs.consolidate_metadata(store, zarr_format=zarr_format)


def test_create_creates_parents(store, zarr_format):
    cs.open_group(store, path="a", zarr_format=zarr_format, attributes={"key": "value"})
    keys = set(store.list())
    if zarr_format == 2:
        assert keys == {".zgroup", ".zattrs", "a/.zgroup", "a/.zattrs"}
    else:
        assert keys == {"zarr.json", "a/zarr.json"}
    assert cs.open_group(store)["a"].attrs == {"key": "value"}
    cs.open_group(store, path="a/b/c/d", zarr_format=zarr_format)
    files = [".zattrs", ".zgroup"] if zarr_format == 2 else ["zarr.json"]
    expected = sorted([f"{p}/{f}" for f in files for p in ["a", "a/b", "a/b/c", "a/b/c/d"]]
                      + files)
    assert sorted(store.list()) == expected
    for path in ["a", "a/b", "a/b/c"]:
        g = cs.open_group(store, path=path)
        assert g.attrs == ({"key": "value"} if path == "a" else {})


@pytest.mark.parametrize("root_name", ["", "/", "a", "/a"])
@pytest.mark.parametrize("branch_name", ["foo", "/foo", "foo/bar", "/foo/bar"])
def test_group_name_properties(zarr_format, root_name, branch_name):
    root = Group.from_store(cs.MemoryStore(), path=root_name, zarr_format=zarr_format)
    assert root.path == root_name.strip("/")
    assert root.name == f"/{root.path}"
    assert root.basename == root.path
    branch = root.create_group(branch_name)
    assert branch.path == "/".join(p for p in [root.path, branch_name.strip("/")] if p)
    assert branch.name == f"/{branch.path}"
    assert branch.basename == branch_name.split("/")[-1]


@pytest.mark.parametrize("use_consolidated", [True, False])
def test_group_members(store, zarr_format, use_consolidated):
    group = Group.from_store(store, zarr_format=zarr_format)
    expected = {"subgroup": group.create_group("subgroup")}
    subsub = expected["subgroup"].create_group("subsubgroup")
    subsubsub = subsub.create_group("subsubsubgroup")
    expected["subarray"] = group.create_array("subarray", shape=(100,), dtype="uint8",
                                              chunks=(10,), overwrite=True)
    store.set("extra_object-1", b"000000")  # not nodes: ignored
    store.set("extra_directory/extra_object-2", b"000000")
    if use_consolidated:
        consolidated(store, zarr_format)
        group = cs.open_consolidated(store, zarr_format=zarr_format)
    assert sorted(dict(group.members())) == sorted(expected)
    expected["subgroup/subsubgroup"] = subsub
    assert sorted(dict(group.members(max_depth=1))) == sorted(expected)
    expected["subgroup/subsubgroup/subsubsubgroup"] = subsubsub
    assert sorted(dict(group.members(max_depth=None))) == sorted(expected)
    with pytest.raises(ValueError, match="max_depth"):
        group.members(max_depth=-1)


def test_group(store, zarr_format):
    group = Group.from_store(store, zarr_format=zarr_format)
    foo = group.create_group("foo")
    bar = foo.create_group("bar", attributes={"baz": "qux"})
    data = np.arange(0, 4 * 4, dtype="uint16").reshape((4, 4))
    arr = bar.create_array("baz", shape=data.shape, dtype=data.dtype, chunks=(2, 2),
                           overwrite=True)
    arr[:] = data
    assert arr == bar["baz"]
    assert (arr.shape, arr.dtype, arr.chunks) == (data.shape, data.dtype, (2, 2))
    bar2 = foo["bar"]
    assert dict(bar2.attrs) == {"baz": "qux"}
    bar2.attrs.update({"name": "bar"})
    assert dict(bar2.attrs) == {"baz": "qux", "name": "bar"}
    assert dict(foo["bar"].attrs) == {"baz": "qux", "name": "bar"}


def test_group_create(store, overwrite, zarr_format):
    attributes = {"foo": 100}
    group = Group.from_store(store, attributes=attributes, zarr_format=zarr_format,
                             overwrite=overwrite)
    assert group.attrs == attributes
    if not overwrite:
        with pytest.raises(cs.ContainsGroupError):
            Group.from_store(store, overwrite=overwrite, zarr_format=zarr_format)


def test_group_open(store, zarr_format, overwrite):
    with pytest.raises(FileNotFoundError):
        Group.open(store)
    attrs = {"path": "foo"}
    created = Group.from_store(store, attributes=attrs, zarr_format=zarr_format,
                               overwrite=overwrite)
    assert created.attrs == attrs and created.metadata.zarr_format == zarr_format
    if not overwrite:
        with pytest.raises(cs.ContainsGroupError):
            Group.from_store(store, attributes=attrs, zarr_format=zarr_format)
    else:
        again = Group.from_store(store, attributes={"path": "bar"}, zarr_format=zarr_format,
                                 overwrite=True)
        assert again.attrs == {"path": "bar"}
    assert Group.open(store, zarr_format=zarr_format) == created
    with pytest.raises(FileNotFoundError):  # the other format is not there
        Group.open(store, zarr_format=5 - zarr_format)


@pytest.mark.parametrize("use_consolidated", [True, False])
def test_group_getitem(store, zarr_format, use_consolidated):
    group = Group.from_store(store, zarr_format=zarr_format)
    subgroup = group.create_group(name="subgroup")
    subarray = group.create_array(name="subarray", shape=(10,), chunks=(10,), dtype="uint8")
    subsubarray = subgroup.create_array(name="subarray", shape=(10,), chunks=(10,),
                                        dtype="uint8")
    if use_consolidated:
        group = consolidated(store, zarr_format)
    assert group["subgroup"] == subgroup
    assert group["subarray"] == subarray
    assert group["subgroup"]["subarray"] == subsubarray
    assert group["subgroup/subarray"] == subsubarray
    with pytest.raises(KeyError, match="nope"):
        group["nope"]
    with pytest.raises(KeyError, match="subarray/subsubarray"):
        group["subarray/subsubarray"]


def test_group_get_with_default(store, zarr_format):
    group = Group.from_store(store, zarr_format=zarr_format)
    assert group.get("subgroup") is None
    assert group.get("subgroup", 8) == 8
    group.require_group("subgroup").attrs["foo"] = "bar"
    assert group.get("subgroup", 8).attrs["foo"] == "bar"


@pytest.mark.parametrize("use_consolidated", [True, False])
def test_group_delitem(store, zarr_format, use_consolidated):
    group = Group.from_store(store, zarr_format=zarr_format)
    subgroup = group.create_group(name="subgroup")
    subarray = group.create_array(name="subarray", shape=(10,), chunks=(10,), dtype="uint8")
    if use_consolidated:
        group = consolidated(store, zarr_format)
    assert group["subgroup"] == subgroup and group["subarray"] == subarray
    del group["subgroup"]
    with pytest.raises(KeyError, match="subgroup"):
        group["subgroup"]
    del group["subarray"]
    with pytest.raises(KeyError, match="subarray"):
        group["subarray"]
    if use_consolidated:  # the stored copy follows (zarr-python: the document too)
        reopened = cs.open_consolidated(store, zarr_format=zarr_format)
        assert list(reopened) == []


def test_group_iter_len_contains(store, zarr_format):
    group = Group.from_store(store, zarr_format=zarr_format)
    assert list(group) == [] and len(group) == 0
    assert "foo" not in group
    group.create_group(name="foo")
    assert "foo" in group


def test_group_setitem(store, zarr_format):
    group = Group.from_store(store, zarr_format=zarr_format)
    arr = np.ones((2, 4))
    group["key"] = arr
    assert list(group.array_keys()) == ["key"]
    assert group["key"].shape == (2, 4)
    np.testing.assert_array_equal(group["key"][:], arr)
    arr = np.zeros((3, 5))
    group["key"] = arr
    assert group["key"].shape == (3, 5)
    np.testing.assert_array_equal(group["key"], arr)


@pytest.mark.parametrize("use_consolidated", [True, False])
def test_group_child_iterators(store, zarr_format, use_consolidated):
    group = Group.from_store(store, zarr_format=zarr_format)
    group_keys = ["g0", "g1"]
    group_values = [group.create_group(name=name) for name in group_keys]
    group_values[0].create_group("subgroup")
    group_values[0].create_array("subarray", shape=(1,), dtype="uint8", fill_value=3)
    array_keys = ["a0", "a1"]
    array_values = [group.create_array(name=name, shape=(1,), dtype="uint8", fill_value=3)
                    for name in array_keys]
    if use_consolidated:
        group = consolidated(store, zarr_format)
    assert sorted(group.groups()) == sorted(zip(group_keys, group_values, strict=True))
    assert sorted(group.group_keys()) == group_keys
    assert sorted(group.group_values(), key=lambda g: g.name) == group_values
    assert sorted(group.arrays()) == sorted(zip(array_keys, array_values, strict=True))
    assert sorted(group.array_keys()) == array_keys
    assert sorted(group.array_values(), key=lambda a: a.name) == array_values


def test_group_update_attributes(store, zarr_format):
    group = Group.from_store(store, zarr_format=zarr_format, attributes={"foo": 100})
    new = group.update_attributes({"bar": 100})
    assert new.attrs == {"foo": 100, "bar": 100}


@pytest.mark.parametrize("name", ["a", "/a"])
@pytest.mark.parametrize("chunks", [(2, 2), [2, 2], np.array([2, 2]),
                                    (np.int64(2), np.int64(2))])
@pytest.mark.parametrize("shards", [None, (4, 4), [4, 4], np.array([4, 4])])
def test_group_create_array(zarr_format, overwrite, name, chunks, shards):
    if zarr_format == 2 and shards is not None:
        pytest.skip("Zarr format 2 does not support sharding")
    group = Group.from_store(cs.MemoryStore(), zarr_format=zarr_format)
    data = np.arange(100).reshape(10, 10).astype("uint8")
    array = group.create_array(name=name, shape=(10, 10), dtype="uint8", chunks=chunks,
                               shards=shards)
    array[:] = data
    if not overwrite:
        with pytest.raises(cs.ContainsArrayError):
            group.create_array(name=name, shape=(10, 10), dtype="uint8")
    assert array.path == name.strip("/") and array.name == f"/{array.path}"
    assert array.chunks == (2, 2)
    np.testing.assert_array_equal(array.shards, shards)
    assert array.shape == (10, 10) and array.dtype == np.dtype("uint8")
    np.testing.assert_array_equal(array[:], data)


@pytest.mark.parametrize("method", ["create_array", "create_group"])
def test_create_with_parent_array(store, zarr_format, method):
    group = Group.from_store(store, zarr_format=zarr_format)
    group.create_array(name="arr_1", shape=(10, 10), dtype="uint8")
    with pytest.raises(ValueError, match="is an array - only groups may have child nodes"):
        if method == "create_array":
            group.create_array("arr_1/group_1/group_2/arr_2", shape=(10, 10), dtype="uint8")
        else:
            group.create_group("arr_1/group_1/group_2/group_3")


@pytest.mark.parametrize("method_name", ["zeros_like", "ones_like", "empty_like", "full_like"])
@pytest.mark.parametrize("out_shape", ["keep", (10, 10)])
@pytest.mark.parametrize("out_chunks", ["keep", (10, 10)])
@pytest.mark.parametrize("out_dtype", ["keep", "int8"])
def test_group_array_like_creation(zarr_format, method_name, out_shape, out_chunks, out_dtype):
    ref = cs.ones(shape=(11, 12), dtype="uint8", chunks=(11, 12))
    group = Group.from_store(cs.MemoryStore(), zarr_format=zarr_format)
    kwargs: dict = {}
    expect_fill = {"zeros_like": 0, "ones_like": 1, "empty_like": ref.fill_value,
                   "full_like": 4}[method_name]
    if method_name == "full_like":
        kwargs["fill_value"] = 4
    if out_shape != "keep":
        kwargs["shape"] = out_shape
    if out_chunks != "keep":
        kwargs["chunks"] = out_chunks
    if out_dtype != "keep":
        kwargs["dtype"] = out_dtype
    new = getattr(group, method_name)(name="foo", data=ref, **kwargs)
    assert new.shape == (ref.shape if out_shape == "keep" else out_shape)
    assert new.chunks == (ref.chunks if out_chunks == "keep" else out_chunks)
    assert new.dtype == (ref.dtype if out_dtype == "keep" else np.dtype(out_dtype))
    assert np.all(new[:] == expect_fill)


@pytest.mark.parametrize("group_format", [2, 3])
@pytest.mark.parametrize("method_name", ["empty", "zeros", "ones", "full", "empty_like",
                                         "zeros_like", "ones_like", "full_like"])
@pytest.mark.parametrize("source_format", [2, 3])
@pytest.mark.parametrize("pass_zarr_format", [False, True])
def test_group_array_helpers_use_group_format(group_format, method_name, source_format,
                                              pass_zarr_format):
    group = Group.from_store(cs.MemoryStore(), zarr_format=group_format)
    kwargs: dict = {"zarr_format": group_format} if pass_zarr_format else {}
    if method_name == "full":
        kwargs["fill_value"] = 3
    if method_name.endswith("_like"):
        source = cs.zeros(shape=(4,), dtype="int32", zarr_format=source_format)
        arr = getattr(group, method_name)(name="a", data=source, **kwargs)
    else:
        arr = getattr(group, method_name)(name="a", shape=(4,), **kwargs)
    assert arr.metadata.zarr_format == group_format
    assert list(group.array_keys()) == ["a"]


def test_group_array_helpers_other_format():
    group = Group.from_store(cs.MemoryStore(), zarr_format=2)
    with pytest.raises(ValueError, match="zarr_format=3 array in a zarr_format=2 group"):
        group.zeros(name="a", shape=(4,), zarr_format=3)


def test_group_array_creation(store, zarr_format):
    group = Group.from_store(store, zarr_format=zarr_format)
    shape = (10, 10)
    empty = group.empty(name="empty", shape=shape)
    assert isinstance(empty, cs.Array) and empty.fill_value == 0 and empty.shape == shape
    assert empty.store is store and empty.path == "empty"
    assert group.empty_like(name="empty_like", data=empty).fill_value == 0
    empty_bool = group.empty(name="empty_bool", shape=shape, dtype=np.dtype("bool"))
    assert not empty_bool.fill_value
    assert not group.empty_like(name="empty_like_bool", data=empty_bool).fill_value
    zeros = group.zeros(name="zeros", shape=shape)
    assert zeros.fill_value == 0
    assert group.zeros_like(name="zeros_like", data=zeros).fill_value == 0
    ones = group.ones(name="ones", shape=shape)
    assert ones.fill_value == 1
    assert group.ones_like(name="ones_like", data=ones).fill_value == 1
    full = group.full(name="full", shape=shape, fill_value=42)
    assert full.fill_value == 42
    assert group.full_like(name="full_like", data=full, fill_value=43).fill_value == 43


@pytest.mark.parametrize("extant_node", ["array", "group"])
def test_group_creation_existing_node(store, zarr_format, overwrite, extant_node):
    group = Group.from_store(store, zarr_format=zarr_format)
    if extant_node == "array":
        expected = cs.ContainsArrayError
        group.create_array("extant", shape=(10,), dtype="uint8", attributes={"old": True})
    else:
        expected = cs.ContainsGroupError
        group.create_group("extant", attributes={"old": True})
    if overwrite:
        new = Group.from_store(store, path="extant", attributes={"new": True},
                               zarr_format=zarr_format, overwrite=True)
        assert new.attrs == {"new": True}
    else:
        with pytest.raises(expected):
            Group.from_store(store, path="extant", attributes={"new": True},
                             zarr_format=zarr_format, overwrite=False)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_serializable_group(tmp_path, zarr_format):
    expected = Group.from_store(cs.LocalStore(str(tmp_path / "g.zarr")), attributes={"foo": 999},
                                zarr_format=zarr_format)
    assert pickle.loads(pickle.dumps(expected)) == expected


@pytest.mark.parametrize("use_consolidated", [True, False])
def test_group_members_and_nmembers(store, use_consolidated):
    group = Group.from_store(store)
    a0 = group.create_array("a0", shape=(1,), dtype="uint8")
    g0 = group.create_group("g0")
    a1 = g0.create_array("a1", shape=(1,), dtype="uint8")
    g1 = g0.create_group("g1")
    a2 = g1.create_array("a2", shape=(1,), dtype="uint8")
    g2 = g1.create_group("g2")
    assert sorted(group.members()) == [("a0", a0), ("g0", g0)]
    assert group.nmembers() == 2 and group.nmembers == 2  # chunkstore: both spellings
    assert sorted(group.members(max_depth=1)) == [
        ("a0", a0), ("g0", g0), ("g0/a1", a1), ("g0/g1", g1)]
    assert group.nmembers(max_depth=1) == 4
    assert sorted(group.members(max_depth=None)) == [
        ("a0", a0), ("g0", g0), ("g0/a1", a1), ("g0/g1", g1), ("g0/g1/a2", a2),
        ("g0/g1/g2", g2)]
    if use_consolidated:
        cs.consolidate_metadata(store)
    group = cs.open_group(store)
    assert group.nmembers(max_depth=None) == 6
    with pytest.raises(ValueError, match="max_depth"):
        group.nmembers(max_depth=-1)


def test_require_group(store, zarr_format):
    root = Group.from_store(store, zarr_format=zarr_format)
    root.create_group("foo", attributes={"foo": 100})
    assert root.require_group("foo").attrs == {"foo": 100}
    foo = root.require_group("foo", overwrite=True)
    assert foo.attrs == {}
    foo.create_array("bar", shape=(10,), dtype="uint8", chunks=(2,), attributes={"foo": 100})
    with pytest.raises(TypeError, match="Incompatible object"):
        foo.require_group("bar")


def test_require_groups(store, zarr_format):
    root = Group.from_store(store, zarr_format=zarr_format)
    root.create_group("foo", attributes={"foo": 100})
    root.create_group("bar", attributes={"bar": 200})
    foo, bar = root.require_groups("foo", "bar")
    assert foo.attrs == {"foo": 100} and bar.attrs == {"bar": 200}
    foo, spam = root.require_groups("foo", "spam")
    assert foo.attrs == {"foo": 100} and spam.attrs == {}
    assert root.require_groups() == ()


def test_require_array(store, zarr_format):
    root = Group.from_store(store, zarr_format=zarr_format)
    foo1 = root.require_array("foo", shape=(10,), dtype="i8", attributes={"foo": 101})
    assert foo1.attrs == {"foo": 101}
    assert root.require_array("foo", shape=(10,), dtype="i8").attrs == {"foo": 101}
    root.require_array("foo", shape=10, dtype="f8")  # exact=False: f8 fits? as zarr: allowed
    with pytest.raises(TypeError, match="Incompatible dtype"):
        root.require_array("foo", shape=(10,), dtype="f8", exact=True)
    with pytest.raises(TypeError, match="Incompatible shape"):
        root.require_array("foo", shape=(100, 100), dtype="i8")
    with pytest.raises(TypeError, match="Incompatible dtype"):
        root.require_array("foo", shape=(10,), dtype="f4")
    root.create_group("bar")
    with pytest.raises(TypeError, match="Incompatible object"):
        root.require_array("bar", shape=(10,), dtype="int8")


def test_deprecated_spellings_warn_as_zarr(store):
    root = Group.from_store(store)
    with pytest.warns(DeprecationWarning, match="create_array"):
        root.create_dataset("x", shape=(4,), dtype="i4")
    with pytest.warns(DeprecationWarning, match="require_array"):
        root.require_dataset("x", shape=(4,), dtype="i4")
    with pytest.warns(DeprecationWarning, match="create_array"):
        root.array("y", data=np.arange(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        root.create("z", shape=(2,))  # not deprecated


@pytest.mark.parametrize("use_consolidated", [True, False])
def test_members_name(store, use_consolidated, zarr_format):
    group = Group.from_store(store, zarr_format=zarr_format)
    a = group.create_group(name="a")
    a.create_array("array", shape=(1,), dtype="uint8")
    b = a.create_group(name="b")
    b.create_array("array", shape=(1,), dtype="uint8")
    if use_consolidated:
        group = consolidated(store, zarr_format)
    assert group["a"]["b"].name == "/a/b"
    paths = sorted(x.name for _, x in group.members(max_depth=None))
    assert paths == ["/a", "/a/array", "/a/b", "/a/b/array"]


def test_open_mutable_mapping():
    assert isinstance(cs.open_group(store={}).store, cs.MemoryStore)


class TestConsolidated:
    def test_group_delitem_consolidated(self, store, zarr_format):
        root = Group.from_store(store, zarr_format=zarr_format)
        root.create_group("g0").create_group("g1").create_group("g2").create_array(
            "data", shape=(1,), dtype="uint8")
        root.create_group("x0").create_group("x1").create_group("x2").create_array(
            "data", shape=(1,), dtype="uint8")
        cs.consolidate_metadata(store)
        group = cs.open_consolidated(store, zarr_format=zarr_format)
        assert group.keys() == ["g0", "x0"]
        del group["g0"]
        assert group.keys() == ["x0"]
        assert cs.open_consolidated(store, zarr_format=zarr_format).keys() == ["x0"]

    def test_group_delitem_consolidated_aliased(self, store):
        root = cs.create_group(store)
        root.create_group("sub").create_array("b", shape=(4,), chunks=(2,), dtype="i4")
        cs.consolidate_metadata(store)
        group = cs.open_group(store, mode="r+", use_consolidated=True)
        sub = group["sub"]
        del sub["b"]
        assert "b" not in sub and "b" not in group["sub"]
        with pytest.raises(KeyError):
            group["sub/b"]

    def test_open_consolidated_raises(self, store):
        root = Group.from_store(store)
        cs.open_group(store)  # fine to be missing by default
        with pytest.raises(ValueError, match="Consolidated metadata requested"):
            cs.open_group(store, use_consolidated=True)
        root.create_group("g0")
        cs.consolidate_metadata(store)
        group = cs.open_group(store, use_consolidated=False)
        assert group.metadata.consolidated_metadata is not None  # stored, but not used
        assert group.info["Consolidated"] == "False"


def test_info_and_info_complete():
    store = cs.MemoryStore()
    a = cs.group(store, path="A")
    b = a.create_group("B")
    b.create_array("x", shape=(1,), dtype="uint8")
    b.create_array("y", shape=(2,), dtype="uint8")
    info = a.info_complete()
    assert info["Name"] == "/A" and info["Read-only"] == "False"
    assert (info["No. members"], info["No. arrays"], info["No. groups"]) == ("1", "0", "1")
    assert b.info_complete()["No. arrays"] == "2"


def test_update_attrs():
    root = Group.from_store(cs.MemoryStore())
    root.attrs["foo"] = "bar"
    assert root.attrs["foo"] == "bar"


def test_delitem_removes_children(store, zarr_format):
    g1 = cs.group(store=store, zarr_format=zarr_format)
    g1.create_group("0")
    g1.create_group("0/0")
    arr = g1.create_array("0/0/0", shape=(1,), dtype="uint8")
    arr[:] = 1
    del g1["0"]
    with pytest.raises(KeyError, match="0/0"):
        g1["0/0"]
