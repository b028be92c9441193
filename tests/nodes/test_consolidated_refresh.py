"""Consolidated metadata follows changes made to the nodes it lists (zarr-python 2921)."""

import json

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


def test_arrays_outside_a_consolidated_group_cost_two_batched_reads(tmp_path):
    """No copy above: the ancestors' documents are read once before the commit (to mark
    copies, for crash safety) and once after it (a copy made meanwhile by
    consolidate_metadata), one batched call each; nothing else is read or written."""
    store = cs.MemoryStore()
    a = cs.create_array(store, "a/b/c", shape=(4,), chunks=(2,))
    calls, writes = [], []
    original, commit = store.get_many, store.commit_many
    store.get_many = lambda keys: calls.append(list(keys)) or original(keys)
    store.commit_many = lambda items: writes.extend(k for k, *_ in items) or commit(items)
    a.resize(8)
    ancestors = ["zarr.json", "a/zarr.json", "a/b/zarr.json"]
    # (resize first reads the array's own document to clear outside the stored shape)
    assert [c for c in calls if c != ["a/b/c/zarr.json"]] == [ancestors, ancestors]
    assert writes == ["a/b/c/zarr.json"]  # no consolidated copy touched
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


# -- a member opened through its own directory (the store's root inside the group) ------
@pytest.mark.parametrize("fmt", [2, 3])
def test_own_directory_keeps_every_enclosing_copy_current(tmp_path, fmt):
    """The store rooted at g.zarr/sub holds sub's own copy; g.zarr's copy lies outside
    it: both follow a change of sub/y made through that store (the enclosing one through
    a store rooted at g.zarr's directory, never a key outside a store's root)."""
    import os
    root = str(tmp_path / "g.zarr")
    g = cs.open_group(root, mode="w", zarr_format=fmt)
    g.create_group("sub").create_array("y", shape=(2,), chunks=(2,), dtype="i4")
    cs.consolidate_metadata(root, path="sub")
    cs.consolidate_metadata(root)
    sub = cs.open_group(os.path.join(root, "sub"), mode="r+")
    sub["y"].resize(5)
    sub["y"].attrs["u"] = 1
    sub.create_array("z", shape=(3,), dtype="u1")
    for where, path in ((root, "sub/y"), (os.path.join(root, "sub"), "y")):
        c = cs.open_group(where, mode="r", use_consolidated=True)
        assert c[path].shape == (5,) and dict(c[path].attrs) == {"u": 1}
    assert "sub/z" in cs.open_group(root, mode="r", use_consolidated=True)
    # a replacement through the member's own directory
    cs.create_array(os.path.join(root, "sub", "y"), shape=(7, 2), dtype="f4",
                    overwrite=True, zarr_format=fmt)
    assert cs.open_group(root, mode="r", use_consolidated=True)["sub/y"].shape == (7, 2)


def test_own_directory_writes_outside_only_into_enclosing_consolidated_groups(tmp_path):
    """A store whose root is not inside a group writes nothing outside it; one inside a
    consolidated group updates that group's copy, and only that document (a member the
    copy missed, e.g. created by another library, is listed again: it is one)."""
    import os
    a = cs.create_array(str(tmp_path / "plain" / "a.zarr"), shape=(2,), dtype="i4")
    g = cs.open_group(str(tmp_path / "g.zarr"), mode="w")
    g.create_array("listed", shape=(2,), dtype="i4")
    g.create_array("unlisted", shape=(2,), dtype="i4")
    cs.consolidate_metadata(str(tmp_path / "g.zarr"))
    doc = json.loads((tmp_path / "g.zarr" / "zarr.json").read_bytes())
    del doc["consolidated_metadata"]["metadata"]["unlisted"]  # as if made after the copy
    (tmp_path / "g.zarr" / "zarr.json").write_text(json.dumps(doc))
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}
    a.resize(4)
    cs.open_array(str(tmp_path / "g.zarr" / "unlisted"), mode="r+").resize(3)
    after = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}
    changed = sorted(os.path.relpath(p, tmp_path) for p in after if before.get(p) != after[p])
    assert changed == ["g.zarr/unlisted/zarr.json", "g.zarr/zarr.json", "plain/a.zarr/zarr.json"]
    assert cs.open_group(str(tmp_path / "g.zarr"), mode="r")["unlisted"].shape == (3,)


def test_own_directory_warns_when_the_enclosing_copy_cannot_be_written(tmp_path, monkeypatch):
    import os

    from chunkstore.nodes import enclosing
    root = str(tmp_path / "g.zarr")
    g = cs.open_group(root, mode="w")
    g.create_array("arr", shape=(4,), dtype="i4")
    cs.consolidate_metadata(root)
    monkeypatch.setattr(enclosing, "group_store",
                        lambda d: cs.LocalStore(d, read_only=True))  # e.g. no permission
    m = cs.open_array(os.path.join(root, "arr"), mode="r+")
    with pytest.warns(cs.nodes.consolidated.StaleConsolidatedMetadataWarning,
                      match=r"g\.zarr.*consolidate_metadata"):
        m.resize(8)
    assert m.shape == (8,)  # the change itself is made
    cs.consolidate_metadata(root)  # what the warning says to do
    assert cs.open_group(root, mode="r", use_consolidated=True)["arr"].shape == (8,)
