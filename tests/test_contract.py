"""The public contract (DESIGN.md and the seed tutorials), side by side with zarr-python 3.

Each call is made with the same arguments on ``zarr`` and on ``chunkstore``; results are
compared with each other and with NumPy. Where chunkstore deliberately differs (NumPy
scalars for scalar selections, ``len()``, negative steps, stricter JSON...) the test pins
our behaviour and says why. Known gaps whose fix lives in modules owned elsewhere are
strict xfails in ``test_contract_gaps.py``.
"""

from __future__ import annotations

import os

import dask.array as da
import numpy as np
import pytest

import chunkstore as cs

zarr = pytest.importorskip("zarr")
from zarr.storage import MemoryStore as ZMemoryStore  # noqa: E402

# zarr-python's own warnings: the seeds' create_dataset is deprecated there (not here), and
# it flags fixed-width string dtypes in v3 as unstable
pytestmark = [pytest.mark.filterwarnings("ignore:Use .*create_array:DeprecationWarning"),
              pytest.mark.filterwarnings("ignore:The data type")]

DATA = np.arange(100, dtype="i4").reshape(10, 10)


def both(**kw):
    """The same array made by zarr and by chunkstore (memory stores)."""
    z = zarr.create_array(ZMemoryStore(), shape=DATA.shape, chunks=(3, 4), dtype="i4", **kw)
    c = cs.create_array(cs.MemoryStore(), shape=DATA.shape, chunks=(3, 4), dtype="i4", **kw)
    z[...] = DATA
    c[...] = DATA
    return z, c


def same_values(ours, theirs, reference=None):
    ours_arr, theirs_arr = np.asarray(ours), np.asarray(theirs)
    assert ours_arr.shape == theirs_arr.shape and ours_arr.dtype == theirs_arr.dtype
    np.testing.assert_array_equal(ours_arr, theirs_arr)
    if reference is not None:
        np.testing.assert_array_equal(ours_arr, reference)


# -- the public names -----------------------------------------------------------------------
DESIGN_NAMES = [
    "create_array", "zeros", "ones", "empty", "full", "array", "zeros_like", "ones_like",
    "empty_like", "full_like", "open", "open_array", "open_group", "group", "save", "load",
    "consolidate_metadata", "copy", "MemoryStore", "LocalStore", "ZipStore", "FsspecStore",
    "ThreadSynchronizer", "ProcessSynchronizer", "Array", "Group",
]
ZARR_SPELLINGS = ["save_array", "save_group", "from_array", "create", "create_group",
                  "open_consolidated", "open_like"]


@pytest.mark.parametrize("name", DESIGN_NAMES + ZARR_SPELLINGS)
def test_public_names(name):
    assert callable(getattr(cs, name)) and name in cs.__all__


def test_dask_names():
    for name in ("from_store", "to_store", "rechunk", "transpose"):
        assert callable(getattr(cs.dask, name))


# -- reading selections: values, shapes and dtypes as zarr-python and NumPy ---------------
SELECTIONS = {
    "row": lambda a: a[3],
    "neg row": lambda a: a[-1],
    "slice": lambda a: a[2:7, 1:9],
    "step": lambda a: a[::2, 1:8:3],
    "ellipsis": lambda a: a[..., 4],
    "beyond": lambda a: a[5:100],
    "empty": lambda a: a[5:2],
    "np int": lambda a: a[np.int64(3)],
    "list": lambda a: a[[1, 3]],
    "list unsorted dup": lambda a: a[[5, 1, 1, 9]],
    "list slice": lambda a: a[[1, 2], 3:5],
    "mask 2d": lambda a: a[DATA > 90],
    "oindex": lambda a: a.oindex[[0, 2], [1, 3]],
    "oindex neg": lambda a: a.oindex[[-1, -2], :],
    "oindex mask": lambda a: a.oindex[np.arange(10) > 7, :2],
    "vindex": lambda a: a.vindex[[0, 2], [1, 3]],
    "vindex 2d": lambda a: a.vindex[np.array([[0, 1], [2, 3]]), np.array([[0, 1], [2, 9]])],
    "vindex mask": lambda a: a.vindex[DATA > 95],
    "blocks": lambda a: a.blocks[1, 2],
    "blocks slice": lambda a: a.blocks[1:, :2],
    "blocks neg": lambda a: a.blocks[-1],
    "get_basic": lambda a: a.get_basic_selection((slice(1, 3), 2)),
    "get_basic all": lambda a: a.get_basic_selection(),
    "get_orthogonal": lambda a: a.get_orthogonal_selection(([1], [2, 5])),
    "get_coordinate": lambda a: a.get_coordinate_selection(([1, 4], [2, 2])),
    "get_mask": lambda a: a.get_mask_selection(DATA > 97),
    "get_block": lambda a: a.get_block_selection((1,)),
}


