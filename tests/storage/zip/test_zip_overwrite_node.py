"""Overwriting one node of a ``.zip`` path replaces that node only, as on a directory.

``overwrite=True`` / mode ``"w"`` used to open the archive with ``ZipStore(mode="w")``,
which truncates it: every other node of the archive was lost. Now a ``.zip`` path in mode
``"w"`` appends, and the node is replaced through the same ``place_node`` ->
``delete_node`` -> ``delete_prefix`` path as on a directory; mode ``"w"`` at the root does
exactly what it does on a directory.
"""

from __future__ import annotations

import os
import zipfile

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import ConcurrentWriteError, NodeNotFoundError
from chunkstore.storage.resolve import resolve_store
from chunkstore.storage.zip.session import pending_session
from tests.cli_run import run_cli
from tests.multiproc import context

HOWS = ["create_array", "open_array_w", "open_group_w", "copy", "copy_group", "cli_copy"]
SRC = np.arange(30, dtype="i4").reshape(5, 6)
NEW = np.array([40, 41, 42], dtype="i4")
#: nodes that no overwrite of "new" may touch, with their exact data
KEPT = {"keep": np.array([1, 2, 3, 4], "i4"), "newer": np.array([5, 6], "i4"),
        "old/new": np.array([7, 8, 9], "i4")}
FOREIGN = {"notes.txt": b"not zarr", "old/readme": b"also not zarr"}


def _keys(path: str) -> list[str]:
    st = resolve_store(path, mode="r")
    try:
        return sorted(st.list_prefix(""))
    finally:
        st.close()


def _set_raw(path: str, entries: dict[str, bytes]) -> None:
    st = resolve_store(path)
    try:
        st.set_many(entries)
    finally:
        st.close()


def _sources(tmp_path) -> tuple[str, str]:
    """An array store and a group store to copy from."""
    src = str(tmp_path / "src.zarr")
    if not os.path.exists(src):
        cs.create_array(src, shape=SRC.shape, chunks=(2, 4), dtype="i4")[...] = SRC
        g = cs.open_group(str(tmp_path / "srcg.zarr"), mode="w", attributes={"from": "srcg"})
        g.create_array("m", shape=(3,), chunks=(2,), dtype="i4")[:] = NEW
    return src, str(tmp_path / "srcg.zarr")


def _fill(dst: str, existing: str) -> None:
    """``dst`` with the KEPT arrays, FOREIGN entries and a node "new" (``existing``: a
    v3 or v2 group with children, or an array)."""
    for name, data in KEPT.items():
        a = cs.create_array(dst, name=name, shape=data.shape, chunks=(2,), dtype="i4")
        a[:] = data
        a.store.close()
    if existing == "array":
        a = cs.create_array(dst, name="new", shape=(6,), chunks=(2,), dtype="i4")
        a[:] = 99
        a.store.close()
    else:
        fmt = 3 if existing == "group3" else 2
        g = cs.open_group(dst, mode="w-", path="new", zarr_format=fmt, attributes={"old": 1})
        g.create_array("a", shape=(2,), chunks=(1,), dtype="i4", zarr_format=fmt)[:] = [10, 11]
        g.create_array("b/c", shape=(1,), chunks=(1,), dtype="i4", zarr_format=fmt)[:] = [12]
        g.store.close()
    _set_raw(dst, FOREIGN)


def _overwrite(how: str, dst: str, node: str, tmp_path) -> None:
    """Replace the node at ``node`` ("" the root) of ``dst`` by one entry point, then
    commit (close)."""
    src, srcg = _sources(tmp_path)
    if how == "create_array":
        st = cs.create_array(dst, name=node or None, data=NEW, chunks=(2,),
                             overwrite=True).store
    elif how == "open_array_w":
        a = cs.open_array(dst, mode="w", path=node, shape=(3,), chunks=(2,), dtype="i4")
        a[:] = NEW
        st = a.store
    elif how == "open_group_w":
        st = cs.open_group(dst, mode="w", path=node, attributes={"fresh": True}).store
    elif how == "copy":
        st = cs.copy(cs.open_array(src, mode="r"), dst, path=node, overwrite=True).store
    elif how == "copy_group":
        st = cs.copy(cs.open_group(srcg, mode="r"), dst, path=node, overwrite=True).store
    else:  # the command, run in this process: all it wrote is committed when it returns
        r = run_cli("copy", src, dst, "--overwrite", *(["--dst-node", node] if node else []))
        assert r.returncode == 0, r.stderr
        assert pending_session(os.path.realpath(dst)) is None
        return
    st.close()


