"""Groups: hierarchy API, tree, errors, and consolidated metadata (ours and zarr-python's)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.storage import MemoryStore, MetricsStore

READS = ("get", "get_many", "get_views", "get_ranges", "get_versioned_ranges",
         "get_versioned_many", "exists", "getsize", "read_into")


def counted(store: MetricsStore) -> tuple[int, int]:
    """(read calls, listing calls) since the store's last reset; a batch counts once."""
    reads = sum(store.calls[name] for name in READS)
    return reads, store.calls["list_dir"] + store.calls["list_prefix"]


@pytest.fixture(params=[2, 3])
def fmt(request):
    return request.param


@pytest.fixture(params=["memory", "local"])
def store(request, tmp_path):
    return MemoryStore() if request.param == "memory" else cs.LocalStore(tmp_path / "g.zarr")


def build(store, fmt):
    g = cs.group(store, zarr_format=fmt)
    g.attrs["title"] = "demo"
    g.create_array("a", shape=(10,), chunks=(3,), dtype="i4")[:] = np.arange(10)
    sub = g.create_group("sub", attributes={"level": 1})
    sub.create_dataset("b", data=np.eye(3, dtype="f4"))
    g.create_dataset("x/y/z", data=np.arange(4, dtype="u1"))
    return g


def test_hierarchy_api(store, fmt):
    g = build(store, fmt)
    assert g.zarr_format == fmt
    assert g.keys() == ["a", "sub", "x"]
    assert g.array_keys() == ["a"] and g.group_keys() == ["sub", "x"]
    assert [n for n, _ in g.arrays()] == ["a"]
    assert [n for n, _ in g.groups()] == ["sub", "x"]
    assert len(g) == 3 and list(g) == ["a", "sub", "x"]
    assert "a" in g and "x/y/z" in g and "x/y" in g and "nope" not in g and 3 not in g
    np.testing.assert_array_equal(g["x/y/z"][:], np.arange(4))
    np.testing.assert_array_equal(g["sub"]["b"][:], np.eye(3))
    assert isinstance(g["x/y"], cs.Group) and g["x/y"].name == "/x/y"
    assert g["sub"].attrs["level"] == 1
    assert dict(cs.open_group(store, mode="r+").attrs) == {"title": "demo"}
    names = [n for n, _ in g.members(max_depth=None)]
    assert names == ["a", "sub", "sub/b", "x", "x/y", "x/y/z"]
    assert [n for n, _ in g.members(max_depth=1)] == ["a", "sub", "sub/b", "x", "x/y"]
    with pytest.raises(KeyError, match="nope"):
        g["nope"]
    assert g.get("nope") is None


def test_require_and_delete(store, fmt):
    g = build(store, fmt)
    assert g.require_group("sub").attrs["level"] == 1
    assert g.require_group("new").name == "/new"
    a = g.require_array("a", shape=(10,), dtype="i8")  # the stored i4 casts safely to i8
    assert a.dtype == np.dtype("i4")
    with pytest.raises(TypeError, match="Incompatible dtype"):  # i4 does not fit i2
        g.require_array("a", shape=(10,), dtype="i2")
    with pytest.raises(TypeError, match="/a"):
        g.require_array("a", shape=(11,))
    with pytest.raises(TypeError, match="/a"):
        g.require_array("a", shape=(10,), dtype="i2", exact=True)
    with pytest.raises(TypeError, match="Incompatible object"):  # as zarr-python
        g.require_group("a")
    keys_before = set(store.list())
    del g["x"]
    assert "x" not in g and "x/y/z" not in g
    gone = {k for k in keys_before if k.startswith("x/")}
    assert gone and not gone & set(store.list())
    with pytest.raises(KeyError):
        del g["x"]


def test_tree_text(fmt):
    g = build(MemoryStore(), fmt)
    expected = "\n".join([
        "/",
        "├── a (10,) int32",
        "├── sub",
        "│   └── b (3, 3) float32",
        "└── x",
        "    └── y",
        "        └── z (4,) uint8",
    ])
    assert str(g.tree()) == expected
    assert "<pre>" in g.tree()._repr_html_() and "└── x" in g.tree()._repr_html_()
    assert str(g["x"].tree()) == "/x\n└── y\n    └── z (4,) uint8"
    assert str(g.tree(level=0)).count("\n") == 3  # zarr-python 3: level = max depth
    assert str(g.tree(level=1)).count("\n") == 5