@pytest.mark.parametrize("sel", SELECTIONS.values(), ids=SELECTIONS.keys())
def test_selection_matches_zarr(sel):
    z, c = both()
    same_values(sel(c), sel(z))


@pytest.mark.parametrize("sel", [lambda a: a[2:7, 1:9], lambda a: a[::2, ::3],
                                 lambda a: a[[5, 1, 9]], lambda a: a[DATA > 50]])
def test_selection_matches_numpy(sel):
    _, c = both()
    out = sel(c)
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, sel(DATA))


def test_scalar_selection_is_a_numpy_scalar():
    # zarr-python 3 returns a 0-d ndarray for z[0, 0]; we return what NumPy returns
    z, c = both()
    assert isinstance(c[0, 0], np.int32) and c[-1, -1] == DATA[-1, -1]
    assert np.asarray(z[0, 0]) == c[0, 0]


def test_negative_step_supported():
    # zarr-python raises NegativeStepError; NumPy semantics are well defined, so we serve them
    _, c = both()
    np.testing.assert_array_equal(c[::-1, 8:2:-2], DATA[::-1, 8:2:-2])


OUT_OF_BOUNDS = {
    "int": lambda a: a[10],
    "neg int": lambda a: a[-11],
    "too many": lambda a: a[1, 2, 3],
    "float": lambda a: a[1.5],
    "newaxis": lambda a: a[None],
    "oindex": lambda a: a.oindex[[0, 20], [1]],
    "vindex": lambda a: a.vindex[[0, 20], [1, 3]],
    "blocks": lambda a: a.blocks[4],
}


@pytest.mark.parametrize("sel", OUT_OF_BOUNDS.values(), ids=OUT_OF_BOUNDS.keys())
def test_bad_selection_raises_index_error_like_zarr(sel):
    z, c = both()
    with pytest.raises(IndexError):
        sel(z)
    with pytest.raises(IndexError):
        sel(c)


# -- writing selections ----------------------------------------------------------------------
WRITES = {
    "scalar all": lambda a: a.__setitem__(Ellipsis, 3),
    "row": lambda a: a.__setitem__((0, slice(None)), np.arange(10)),
    "column": lambda a: a.__setitem__((slice(None), 0), np.arange(10)),
    "float into int": lambda a: a.__setitem__((1, slice(0, 4)), [1.7, 2.2, 3, 4]),
    "oindex": lambda a: a.oindex.__setitem__(([5], [5, 6]), 9),
    "vindex": lambda a: a.vindex.__setitem__(([0, 1], [2, 3]), [7, 8]),
    "blocks": lambda a: a.blocks.__setitem__((0, 1), 5),
    "mask": lambda a: a.__setitem__(DATA > 90, -1),
    "set_mask": lambda a: a.set_mask_selection(DATA < 5, -2),
}


@pytest.mark.parametrize("write", WRITES.values(), ids=WRITES.keys())
def test_write_matches_zarr(write):
    z, c = both()
    write(z)
    write(c)
    same_values(c[...], z[...])


def test_wrong_shape_write_raises_value_error():
    z, c = both()
    for a in (z, c):
        with pytest.raises(ValueError):
            a[0] = np.ones(5)


# -- array protocol, len, iteration ---------------------------------------------------------
def test_numpy_protocol():
    z, c = both()
    for conv in (np.asarray, np.array, lambda a: np.asarray(a, dtype="f8")):
        same_values(conv(c), conv(z))
    assert float(np.mean(c)) == float(np.mean(DATA))
    assert not hasattr(c, "mean")  # as in the seed: NumPy methods need a read first