def _check_new(how: str, dst: str, node: str, others: tuple[str, ...] = ()) -> None:
    """The node at ``node`` holds exactly what ``_overwrite(how)`` put there (a new group:
    its own members and ``others``, members that were there and kept)."""
    if how in ("create_array", "open_array_w"):
        a = cs.open_array(dst, mode="r", path=node)
        assert a.shape == (3,) and a.dtype == np.dtype("i4")
        np.testing.assert_array_equal(a[:], NEW)
    elif how in ("copy", "cli_copy"):
        a = cs.open_array(dst, mode="r", path=node)
        assert a.shape == SRC.shape and a.dtype == SRC.dtype
        np.testing.assert_array_equal(a[...], SRC)
    elif how == "open_group_w":
        g = cs.open_group(dst, mode="r", path=node)
        assert g.attrs.asdict() == {"fresh": True}
        assert sorted(name for name, _ in g.members()) == sorted(others)
    else:
        g = cs.open_group(dst, mode="r", path=node)
        assert g.attrs.asdict() == {"from": "srcg"}
        assert sorted(name for name, _ in g.members()) == sorted(["m", *others])
        np.testing.assert_array_equal(cs.open_array(dst, mode="r", path=f"{node}/m")[:], NEW)


def _check_archive(path: str) -> None:
    """The committed archive holds each name once and no temporary file is left."""
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
    assert len(names) == len(set(names))
    leftovers = [f for f in os.listdir(os.path.dirname(path))
                 if f.startswith(os.path.basename(path)) and f != os.path.basename(path)]
    assert leftovers == []


# zipfile's "Duplicate name" warning: a node's keys deleted then written again must
# supersede the old entries quietly (and be compacted away at commit)
@pytest.mark.filterwarnings("error::UserWarning")
@pytest.mark.parametrize("existing", ["group3", "group2", "array"])
@pytest.mark.parametrize("how", HOWS)
def test_overwriting_one_node_of_a_zip_keeps_the_others(tmp_path, how, existing):
    listings = {}
    for ext in ("zarr", "zip"):
        dst = str(tmp_path / f"d.{ext}")
        _fill(dst, existing)
        _overwrite(how, dst, "new", tmp_path)
        for name, data in KEPT.items():
            a = cs.open_array(dst, mode="r", path=name)
            assert a.dtype == np.dtype("i4")
            np.testing.assert_array_equal(a[:], data)
        st = resolve_store(dst, mode="r")
        assert {k: st.get(k) for k in FOREIGN} == FOREIGN
        st.close()
        _check_new(how, dst, "new")
        # what was under the old node is gone (its children too)
        if existing != "array" and how not in ("open_group_w", "copy_group"):
            for child in ("new/a", "new/b/c", "new/b"):
                with pytest.raises(NodeNotFoundError):
                    cs.open(dst, mode="r", path=child)
        listings[ext] = _keys(dst)
        assert not any(k.startswith(("new/a/", "new/b/")) for k in listings[ext])
        # every new node is v3: the old node's v2 documents went with it
        assert not {"new/.zgroup", "new/.zattrs", "new/.zarray"} & set(listings[ext])
    assert listings["zip"] == listings["zarr"]  # the archive ends as the directory does
    _check_archive(str(tmp_path / "d.zip"))


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("root", ["group", "array", "none"])
def test_mode_w_at_the_root_of_a_zip_is_as_on_a_directory(tmp_path, how, root):
    """Mode "w" at the root replaces the node at the root and what is below it (the
    whole store, as on a directory); with no node at the root nothing is deleted."""
    listings = {}
    for ext in ("zarr", "zip"):
        dst = str(tmp_path / f"r.{ext}")
        if root == "array":
            a = cs.create_array(dst, shape=(4,), chunks=(2,), dtype="i4")
            a[:] = 3
            a.store.close()
            _set_raw(dst, FOREIGN)
        else:
            _fill(dst, "group3")
            if root == "none":
                st = resolve_store(dst)
                st.delete("zarr.json")
                st.close()
        before = _keys(dst)
        _overwrite(how, dst, "", tmp_path)
        _check_new(how, dst, "", ("keep", "newer", "new", "old") if root == "none" else ())
        listings[ext] = after = _keys(dst)
        if root == "none":
            # nothing was at the root: nothing deleted, as on a directory
            assert set(before) <= set(after)
            for name, data in KEPT.items():
                np.testing.assert_array_equal(cs.open_array(dst, mode="r", path=name)[:],
                                              data)
        else:
            assert not set(FOREIGN) & set(after)
            assert not any(k.startswith(("keep/", "old/", "newer/")) for k in after)
    assert listings["zip"] == listings["zarr"]
    _check_archive(str(tmp_path / "r.zip"))