def test_bad_input_names_the_path(tmp_path):
    path = tmp_path / "h.zarr"
    g = cs.group(str(path))
    g.create_array("arr", shape=(2,), dtype="i1")
    with pytest.raises(cs.NodeTypeError, match="arr"):
        cs.open_group(str(path), mode="r", path="arr")
    with pytest.raises(cs.NodeTypeError, match="'/'"):
        cs.open_array(str(path), mode="r")
    with pytest.raises(cs.NodeNotFoundError, match="missing"):
        cs.open_group(str(path), mode="r", path="missing")
    with pytest.raises(cs.NodeNotFoundError, match="missing"):
        cs.open_array(str(path), mode="r+", path="missing")
    with pytest.raises(cs.ContainsGroupError, match="'/'"):
        cs.open_group(str(path), mode="w-")
    with pytest.raises(cs.ContainsArrayError, match="arr"):
        g.create_group("arr")
    ro = cs.open_group(str(path), mode="r")
    with pytest.raises(cs.ReadOnlyError):
        ro.create_group("new")
    with pytest.raises(cs.ReadOnlyError):
        ro["arr"][0] = 1
    with pytest.raises(cs.ReadOnlyError):
        ro.attrs["k"] = 1
    before = {p: p.read_bytes() for p in path.rglob("*") if p.is_file()}
    with pytest.raises((TypeError, ValueError), match="attributes"):
        g.attrs["bad"] = object()
    with pytest.raises((TypeError, ValueError), match="attributes"):
        g.attrs["nan"] = float("nan")
    after = {p: p.read_bytes() for p in path.rglob("*") if p.is_file()}
    assert before == after


def test_open_dispatches_and_modes(tmp_path):
    path = str(tmp_path / "m.zarr")
    cs.group(path).create_array("a", shape=(3,), dtype="f8")
    assert isinstance(cs.open(path), cs.Group)
    assert isinstance(cs.open(path, path="a"), cs.Array)
    cs.open_group(path, mode="w")  # overwrite: the array is gone
    assert cs.open_group(path, mode="r").keys() == []
    g = cs.open_group(path, mode="a", path="deep/er")
    assert cs.open_group(path, mode="r").keys() == ["deep"] and g.name == "/deep/er"


def test_pickle_group(tmp_path):
    import pickle
    g = build(cs.LocalStore(tmp_path / "p.zarr"), 3)
    g2 = pickle.loads(pickle.dumps(g))
    assert g2 == g and g2.keys() == g.keys()



def test_creating_in_a_group_reads_only_the_new_paths():
    store = MetricsStore(MemoryStore())
    g = cs.group(store, path="deep/er")
    store.reset()
    g.create_array("a", shape=(2,), dtype="i1")
    g.create_group("b/c")  # "b" is created between: one batched read for both paths
    assert counted(store) == (2, 0)
    assert cs.open_group(store, path="deep/er/b", mode="r").keys() == ["c"]


def test_node_of_the_other_format_blocks_creation(fmt):
    store = MemoryStore()
    g = cs.group(store, zarr_format=fmt)
    other = 5 - fmt
    cs.create_array(store, "x", shape=(2,), dtype="i1", zarr_format=other)
    cs.group(store, path="y", zarr_format=other)
    with pytest.raises(cs.ContainsArrayError, match="x"):
        g.create_array("x", shape=(2,), dtype="i1")
    with pytest.raises(cs.ContainsGroupError, match="y"):
        g.create_group("y")
    assert g.create_array("x", shape=(3,), dtype="i1", overwrite=True).zarr_format == fmt
    assert g.keys() == ["x"]  # members are the nodes of the group's own format
    assert cs.open_array(store, path="x", mode="r").shape == (3,)
    keys = set(store.list())  # the old node's documents are gone
    assert ("x/zarr.json" in keys) == (fmt == 3) and ("x/.zarray" in keys) == (fmt == 2)


# -- consolidated metadata ------------------------------------------------------------------
def test_consolidated_open_costs_one_read(fmt):
    store = MetricsStore(MemoryStore())
    g = build(store, fmt)
    for i in range(20):
        g.create_array(f"many/m{i:02d}", shape=(4,), dtype="i2")
    cs.consolidate_metadata(store)
    store.reset()
    c = cs.open_group(store, mode="r+")
    walked = c.members(max_depth=None)
    assert len(walked) == 6 + 21
    assert {n: type(m).__name__ for n, m in walked}["sub/b"] == "Array"
    assert str(c.tree()) == str(cs.open_group(store, mode="r", use_consolidated=False).tree())
    store.reset()
    c = cs.open_group(store, mode="r+", zarr_format=fmt)
    assert counted(store) == (1, 0)
    store.reset()
    c = cs.open_group(store, mode="r+")  # v2: zarr.json is missing, then one v2 batch
    assert counted(store) == (1 if fmt == 3 else 2, 0)
    store.reset()
    c.members(max_depth=None)
    c["many"].keys()
    assert counted(store) == (0, 0)
    plain = cs.open_group(store, mode="r+", use_consolidated=False)
    store.reset()
    plain.members(max_depth=None)
    reads, lists = counted(store)
    assert lists > 1 and reads >= 3


