"""Creating an array from a source onto the source's own place (or a group above it, or a
place inside it) is refused before anything is deleted, through any spelling of the
place: ``from_array``/``create_array(data=...)``, ``array``, ``save``, ``save_group``,
``Group.create_array(data=...)`` and ``g[name] = source``. Before, ``overwrite=True``
deleted the source first and every element then read as the fill value.
"""

from __future__ import annotations

import os
import uuid

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import SameLocationError

DATA = np.arange(1, 61, dtype="i4").reshape(6, 10)


def _files(root) -> dict[str, bytes]:
    out = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            full = os.path.join(dirpath, name)
            with open(full, "rb") as f:
                out[os.path.relpath(full, root)] = f.read()
    return out


@pytest.fixture
def local_source(tmp_path, monkeypatch):
    g = cs.open_group(str(tmp_path / "data" / "g.zarr"), mode="w")
    src = g.create_array("x", shape=DATA.shape, chunks=(4, 4), dtype="i4", fill_value=-1)
    src[...] = DATA
    os.symlink(tmp_path / "data", tmp_path / "link")
    monkeypatch.chdir(tmp_path)
    return tmp_path, src


def _targets(t):
    real = t / "data" / "g.zarr"
    return {
        "itself": (str(real / "x"), None),
        "itself-through-group": (str(real), "x"),
        "group-above": (str(real), None),
        "directory-above": (str(t / "data"), None),
        "inside-it": (str(real / "x"), "sub"),
        "file-url": (f"file://{real}/x", None),
        "relative": ("data/g.zarr", "x"),
        "symlink": (str(t / "link" / "g.zarr" / "x") + "/", None),
        "fsspec-file": (cs.FsspecStore(f"file://{t}/link/g.zarr"), "x"),
    }


TARGETS = ["itself", "itself-through-group", "group-above", "directory-above", "inside-it",
           "file-url", "relative", "symlink", "fsspec-file"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("source_kind", ["array", "other-handle", "dask"])
def test_from_array_onto_its_own_place_is_refused(local_source, target, source_kind):
    t, src = local_source
    before = _files(t / "data")
    if source_kind == "other-handle":  # the source opened through another root
        src = cs.open_array(str(t / "link" / "g.zarr" / "x"), mode="r")
    elif source_kind == "dask":
        pytest.importorskip("dask")
        src = cs.dask.from_store(src)
    store, name = _targets(t)[target]
    with pytest.raises(SameLocationError):
        cs.from_array(store, data=src, name=name, overwrite=True)
    assert _files(t / "data") == before  # not a byte changed
    np.testing.assert_array_equal(cs.open_array(str(t / "data/g.zarr/x"), cache=0)[...], DATA)


@pytest.mark.parametrize("how", ["array", "save", "save-group", "group-create", "group-setitem",
                                 "create-array"])
def test_other_entries_onto_their_source_are_refused(local_source, how):
    t, src = local_source
    before = _files(t / "data")
    real = t / "data" / "g.zarr"
    with pytest.raises(SameLocationError):
        if how == "array":
            cs.array(src, store=f"file://{real}", name="x", overwrite=True)
        elif how == "save":
            cs.save(str(t / "link" / "g.zarr" / "x"), src)
        elif how == "save-group":  # replaces the group that holds the source
            cs.save(str(real), src, other=np.zeros(3))
        elif how == "group-create":
            g = cs.open_group(str(t / "link" / "g.zarr"), mode="r+")
            g.create_array("x", data=src, overwrite=True)
        elif how == "group-setitem":
            cs.open_group(f"file://{real}", mode="r+")["x"] = src
        else:
            cs.create_array("data/g.zarr/x", data=src, overwrite=True)
    assert _files(t / "data") == before
    np.testing.assert_array_equal(cs.open_array(str(real / "x"), cache=0)[...], DATA)


def test_fsspec_memory_group_and_array_spellings_are_refused():
    u = uuid.uuid4().hex
    g = cs.open_group(f"memory://{u}/g", mode="w")
    src = g.create_array("x", shape=DATA.shape, chunks=(4, 4), dtype="i4", fill_value=-1)
    src[...] = DATA
    store = cs.FsspecStore(f"memory://{u}")
    before = {k: store.get(k) for k in store.list_prefix("")}
    for where, name in [(f"memory://{u}/g/x", None), (f"memory:///{u}/g/", "x"),
                        (f"memory://{u}/g", None), (f"memory://{u}", "g")]:
        with pytest.raises(SameLocationError):
            cs.from_array(where, data=src, name=name, overwrite=True)
    assert {k: store.get(k) for k in store.list_prefix("")} == before
    np.testing.assert_array_equal(cs.open_array(f"memory://{u}/g/x", cache=0)[...], DATA)


def test_other_places_are_written(local_source):
    """A sibling (even one whose name starts the same) or another directory is fine."""
    t, src = local_source
    real = t / "data" / "g.zarr"
    for store, name in [(str(real), "x2"), (str(real / "x2"), None),
                        (str(t / "link" / "g.zarr"), "y"), (str(t / "other.zarr"), None)]:
        out = cs.from_array(store, data=src, name=name, overwrite=True)
        np.testing.assert_array_equal(out[...], DATA)
    np.testing.assert_array_equal(cs.open_array(str(real / "x"), cache=0)[...], DATA)