def test_save_array_into_one_node_of_a_zip_keeps_the_others(tmp_path):
    dst = str(tmp_path / "s.zip")
    _fill(dst, "group3")
    cs.save_array(dst, NEW, path="new")
    for name, data in KEPT.items():
        np.testing.assert_array_equal(cs.open_array(dst, mode="r", path=name)[:], data)
    np.testing.assert_array_equal(cs.open_array(dst, mode="r", path="new")[:], NEW)
    with pytest.raises(NodeNotFoundError):
        cs.open(dst, mode="r", path="new/a")
    _check_archive(dst)


def test_overwrite_keeps_pending_writes_of_the_same_process(tmp_path):
    """A node written but not yet committed survives an overwrite of another node in the
    same process (mode "w" no longer starts the shared session over)."""
    dst = str(tmp_path / "p.zip")
    k = cs.create_array(dst, name="keep", shape=(4,), chunks=(2,), dtype="i4")
    k[:] = KEPT["keep"]
    assert not os.path.exists(dst)  # pending
    cs.create_array(dst, name="new", data=NEW, chunks=(2,), overwrite=True).store.close()
    np.testing.assert_array_equal(cs.open_array(dst, mode="r", path="keep")[:], KEPT["keep"])
    np.testing.assert_array_equal(cs.open_array(dst, mode="r", path="new")[:], NEW)
    del k
    _check_archive(dst)


def _set_first_of_keep(dst: str) -> None:
    """The second writing process: sets keep[0] to 100 and commits the archive."""
    a = cs.open_array(dst, path="keep", mode="r+")
    a[0] = 100
    a.store.close()


def test_overwrite_against_a_second_writing_process_keeps_both(tmp_path):
    """The one-writer guarantee holds for a node overwrite: a commit finding the archive
    replaced by another process raises ConcurrentWriteError, leaves that process's
    archive in place and keeps its own version beside it."""
    dst = str(tmp_path / "c.zip")
    _fill(dst, "group3")
    a = cs.create_array(dst, name="new", data=NEW, chunks=(2,), overwrite=True)
    other = context().Process(target=_set_first_of_keep, args=(dst,))
    other.start()
    other.join(60)
    assert other.exitcode == 0
    with pytest.raises(ConcurrentWriteError):
        a.store.close()
    # on disk: the other process's archive, untouched by this one
    np.testing.assert_array_equal(cs.open_array(dst, mode="r", path="keep")[:], [100, 2, 3, 4])
    np.testing.assert_array_equal(cs.open_array(dst, mode="r", path="new/a")[:], [10, 11])
    kept = [f for f in os.listdir(tmp_path) if f.startswith("c.zip.conflict")]
    assert len(kept) == 1
    mine = str(tmp_path / kept[0])
    for name, data in KEPT.items():
        np.testing.assert_array_equal(cs.open_array(mine, mode="r", path=name)[:], data)
    np.testing.assert_array_equal(cs.open_array(mine, mode="r", path="new")[:], NEW)
    with pytest.raises(NodeNotFoundError):
        cs.open(mine, mode="r", path="new/a")
