"""Object references: one name per stored object, whatever root a handle was opened from.

Every spelling of one array (its group's handle plus the array path, the array's own
directory, a ``file://`` URL, a relative, absolute, trailing-slash or symlinked path, an
fsspec store) must give one synchronizer lock name, one decoded-chunk cache key and one
place for the same-location checks; a sibling array (even one whose name starts the same)
must give others.
"""

from __future__ import annotations

import itertools
import os
import uuid

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.io.cache.chunk_cache import ChunkCache
from chunkstore.io.cache.place import store_id
from chunkstore.io.overlap import overlaps, place
from chunkstore.io.rmw import lock_name
from chunkstore.storage import LocalStore, MemoryStore
from chunkstore.storage.fsspec.store import FsspecStore
from chunkstore.storage.reference import (
    ARCHIVE,
    ObjectRef,
    node_ref,
    object_ref,
    same_or_within,
    store_ref,
)
from chunkstore.storage.resolve import resolve_store
from chunkstore.storage.zip.store import ZipStore
from tests.cache_settle import settle

KEY = "c/0"


def _identities(store, path):
    """(lock name, cache key, reference) of the chunk KEY of the array at ``path``."""
    key = f"{path}/{KEY}" if path else KEY
    return (lock_name(store_ref(store), key), store_id(store).key(key),
            object_ref(store, key, resolve=True))


def _assert_one_object(handles, others):
    first = _identities(*handles[0])
    for h in handles:
        assert _identities(*h) == first, h
    for (sa, pa), (sb, pb) in itertools.product(handles, repeat=2):
        assert overlaps(sa, pa, sb, pb), ((sa, pa), (sb, pb))
        assert place(sa, pa) == place(sb, pb)
    for other in others:
        got = _identities(*other)
        for mine, theirs in zip(first, got, strict=True):
            assert mine != theirs, other
        for h in handles:
            assert not overlaps(*h, *other) and not overlaps(*other, *h), (h, other)


@pytest.fixture
def local_tree(tmp_path, monkeypatch):
    data = tmp_path / "data"
    g = cs.open_group(str(data / "g.zarr"), mode="w")
    for name in ("x", "x2", "y"):
        g.create_array(name, shape=(4,), chunks=(4,), dtype="i4")
    os.symlink(data, tmp_path / "link")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_every_local_spelling_is_one_object(local_tree):
    t = local_tree
    real = t / "data" / "g.zarr"
    handles = [
        (LocalStore(real), "x"),  # the group's handle
        (LocalStore(real / "x"), ""),  # the array's own
        (LocalStore(str(real) + "/"), "x"),  # trailing slash
        (LocalStore("data/g.zarr"), "x"),  # relative
        (LocalStore("./data/../data/g.zarr/x"), ""),
        (LocalStore(t / "link" / "g.zarr"), "x"),  # symlinked
        (LocalStore(t / "link" / "g.zarr" / "x"), ""),
        (resolve_store(f"file://{real}/x"), ""),
        (resolve_store("data/g.zarr"), "x"),
        (FsspecStore(f"file://{real}"), "x"),
        (FsspecStore(f"file://{t}/link/g.zarr/x/"), ""),
        (FsspecStore("file://data/g.zarr"), "x"),
        (cs.open_array(f"file://{t}/link/g.zarr", path="x").store, "x"),
    ]
    others = [(LocalStore(real), "x2"), (LocalStore(real / "x2"), ""),
              (LocalStore(t / "link" / "g.zarr"), "y")]
    _assert_one_object(handles, others)
    # one name in every process: no process-local identity in it, the real path
    assert lock_name(store_ref(handles[5][0]), "x/c/0") == f"file:/{str(real)[1:]}/x/c/0"


def test_a_symlinked_array_directory_inside_the_store(local_tree):
    """``g.zarr/alias`` -> ``g.zarr/x``: the group's handle with path ``alias`` reaches
    the objects of ``x`` (LocalStore follows symlinks that stay inside the root)."""
    real = local_tree / "data" / "g.zarr"
    os.symlink(real / "x", real / "alias")
    handles = [(LocalStore(real), "x"), (LocalStore(real), "alias"),
               (LocalStore(real / "alias"), "")]
    first = lock_name(store_ref(handles[0][0]), "x/c/0")
    assert lock_name(store_ref(LocalStore(real)), "alias/c/0") == first
    assert lock_name(store_ref(LocalStore(real / "alias")), "c/0") == first
    for (sa, pa), (sb, pb) in itertools.product(handles, repeat=2):
        assert overlaps(sa, pa, sb, pb)
    assert not overlaps(LocalStore(real), "alias", LocalStore(real), "y")


def test_every_fsspec_memory_spelling_is_one_object():
    u = uuid.uuid4().hex
    g = cs.open_group(f"memory://{u}/g", mode="w")
    for name in ("x", "x2"):
        g.create_array(name, shape=(4,), chunks=(4,), dtype="i4")
    handles = [(FsspecStore(f"memory://{u}/g"), "x"), (FsspecStore(f"memory://{u}/g/x"), ""),
               (FsspecStore(f"memory:///{u}/g/x/"), ""),
               (resolve_store(f"memory://{u}/g"), "x"),
               (cs.open_array(f"memory://{u}/g/x").store, "")]
    others = [(FsspecStore(f"memory://{u}/g"), "x2"), (FsspecStore(f"memory://{u}/g/x2"), ""),
              (MemoryStore(), "x")]
    _assert_one_object(handles, others)