def test_iteration_over_rows():
    z, c = both()
    rows = list(c)
    assert len(rows) == 10 and all(isinstance(r, np.ndarray) and r.shape == (10,) for r in rows)
    for ours, theirs in zip(rows, z, strict=True):
        same_values(ours, theirs)
    assert [int(v) for v in cs.array(np.arange(4), chunks=(3,))] == [0, 1, 2, 3]


def test_len_and_zero_d():
    # zarr-python 3 has no len(); NumPy's len() is the first axis (and fails on 0-d)
    _, c = both()
    assert len(c) == 10
    zero_d = cs.array(np.array(5))
    assert zero_d.shape == () and zero_d[...] == 5 and zero_d[()] == 5
    with pytest.raises(TypeError):
        len(zero_d)
    with pytest.raises(TypeError):
        iter(zero_d).__next__()


# -- properties --------------------------------------------------------------------------------
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_properties_match_zarr(zarr_format):
    kw = {"shape": (10, 10), "chunks": (3, 3), "dtype": "f4", "zarr_format": zarr_format}
    z = zarr.create_array(ZMemoryStore(), **kw)
    c = cs.create_array(cs.MemoryStore(), **kw)
    for name in ("shape", "dtype", "chunks", "shards", "ndim", "size", "nbytes", "nchunks",
                 "nchunks_initialized", "order", "path", "name", "basename", "read_only",
                 "cdata_shape"):
        assert getattr(c, name) == getattr(z, name), name
    assert c.zarr_format == z.metadata.zarr_format == zarr_format
    assert type(c.fill_value) is type(z.fill_value) and c.fill_value == z.fill_value
    assert isinstance(c.compressors, tuple) and isinstance(c.filters, tuple)


@pytest.mark.parametrize("dtype", ["i4", "f8", "u1", "bool", "c8", "M8[s]", "S3", "U3"])
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_default_fill_value_matches_zarr(dtype, zarr_format):
    kw = {"shape": (4,), "chunks": (2,), "dtype": dtype, "zarr_format": zarr_format}
    z = zarr.create_array(ZMemoryStore(), **kw)
    c = cs.create_array(cs.MemoryStore(), **kw)
    assert type(c.fill_value) is type(z.fill_value) and repr(c.fill_value) == repr(z.fill_value)
    assert c.dtype == z.dtype
    same_values(c[:], z[:])


def test_fill_values_of_creation_functions():
    for name, fill in (("zeros", 0), ("ones", 1), ("empty", 0)):
        c = getattr(cs, name)((4,), chunks=(2,), dtype="f4")
        z = getattr(zarr, name)((4,), chunks=(2,), dtype="f4")
        assert c.fill_value == z.fill_value == fill and isinstance(c.fill_value, np.float32)
    c = cs.full((4,), 3.5, chunks=(2,), dtype="f4")
    assert c.fill_value == np.float32(3.5) and c[0] == 3.5
    assert np.isnan(cs.full((4,), np.nan, dtype="f8").fill_value)


def test_like_functions():
    src = cs.create_array(cs.MemoryStore(), shape=(10, 10), chunks=(3, 4), dtype="i2",
                          fill_value=5, attributes={"x": 1})
    for fn, fill in ((cs.zeros_like, 0), (cs.ones_like, 1), (cs.empty_like, 0)):
        out = fn(src)
        assert (out.shape, out.chunks, out.dtype, out.fill_value) == (
            (10, 10), (3, 4), np.dtype("i2"), fill)
        assert dict(out.attrs) == {}
    assert cs.full_like(src, 7)[0, 0] == 7
    assert cs.zeros_like(DATA).shape == DATA.shape and cs.zeros_like(DATA).dtype == DATA.dtype


@pytest.mark.parametrize("chunks, expected", [((10, None), (10, 100)), ((None, 10), (100, 10)),
                                              (10, (10, 10)), ((-1, 10), (100, 10))])
def test_chunks_spellings(chunks, expected):
    assert cs.zeros((100, 100), chunks=chunks, dtype="i4").chunks == expected
    assert zarr.zeros((100, 100), chunks=chunks, dtype="i4").chunks == expected


