"""The public contract, part 2: groups, modes, save/load/consolidate, info and the Dask
layer, side by side with zarr-python 3 (part 1, arrays: ``test_contract.py``).
"""

from __future__ import annotations

import os

import dask.array as da
import numpy as np
import pytest

import chunkstore as cs

zarr = pytest.importorskip("zarr")
from tests.api.test_contract import DATA, same_values  # noqa: E402

# zarr-python's own warnings: the seeds' create_dataset is deprecated there (not here), and
# it flags fixed-width string dtypes in v3 as unstable
pytestmark = [pytest.mark.filterwarnings("ignore:Use .*create_array:DeprecationWarning"),
              pytest.mark.filterwarnings("ignore:The data type")]

# -- groups ------------------------------------------------------------------------------------
A3, A2 = np.random.default_rng(0).random((20, 20, 4)), np.random.default_rng(1).random((20, 20))


def seed_hierarchy(mod, path):
    root = mod.open(path, mode="w")
    root.create_dataset("array_3D", data=A3, shape=A3.shape)
    root.create_dataset("array_2D", data=A2, shape=A2.shape)
    root.create_group("group_1").create_dataset("array_1D_1", data=np.arange(1000),
                                                shape=(1000,))
    root.create_dataset("group_2/array_1D_2", data=np.arange(100), shape=(100,))
    root.create_dataset("group_2/array_1D_3", data=np.arange(10), shape=(10,))
    return root


@pytest.fixture
def hierarchies(tmp_path):
    return (seed_hierarchy(zarr, str(tmp_path / "z.zarr")),
            seed_hierarchy(cs, str(tmp_path / "c.zarr")))


def test_seed_hierarchy_tree(hierarchies):
    z, c = hierarchies
    assert str(c.tree()) == repr(z.tree(plain=True)).rstrip("\n") == (
        "/\n├── array_2D (20, 20) float64\n├── array_3D (20, 20, 4) float64\n├── group_1\n"
        "│   └── array_1D_1 (1000,) int64\n└── group_2\n    ├── array_1D_2 (100,) int64\n"
        "    └── array_1D_3 (10,) int64")
    assert str(c["group_2"].tree()) == repr(z["group_2"].tree(plain=True)).rstrip("\n")
    assert repr(c.tree()) == str(c.tree())


def test_group_members_like_zarr(hierarchies):
    z, c = hierarchies
    for name in ("keys", "array_keys", "group_keys"):
        assert sorted(getattr(c, name)()) == sorted(getattr(z, name)()), name
    for name in ("members", "arrays", "groups"):
        ours = [(k, type(v).__name__) for k, v in getattr(c, name)()]
        theirs = [(k, type(v).__name__) for k, v in getattr(z, name)()]
        assert sorted(ours) == sorted(theirs), name
    assert isinstance(c.members(), tuple)
    deep = dict(c.members(max_depth=None))
    assert sorted(deep) == sorted(k for k, _ in z.members(max_depth=None))
    assert isinstance(deep["group_1/array_1D_1"], cs.Array)
    assert sorted(c) == sorted(z) and len(c) == len(list(z.keys())) == 4


def test_group_container_protocol(hierarchies):
    z, c = hierarchies
    for g in (z, c):
        assert "array_3D" in g and "group_2/array_1D_3" in g and "nope" not in g
        for missing in ("nope", "group_1/nope"):
            with pytest.raises(KeyError):
                g[missing]
        del g["array_2D"]
        assert "array_2D" not in g
    with pytest.raises(KeyError):
        del c["nope"]
    assert isinstance(c["array_3D"], cs.Array) and isinstance(c["group_1"], cs.Group)
    np.testing.assert_array_equal(c["array_3D"][:], A3)
    assert c.get("nope", 5) == 5 and c["group_1/array_1D_1"].name == "/group_1/array_1D_1"


def test_open_returns_array_or_group(hierarchies, tmp_path):
    path = str(tmp_path / "c.zarr")
    assert isinstance(cs.open(path, mode="r"), cs.Group)
    nested = cs.open(os.path.join(path, "group_1", "array_1D_1"), mode="r")
    assert isinstance(nested, cs.Array) and nested.shape == (1000,)
    via_path = cs.open(path, path="group_1/array_1D_1", mode="r")
    assert via_path.name == "/group_1/array_1D_1"
    assert isinstance(zarr.open(path, mode="r"), zarr.Group)  # and zarr-python agrees