def test_memory_stores_are_their_dicts():
    d: dict = {}
    handles = [(MemoryStore(d), "g/x"), (MemoryStore(d), "g/x")]
    _assert_one_object(handles, [(MemoryStore(), "g/x"), (MemoryStore(d), "g/y")])
    assert overlaps(MemoryStore(d), "g", MemoryStore(d), "g/x")


def test_zip_archive_spellings(tmp_path):
    path = tmp_path / "a.zip"
    z = ZipStore(str(path), mode="w")
    g = cs.open_group(z, mode="w")
    for name in ("x", "y"):
        g.create_array(name, shape=(4,), chunks=(4,), dtype="i4")
    z.close()
    os.symlink(tmp_path, tmp_path.parent / f"{tmp_path.name}-link")
    link = tmp_path.parent / f"{tmp_path.name}-link" / "a.zip"
    handles = [(ZipStore(str(path), mode="r"), "x"), (ZipStore(str(link), mode="r"), "x"),
               (FsspecStore(f"zip::file://{path}"), "x"),
               (FsspecStore(f"zip://x::file://{link}"), "")]
    others = [(ZipStore(str(path), mode="r"), "y"), (LocalStore(tmp_path), "x")]
    _assert_one_object(handles, others)
    # the directory holding the archive contains its arrays (replacing it deletes them)
    assert overlaps(LocalStore(tmp_path), "", ZipStore(str(path), mode="r"), "x")
    ref = store_ref(ZipStore(str(path), mode="r"))
    assert ref.parts[-1] == ARCHIVE and ref.namespace == store_ref(LocalStore(tmp_path)).namespace


def test_object_ref_is_an_immutable_hashable_value():
    ref = ObjectRef(("file",), ("tmp", "g"))
    assert ref.child("x/c/0") == ObjectRef(("file",), ("tmp", "g", "x", "c", "0"))
    assert hash(ref.child("x")) == hash(ObjectRef(("file",), ("tmp", "g", "x")))
    assert ref.child("") is ref and str(ref) == ref.name == "file:/tmp/g"
    with pytest.raises(AttributeError):
        ref.parts = ()  # type: ignore[misc]
    assert ref.contains(ref.child("x")) and not ref.child("x").contains(ref)
    assert ref.overlaps(ref.child("x")) and ref.child("x").overlaps(ref)
    assert not ref.child("x").overlaps(ref.child("x2"))  # components, not string prefixes
    assert not ref.overlaps(ObjectRef(("memory", 1), ("tmp", "g")))


def test_remote_roots_keep_inner_empty_components():
    """``s3://b/x//y`` holds other keys than ``s3://b/x/y`` (s3fs writes ``x//y/...``)."""
    a = ObjectRef(("s3", None), ("b", "x", "", "y"))
    b = ObjectRef(("s3", None), ("b", "x", "y"))
    assert a != b and not a.overlaps(b)


def test_unknown_stores_are_their_location():
    class Odd(MemoryStore):
        def location(self):
            return "somewhere"

    assert store_ref(Odd()) == ObjectRef(("somewhere",), ())
    assert object_ref(Odd(), "x/c/0").parts == ("x", "c", "0")
    assert store_id(Odd()).key("x/c/0") == (("somewhere",), "x/c/0")


def test_node_ref_and_same_or_within(local_tree):
    real = local_tree / "data" / "g.zarr"
    assert node_ref(LocalStore(local_tree / "link"), "g.zarr/x") == node_ref(
        LocalStore(real / "x"), "")
    assert same_or_within(LocalStore(real), "", LocalStore(local_tree / "link/g.zarr/x"), "")
    assert not same_or_within(LocalStore(real), "x", LocalStore(real), "x2")


def test_cache_serves_one_entry_to_every_handle(local_tree):
    """Reads through the group's handle (symlinked root) and the array's own (``file://``
    URL) share one cache entry; a write through either is seen through the other."""
    real = local_tree / "data" / "g.zarr"
    cache = ChunkCache(2**20)
    via_group = cs.open_array(str(local_tree / "link" / "g.zarr"), path="x", mode="r+",
                              cache=cache)
    via_array = cs.open_array(f"file://{real}/x", mode="r+", cache=cache)
    via_group[:] = np.arange(4, dtype="i4")
    settle(LocalStore(real), cache)  # a chunk is kept once older than the timestamp window
    np.testing.assert_array_equal(via_group[:], np.arange(4, dtype="i4"))
    np.testing.assert_array_equal(via_array[:], np.arange(4, dtype="i4"))
    assert len(cache) == 1
    via_array[1:3] = 7
    np.testing.assert_array_equal(via_group[:], np.array([0, 7, 7, 3], "i4"))


def test_handles_on_one_node_are_equal_whatever_their_root(tmp_path):
    """A group handle's member and a handle on the array itself are one array (equal, one
    hash), as are two spellings of a group; a sibling is another."""
    import chunkstore as cs

    root = cs.group(str(tmp_path / "g.zarr"))
    sub = root.create_group("sub")
    sub.create_array("x", shape=(4,), dtype="i4")
    sub.create_array("y", shape=(4,), dtype="i4")
    via_group = root["sub/x"]
    via_array = cs.open_array(str(tmp_path / "g.zarr" / "sub" / "x"))
    via_url = cs.open_array("file://" + str(tmp_path / "g.zarr"), path="sub/x")
    assert via_group == via_array == via_url
    assert len({via_group, via_array, via_url}) == 1
    assert via_group != root["sub/y"]
    assert cs.open_group(str(tmp_path / "g.zarr" / "sub")) == sub
    assert hash(cs.open_group(str(tmp_path / "g.zarr" / "sub"))) == hash(sub)
