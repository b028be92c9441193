"""Keys stay inside a LocalStore's root on every operation, not just the first one.

An array is opened and read (so every directory of it has been visited), then a
directory under it is swapped for a symlink to an outside directory that holds
sentinel files named like its chunks. Every later operation must refuse or see
nothing: no outside byte is read, no outside file is written, listed or deleted (the
sentinels keep their content and mtime, and no file appears next to them). The same
runs on a store opened by a ``file://`` URL, which resolves to a LocalStore.
"""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import InvalidKeyError
from chunkstore.storage import FsspecStore, LocalStore, MemoryStore, ZipStore
from chunkstore.storage.base import ANY

SECRET = b"OUTSIDE-SECRET" * 8


@pytest.fixture
def outside(tmp_path):
    """A directory outside the store with sentinel files named like chunk keys."""
    where = tmp_path / "outside"
    where.mkdir()
    for name in ("0", "1", "zarr.json"):
        (where / name).write_bytes(SECRET)
    return where


def snapshot(directory) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in directory.iterdir()}


@pytest.fixture(params=["path", "file-url"])
def array_and_root(request, tmp_path):
    root = tmp_path / "a.zarr"
    data = np.arange(16, dtype="i4").reshape(4, 4)
    cs.create_array(str(root), shape=(4, 4), chunks=(2, 2), dtype="i4", fill_value=-1)[...] = data
    target = str(root) if request.param == "path" else f"file://{root}"
    a = cs.open_array(target, mode="r+")
    assert isinstance(a.store, LocalStore)
    np.testing.assert_array_equal(a[...], data)  # every chunk directory visited once
    return a, root, data


def swap_for_symlink(path, target) -> None:
    """Replace ``path`` (a file or directory) by a symlink to ``target``."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
    os.symlink(target, path)


def test_directory_swapped_after_reads(array_and_root, outside):
    a, root, data = array_and_root
    before = snapshot(outside)
    swap_for_symlink(root / "c" / "0", outside)  # chunks (0, 0) and (0, 1)
    store = a.store
    with pytest.raises(InvalidKeyError, match="c/0"):
        a[...]
    with pytest.raises(InvalidKeyError, match="c/0"):
        a[0:2, 0:2] = 9  # a whole chunk
    with pytest.raises(InvalidKeyError, match="c/0"):
        a[0, 1] = 9  # a partial one (read-modify-write)
    np.testing.assert_array_equal(a[2:, :], data[2:, :])  # chunks elsewhere are fine
    for op in (lambda: store.get("c/0/0"), lambda: store.get("c/0/1", (0, 4)),
               lambda: store.get_many(["c/1/0", "c/0/0"]),
               lambda: store.get_views(["c/0/1"]),
               lambda: store.get_ranges([("c/0/0", (0, 3))]),
               lambda: store.get_versioned_many(["c/0/0"]),
               lambda: store.exists("c/0/0"), lambda: store.getsize("c/0/1"),
               lambda: store.set("c/0/0", b"x"), lambda: store.set("c/0/new", b"x"),
               lambda: store.commit_many([("c/0/0", b"x", ANY)]),
               lambda: store.delete("c/0/0"), lambda: store.delete_prefix("c/0"),
               lambda: list(store.list_prefix("c/0/")), lambda: list(store.list_dir("c/0"))):
        with pytest.raises(InvalidKeyError, match="c/0"):
            op()
    listed = list(store.list_prefix(""))
    assert not any(k.startswith("c/0/") for k in listed) and "c/1/0" in listed
    store.delete_prefix("c")  # deletes inside the root only, never through the link
    assert snapshot(outside) == before


def test_chunk_file_swapped_for_outside_file(array_and_root, outside):
    a, root, _ = array_and_root
    before = snapshot(outside)
    swap_for_symlink(root / "c" / "1" / "1", outside / "1")
    with pytest.raises(InvalidKeyError, match="c/1/1"):
        a[3, 3]
    for op in (lambda: a.store.get_views(["c/1/1"]), lambda: a.store.exists("c/1/1"),
               lambda: a.store.getsize("c/1/1"), lambda: a.store.get_many(["c/1/1"])):
        with pytest.raises(InvalidKeyError, match="c/1/1"):
            op()
    assert "c/1/1" not in list(a.store.list_prefix("c/"))
    a[2:4, 2:4] = 5  # replaces the symlink itself, inside the root
    assert snapshot(outside) == before
    np.testing.assert_array_equal(a[2:4, 2:4], 5)


def test_root_level_directory_swapped(array_and_root, outside):
    a, root, _ = array_and_root
    before = snapshot(outside)
    swap_for_symlink(root / "c", outside)
    with pytest.raises(InvalidKeyError):
        a[...]
    with pytest.raises(InvalidKeyError):
        a[...] = 1
    assert list(a.store.list_prefix("")) == ["zarr.json"]
    assert snapshot(outside) == before and sorted(os.listdir(outside)) == sorted(before)


def test_symlinks_inside_the_root_are_followed(tmp_path):
    st = LocalStore(tmp_path / "r")
    st.set("real/0", b"zero")
    os.symlink("real", tmp_path / "r" / "alias")  # relative, inside
    os.symlink(tmp_path / "r" / "real" / "0", tmp_path / "r" / "abs")  # absolute, inside
    assert st.get("alias/0") == b"zero" and st.get("abs") == b"zero"
    assert st.exists("abs") and st.getsize("alias/0") == 4
    os.symlink("../../r/real", tmp_path / "r" / "real" / "up")  # climbs out, comes back
    with pytest.raises(InvalidKeyError, match="real/up/0"):
        st.get("real/up/0")


def test_list_prefix_refuses_escaping_prefixes(tmp_path, outside):
    stores = [LocalStore(tmp_path / "l"), MemoryStore(), ZipStore(tmp_path / "z.zip", mode="w"),
              FsspecStore(f"file://{tmp_path}/f"), FsspecStore("memory://confinement")]
    for st in stores:
        for prefix in ("../outside", "../", "a/../../outside/", "/etc/", "a//b"):
            with pytest.raises(InvalidKeyError):
                list(st.list_prefix(prefix))
        assert list(st.list_prefix("..x")) == []  # a legal partial name
        st.close()


def _key_calls(st):
    """Every store method that takes keys, as one-argument calls."""
    return (st.get, st.exists, st.getsize, st.delete, st.get_versioned,
            lambda k: st.get_many([k]), lambda k: st.get_views([k]),
            lambda k: st.get_ranges([(k, None)]), lambda k: st.set(k, b"x"),
            lambda k: st.commit_many([(k, b"x", ANY)]))


def test_every_method_validates_keys(tmp_path):
    stores = [LocalStore(tmp_path / "l"), MemoryStore(), ZipStore(tmp_path / "z.zip", mode="w"),
              FsspecStore("memory://confinement-keys")]
    for st in stores:
        for call in _key_calls(st):
            with pytest.raises(InvalidKeyError):
                call("../outside")
        st.close()