def test_group_creation_api():
    root = cs.group()
    bar = root.create_group("foo").create_group("bar")
    z1 = bar.zeros("baz", shape=(100, 100), chunks=(10, 10), dtype="i4")
    assert z1.name == "/foo/bar/baz" and root["foo/bar"].name == "/foo/bar"
    x = root.create_dataset("x", shape=(10, 10), chunks=(5, 5), dtype="i4")
    assert (x.shape, x.chunks, x.dtype) == ((10, 10), (5, 5), np.dtype("i4"))
    assert root.require_group("foo").name == "/foo"
    assert root.require_array("x", shape=(10, 10), dtype="i4").name == "/x"
    with pytest.raises(TypeError):
        root.require_array("x", shape=(5,), dtype="i4")
    with pytest.raises(cs.ContainsGroupError):
        root.create_group("foo")
    with pytest.raises(cs.ContainsArrayError):
        root.create_array("x", shape=(3,), dtype="i4")
    assert root.create_array("x", shape=(4,), dtype="i4", overwrite=True).shape == (4,)


# -- modes ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["r", "r+"])
def test_missing_node_modes(tmp_path, mode):
    path = str(tmp_path / "missing.zarr")
    for mod in (zarr, cs):
        with pytest.raises(FileNotFoundError):
            mod.open(path, mode=mode)
        with pytest.raises(FileNotFoundError):
            mod.open_group(path, mode=mode)


@pytest.mark.parametrize("mode", ["a", "w", "w-"])
def test_creating_modes(tmp_path, mode):
    arr = cs.open(str(tmp_path / "a.zarr"), mode=mode, shape=(4,), dtype="i4")
    assert isinstance(arr, cs.Array) and arr.shape == (4,)
    assert isinstance(cs.open_group(str(tmp_path / "g.zarr"), mode=mode), cs.Group)


@pytest.mark.parametrize("mode, data", [("r", [1, 1, 1, 1]), ("r+", [1, 1, 1, 1]),
                                        ("a", [1, 1, 1, 1])])
def test_existing_array_modes(tmp_path, mode, data):
    path = str(tmp_path / "a.zarr")
    cs.open(path, mode="w", shape=(4,), chunks=(2,), dtype="i4")[:] = 1
    arr = cs.open(path, mode=mode)
    assert isinstance(arr, cs.Array) and arr[:].tolist() == data
    assert arr.read_only == (mode == "r")
    again = cs.open(path, mode=mode, shape=(6,), dtype="i4")  # an existing array wins
    assert again.shape == (4,)


def test_mode_w_overwrites_and_w_minus_refuses(tmp_path):
    path = str(tmp_path / "a.zarr")
    cs.open(path, mode="w", shape=(4,), chunks=(2,), dtype="i4")[:] = 1
    assert cs.open(path, mode="w", shape=(6,), dtype="i4")[:].tolist() == [0] * 6
    with pytest.raises(FileExistsError):
        cs.open(path, mode="w-", shape=(6,), dtype="i4")
    with pytest.raises(ValueError):
        cs.open(path, mode="x")


def test_read_only_writes_refused(tmp_path):
    path = str(tmp_path / "a.zarr")
    cs.open(path, mode="w", shape=(4,), chunks=(2,), dtype="i4")
    arr = cs.open(path, mode="r")
    for write in (lambda: arr.__setitem__(0, 1), lambda: arr.resize((5,)),
                  lambda: arr.append(np.ones(2))):
        with pytest.raises(cs.ReadOnlyError):
            write()
    cs.open_group(str(tmp_path / "g.zarr"), mode="w")
    with pytest.raises(cs.ReadOnlyError):
        cs.open_group(str(tmp_path / "g.zarr"), mode="r").create_group("x")