def test_nchunks_initialized_and_nbytes_stored():
    c = cs.create_array(cs.MemoryStore(), shape=(100,), chunks=(10,), dtype="i4",
                        compressors=None)
    before = c.nbytes_stored
    c[:15] = 1
    assert c.nchunks_initialized == 2 and c.nbytes_stored == before + 2 * 40
    c[:] = 0  # chunks equal to the fill value are not stored (zarr-python too)
    assert c.nchunks_initialized == 0


# -- resize and append -----------------------------------------------------------------------
def test_resize_matches_zarr():
    z = zarr.zeros((100, 100), chunks=(10, 10), dtype="i4")
    c = cs.zeros((100, 100), chunks=(10, 10), dtype="i4")
    for a in (z, c):
        a[:] = 42
        assert a.resize((200, 100)) is None
    assert c.shape == z.shape == (200, 100)
    assert c.nchunks_initialized == z.nchunks_initialized == 100 and c.nchunks == 200
    for a in (z, c):
        a.resize((50, 50))
        a.resize((60, 60))
    same_values(c[:], z[:])
    assert c[55, 55] == 0 and c[49, 49] == 42
    c.resize(70, 70)  # the seeds' spelling: one argument per axis
    assert c.shape == (70, 70)


def test_append_matches_zarr():
    a = np.arange(1000, dtype="i4").reshape(100, 10)
    z, c = zarr.array(a, chunks=(10, 10)), cs.array(a, chunks=(10, 10))
    assert c.append(a) == z.append(a) == (200, 10)
    assert c.append(np.vstack([a, a]), axis=1) == z.append(np.vstack([a, a]), axis=1)
    assert c.shape == z.shape == (200, 20)
    same_values(c[:], z[:])
    for arr in (z, c):
        with pytest.raises(ValueError):
            arr.append(np.zeros((3, 3), dtype="i4"))
    # zarr-python refuses axis=-1; NumPy's meaning is clear, so we accept it
    assert c.append(np.ones((200, 2), dtype="i4"), axis=-1) == (200, 22)


# -- attributes --------------------------------------------------------------------------------
def test_attrs_mapping_like_zarr():
    results = []
    for mod in (zarr, cs):
        a = mod.zeros((4,), chunks=(2,), dtype="i4")
        a.attrs["foo"] = "bar"
        a.attrs["baz"] = 42
        out = [sorted(a.attrs), "foo" in a.attrs, a.attrs["baz"], len(a.attrs)]
        a.attrs.update({"l": [1, 2]}, n=None)
        out.append(a.attrs.asdict())
        out.append(a.attrs.setdefault("s", 1))
        out.append(a.attrs.pop("s"))
        a.attrs.put({"only": 1})
        out.append(dict(a.attrs))
        out.append(a.attrs == {"only": 1})
        out.append(a.attrs.get("nope", 5))
        with pytest.raises(KeyError):
            a.attrs["missing"]
        with pytest.raises(KeyError):
            del a.attrs["missing"]
        a.attrs.clear()
        out.append(dict(a.attrs))
        results.append(out)
    assert results[0] == results[1]


def test_attrs_persist_and_read_only(tmp_path):
    path = str(tmp_path / "a.zarr")
    z = cs.open(path, mode="w", shape=(4,), chunks=(2,), dtype="i4")
    z.attrs["x"] = {"nested": [1, 2.5, "s", None, True]}
    z.attrs["n"] = np.int64(3)  # NumPy scalars are stored as JSON numbers (zarr: TypeError)
    assert cs.open(path, mode="r").attrs.asdict() == {
        "x": {"nested": [1, 2.5, "s", None, True]}, "n": 3}
    assert zarr.open_array(path, mode="r").attrs["n"] == 3
    with pytest.raises(cs.ReadOnlyError):
        cs.open(path, mode="r").attrs["y"] = 1


def test_attrs_non_json_is_a_type_error_like_zarr():
    c, z = cs.zeros(3), zarr.zeros(3)
    with pytest.raises(TypeError):
        z.attrs["x"] = object()
    with pytest.raises(TypeError):
        c.attrs["x"] = object()
    with pytest.raises(cs.MetadataError):  # and it names the node
        c.attrs.update({"x": object()})
    # NaN is not JSON: zarr-python writes a bare NaN, we refuse (ValueError)
    with pytest.raises(ValueError):
        c.attrs["x"] = float("nan")
    assert dict(c.attrs) == {}


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