def test_consolidated_follows_changes_made_through_the_group(fmt):
    store = MemoryStore()
    build(store, fmt)
    c = cs.consolidate_metadata(store)
    c.create_array("later/q", shape=(2,), dtype="i8")
    del c["sub"]
    c["x"].attrs["note"] = "hi"
    fresh = cs.open_group(store, mode="r+")
    assert fresh.info["Consolidated"] == "True"
    assert fresh.keys() == ["a", "later", "x"] and "later/q" in fresh
    assert fresh["x"].attrs["note"] == "hi"
    assert str(fresh.tree()) == str(cs.open_group(store, mode="r", use_consolidated=False).tree())


def test_use_consolidated_true_requires_it():
    store = MemoryStore()
    build(store, 3)
    with pytest.raises(cs.MetadataError, match="consolidated"):
        cs.open_group(store, mode="r", use_consolidated=True)


zarr = pytest.importorskip("zarr")


def test_zarr_python_reads_our_consolidated(tmp_path, fmt):
    path = str(tmp_path / "ours.zarr")
    build(cs.LocalStore(path), fmt)
    cs.consolidate_metadata(path)
    if fmt == 3:
        doc = json.loads((tmp_path / "ours.zarr" / "zarr.json").read_text())
        assert doc["consolidated_metadata"]["kind"] == "inline"
        assert set(doc["consolidated_metadata"]["metadata"]) == {"a", "sub", "sub/b", "x", "x/y",
                                                                "x/y/z"}
    else:
        doc = json.loads((tmp_path / "ours.zarr" / ".zmetadata").read_text())
        assert doc["zarr_consolidated_format"] == 1 and "sub/b/.zarray" in doc["metadata"]
    z = zarr.open_consolidated(path, mode="r", zarr_format=fmt)
    assert z.metadata.consolidated_metadata is not None
    assert sorted(z.array_keys()) == ["a"] and sorted(z.group_keys()) == ["sub", "x"]
    np.testing.assert_array_equal(z["x/y/z"][:], np.arange(4))
    np.testing.assert_array_equal(z["sub/b"][:], np.eye(3))
    assert dict(z.attrs) == {"title": "demo"} and z["sub"].attrs["level"] == 1


def test_we_read_zarr_python_hierarchies(tmp_path, fmt):
    path = str(tmp_path / "theirs.zarr")
    g = zarr.open_group(path, mode="w", zarr_format=fmt)
    g.attrs["who"] = "zarr"
    g.create_array("a", shape=(7,), chunks=(2,), dtype="i8")[:] = np.arange(7)
    s = g.create_group("s")
    s.create_array("b", shape=(2, 3), chunks=(1, 2), dtype="f4", attributes={"u": 2})[:] = 1.5
    ours = cs.open_group(path, mode="r")
    assert ours.zarr_format == fmt and ours.keys() == ["a", "s"]
    assert ours.info["Consolidated"] == "False"
    np.testing.assert_array_equal(ours["a"][:], np.arange(7))
    np.testing.assert_array_equal(ours["s/b"][:], np.full((2, 3), 1.5, "f4"))
    assert ours["s/b"].attrs["u"] == 2 and ours.attrs["who"] == "zarr"
    zarr.consolidate_metadata(path, zarr_format=fmt)
    ours = cs.open_group(path, mode="r")
    assert ours.info["Consolidated"] == "True"
    assert [n for n, _ in ours.members(max_depth=None)] == ["a", "s", "s/b"]
    np.testing.assert_array_equal(ours["s/b"][:], np.full((2, 3), 1.5, "f4"))


def test_zarr_python_walks_our_hierarchy(tmp_path, fmt):
    path = str(tmp_path / "walk.zarr")
    build(cs.LocalStore(path), fmt)
    z = zarr.open_group(path, mode="r", zarr_format=fmt)
    theirs = sorted(name for name, _ in z.members(max_depth=None))
    assert theirs == ["a", "sub", "sub/b", "x", "x/y", "x/y/z"]
    np.testing.assert_array_equal(z["a"][:], np.arange(10))