# -- save / load / consolidate -------------------------------------------------------------
def test_save_load_like_zarr(tmp_path):
    a = np.arange(12, dtype="i4").reshape(3, 4)
    for mod, name in ((zarr, "z.zarr"), (cs, "c.zarr")):
        assert mod.save(str(tmp_path / name), a) is None
        out = mod.load(str(tmp_path / name))
        assert isinstance(out, np.ndarray) and out.dtype == a.dtype
        np.testing.assert_array_equal(out, a)
    np.testing.assert_array_equal(cs.load(str(tmp_path / "z.zarr")), a)  # what zarr saved
    np.testing.assert_array_equal(zarr.load(str(tmp_path / "c.zarr")), a)


def test_load_group_is_a_mapping(tmp_path):
    path = str(tmp_path / "g.zarr")
    cs.save(path, np.arange(3), np.ones(2), foo=np.array(["a", "bb"], dtype=object))
    loaded = cs.load(path)
    assert sorted(loaded) == ["arr_0", "arr_1", "foo"] and len(loaded) == 3
    assert "foo" in loaded and "nope" not in loaded and dict(loaded).keys() == loaded.keys()
    assert loaded["foo"].tolist() == ["a", "bb"]
    with pytest.raises(KeyError):
        loaded["nope"]


def test_save_array_and_save_group(tmp_path):
    a = np.arange(6).reshape(2, 3)
    cs.save_array(str(tmp_path / "a.zarr"), a, chunks=(1, 3))
    assert cs.open_array(str(tmp_path / "a.zarr"), mode="r").chunks == (1, 3)
    zarr.save_array(str(tmp_path / "z.zarr"), a)
    np.testing.assert_array_equal(cs.load(str(tmp_path / "z.zarr")), a)
    cs.save_group(str(tmp_path / "g.zarr"), a)  # a group even with one array
    assert isinstance(cs.open(str(tmp_path / "g.zarr"), mode="r"), cs.Group)
    assert sorted(cs.load(str(tmp_path / "g.zarr"))) == ["arr_0"]
    with pytest.raises(ValueError):
        cs.save(str(tmp_path / "none.zarr"))


def test_save_load_zip(tmp_path):
    path = str(tmp_path / "x.zip")
    cs.save(path, DATA)
    np.testing.assert_array_equal(cs.load(path), DATA)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_consolidate_and_open_consolidated(tmp_path, zarr_format):
    path = str(tmp_path / "g.zarr")
    g = cs.open_group(path, mode="w", zarr_format=zarr_format)
    g.create_array("x", shape=(3,), dtype="i4")
    g.create_group("sub").create_array("y", shape=(2,), dtype="i4")
    assert isinstance(cs.consolidate_metadata(path), cs.Group)
    ours = cs.open_consolidated(path, mode="r")
    theirs = zarr.open_consolidated(path, mode="r")
    assert sorted(ours) == sorted(theirs) == ["sub", "x"]
    assert ours["sub/y"].shape == theirs["sub/y"].shape == (2,)
    cs.open_group(str(tmp_path / "plain.zarr"), mode="w")
    with pytest.raises(cs.MetadataError):
        cs.open_consolidated(str(tmp_path / "plain.zarr"), mode="r")


def test_zarr_spellings_create_from_array(tmp_path):
    z = cs.create(shape=(10,), chunks=(5,), dtype="i4", store=str(tmp_path / "c.zarr"))
    assert (z.shape, z.chunks, z.dtype) == ((10,), (5,), np.dtype("i4"))
    assert cs.create((4,)).dtype == zarr.create((4,)).dtype == np.float64
    assert isinstance(cs.create_group(str(tmp_path / "g.zarr")), cs.Group)
    with pytest.raises(cs.ContainsGroupError):
        cs.create_group(str(tmp_path / "g.zarr"))
    src = cs.array(DATA, chunks=(3, 4), attributes={"u": "m"}, fill_value=7)
    out = cs.from_array(str(tmp_path / "f.zarr"), data=src)
    assert out.chunks == (3, 4) and out.fill_value == 7 and out.attrs["u"] == "m"
    np.testing.assert_array_equal(out[:], DATA)
    ref = zarr.from_array(str(tmp_path / "zf.zarr"), data=DATA, chunks=(5, 5))
    ours = cs.from_array(str(tmp_path / "cf.zarr"), data=DATA, chunks=(5, 5))
    same_values(ours[:], ref[:], DATA)
    empty = cs.from_array(None, data=DATA, write_data=False)
    assert empty.shape == DATA.shape and empty.nchunks_initialized == 0
    like = cs.open_like(src, str(tmp_path / "like.zarr"))
    assert (like.shape, like.chunks, like.dtype) == (src.shape, src.chunks, src.dtype)


def test_copy_and_assign_between_arrays():
    z1 = cs.empty((100, 100), chunks=(10, 10), dtype="i4")
    z1[:] = 42
    z2 = cs.empty_like(z1)
    z2[:] = z1  # chunk by chunk (zarr-python 3 fails here with SyncError)
    assert (z2[:] == 42).all() and z2.chunks == z1.chunks
    copied = cs.copy(z1, cs.MemoryStore())
    assert copied.chunks == (10, 10) and int(copied[:].sum()) == 42 * 10**4
    from_dask = cs.copy(da.ones((4, 4), chunks=2), cs.MemoryStore())  # dask chunks ignored
    assert from_dask[:].sum() == 16


# -- info ----------------------------------------------------------------------------------------
def test_array_info_fields():
    c = cs.create_array(cs.MemoryStore(), shape=(100, 100), chunks=(10, 10), dtype="i4")
    c[:50] = 1
    text = str(c.info)
    for field in ("Type", "Data type", "Shape", "Chunk shape", "Order", "Read-only",
                  "Store type", "No. bytes", "No. bytes stored", "Storage ratio",
                  "Chunks initialized"):
        assert f"\n{field} " in "\n" + text, field
    assert c.info["Chunks initialized"] == "50/100" and c.info["Data type"] == "int32"
    assert c.info["Shape"] == "(100, 100)" and repr(c.info) == text
    g = cs.group()
    assert "Zarr format" in str(g.info) and g.info["Type"] == "chunkstore.Group"


# -- Dask layer ----------------------------------------------------------------------------------
def test_dask_round_trip(tmp_path):
    a = np.arange(240, dtype="f4").reshape(24, 10)
    src = cs.array(a, chunks=(5, 4), store=str(tmp_path / "a.zarr"))
    x = cs.dask.from_store(str(tmp_path / "a.zarr"))
    assert x.chunks == ((5, 5, 5, 5, 4), (4, 4, 2)) and x.dtype == a.dtype
    np.testing.assert_array_equal(x.compute(), a)
    np.testing.assert_array_equal(da.from_zarr(str(tmp_path / "a.zarr")).compute(), a)
    out = cs.dask.to_store(da.from_array(a, chunks=(7, 3)), str(tmp_path / "b.zarr"))
    assert isinstance(out, cs.Array) and out.chunks == (7, 3)
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "b.zarr"), mode="r")[:], a)
    np.testing.assert_array_equal(cs.dask.from_store(src, chunks=(12, 10)).compute(), a)


def test_dask_group_as_store():
    g = cs.group()
    g.create_dataset("sub/x", data=DATA, chunks=(5, 5))
    np.testing.assert_array_equal(cs.dask.from_store(g, "sub/x").compute(), DATA)
    np.testing.assert_array_equal(cs.dask.from_store(g["sub"], path="x").compute(), DATA)
    cs.dask.to_store(da.ones((4, 4), chunks=2), g["sub"], path="y")
    assert g["sub/y"][:].sum() == 16
    cs.dask.rechunk(g, (10, 1), g, path="r", source_path="sub/x").execute()
    assert g["r"].chunks == (10, 1)


def test_dask_rechunk_and_transpose():
    src = cs.array(np.arange(240.0).reshape(24, 10), chunks=(5, 4))
    plan = cs.dask.rechunk(src, {0: 12}, cs.MemoryStore())  # dask's dict spelling
    out = plan.execute()
    assert out.chunks == (12, 4)
    np.testing.assert_array_equal(out[:], src[:])
    assert cs.dask.rechunk(src, (None, 2), cs.MemoryStore()).execute().chunks == (24, 2)
    t = cs.dask.transpose(src, (-1, 0), cs.MemoryStore())  # negative axes as np.transpose
    np.testing.assert_array_equal(t[:], src[:].T)
    with pytest.raises(ValueError):
        cs.dask.transpose(src, (0, 0), cs.MemoryStore())
    with pytest.raises(ValueError):
        cs.dask.rechunk(src, {2: 3}, cs.MemoryStore())
