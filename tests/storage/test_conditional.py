"""Versioned reads and conditional commits (``get_versioned_many`` / ``commit_many``).

One conformance suite runs on every store; stores without compare-and-swap (zip, plain
fsspec file systems) must say so and then apply every item. Real processes then race
on one object through ``chunkstore.io.rmw.update_object`` on LocalStore and on S3
(moto's server), and the final content must be exact.
"""

from __future__ import annotations

import multiprocessing as mp
import uuid

import pytest

from chunkstore.io.rmw import update_object
from chunkstore.storage import FsspecStore, LocalStore, MemoryStore, Store, ZipStore
from chunkstore.storage.base import ABSENT, ANY

KINDS = ["memory", "local", "zip", "fsspec-memory", "s3"]
CAS = {"memory": True, "local": True, "zip": False, "fsspec-memory": False, "s3": True}


def open_store(kind: str, where: str, options: dict | None = None) -> Store:
    """A store of ``kind`` at ``where`` (a directory, an archive path or a URL)."""
    if kind == "local":
        return LocalStore(where)
    if kind == "zip":
        return ZipStore(where, mode="a")
    return FsspecStore(where, storage_options=options)


@pytest.fixture(params=KINDS)
def store(request, tmp_path):
    kind = request.param
    if kind == "memory":
        st: Store = MemoryStore()
    elif kind == "s3":
        url, options = request.getfixturevalue("s3_bucket")
        st = open_store("s3", url + "/cas.zarr", options)
    elif kind == "fsspec-memory":
        st = open_store(kind, f"memory://cas-{uuid.uuid4().hex}")
    else:
        st = open_store(kind, str(tmp_path / ("cas.zip" if kind == "zip" else "cas.zarr")))
    st.kind = kind  # type: ignore[attr-defined]
    yield st
    st.close()


def test_capability_flags(store):
    assert store.capabilities.conditional_writes is CAS[store.kind]
    assert store.capabilities.conditional_delete is CAS[store.kind]


def test_absent_creates_once(store):
    assert store.commit_many([("a/k", b"first", ABSENT)]) == [True]
    second = store.commit_many([("a/k", b"second", ABSENT)])
    if store.capabilities.conditional_writes:
        assert second == [False] and store.get("a/k") == b"first"
    else:
        assert second == [True] and store.get("a/k") == b"second"


def test_stale_generation_fails_fresh_one_applies(store):
    store.set("c/0", b"v1")
    value, generation = store.get_versioned("c/0")
    assert value == b"v1"
    store.set("c/0", b"v2")  # another writer replaces the object
    applied = store.set_if("c/0", b"from-v1", generation)
    if not store.capabilities.conditional_writes:
        assert applied and store.get("c/0") == b"from-v1"
        return
    assert not applied and store.get("c/0") == b"v2"
    value, generation = store.get_versioned("c/0")
    assert value == b"v2"
    assert store.set_if("c/0", b"from-v2", generation)
    assert store.get("c/0") == b"from-v2"
    assert not store.set_if("c/0", b"again", generation)  # used up by the commit


def test_same_size_same_content_replacement(store):
    """A replacement by identical bytes may pass the check (harmless); different bytes
    of the same size must not."""
    store.set("k", b"aaaa")
    _, generation = store.get_versioned("k")
    store.set("k", b"bbbb")
    if store.capabilities.conditional_writes:
        assert not store.set_if("k", b"cccc", generation)
        assert store.get("k") == b"bbbb"


def test_any_always_applies(store):
    assert store.commit_many([("x", b"1", ANY), ("y/z", b"2", ANY)]) == [True, True]
    assert store.commit_many([("x", b"3", ANY), ("y/z", None, ANY)]) == [True, True]
    assert store.get("x") == b"3" and store.get("y/z") is None
    assert store.commit_many([("never/was", None, ANY)]) == [True]


def test_delete_with_generation(store):
    store.set("d/k", b"v1")
    _, old = store.get_versioned("d/k")
    store.set("d/k", b"v2")
    _, current = store.get_versioned("d/k")
    if store.capabilities.conditional_delete:
        assert store.set_if("d/k", None, old) is False and store.get("d/k") == b"v2"
        assert store.set_if("d/k", None, current) is True
        assert store.get("d/k") is None and store.get_versioned("d/k") == (None, ABSENT)
        assert store.set_if("d/k", b"x", current) is False  # gone: If-Match fails
    else:
        assert store.set_if("d/k", None, current) is True and store.get("d/k") is None


def test_batch_reports_each_item(store):
    store.set_many({"b/1": b"1", "b/2": b"2"})
    found = store.get_versioned_many(["b/1", "b/2", "b/missing"])
    assert [v for v, _ in found] == [b"1", b"2", None] and found[2][1] is ABSENT
    store.set("b/2", b"changed")
    result = store.commit_many([("b/1", b"1+", found[0][1]), ("b/2", b"2+", found[1][1]),
                                ("b/missing", b"new", ABSENT), ("b/3", b"3", ANY)])
    if store.capabilities.conditional_writes:
        assert result == [True, False, True, True]
        assert store.get("b/2") == b"changed"
    else:
        assert result == [True] * 4
    assert store.get("b/1") == b"1+" and store.get("b/missing") == b"new"


def test_local_commits_leave_no_temp_or_lock_files(tmp_path):
    import os

    st = LocalStore(tmp_path / "r")
    st.set("c/0", b"v")
    _, generation = st.get_versioned("c/0")
    st.set("c/0", b"w")
    assert not st.set_if("c/0", b"x", generation)  # the losing temp file is removed
    assert st.commit_many([("c/1", b"y", ABSENT), ("c/0", None, ANY)]) == [True, True]
    assert os.listdir(tmp_path / "r" / "c") == ["1"] and list(st.list()) == ["c/1"]


# -- real processes ---------------------------------------------------------------------------
def _increment(kind: str, where: str, options: dict | None, start, rounds: int) -> None:
    st = open_store(kind, where, options)
    start.wait()
    for _ in range(rounds):
        update_object(st, "counter", lambda old: str(int(old or b"0") + 1).encode())


def _append(kind: str, where: str, options: dict | None, start, tag: str, rounds: int) -> None:
    st = open_store(kind, where, options)
    start.wait()
    for j in range(rounds):
        update_object(st, "doc", lambda old, j=j: (old or b"") + f"{tag}{j};".encode())


def _overwrite(kind: str, where: str, options: dict | None, start, rounds: int) -> None:
    import time

    st = open_store(kind, where, options)
    start.wait()
    for i in range(rounds):
        st.set("doc", f"M{i};".encode())
        time.sleep(0.005)


@pytest.fixture(params=["local", "s3"])
def shared(request, tmp_path):
    """``(kind, where, options)`` of a store that several processes open."""
    if request.param == "s3":
        url, options = request.getfixturevalue("s3_bucket")
        return "s3", url + "/race.zarr", options
    return "local", str(tmp_path / "race.zarr"), None


def test_four_processes_increment_one_counter(shared):
    ctx = mp.get_context("spawn")  # no fsspec loop or moto thread inherited
    start = ctx.Event()
    procs = [ctx.Process(target=_increment, args=(*shared, start, 50)) for _ in range(4)]
    for p in procs:
        p.start()
    start.set()
    _join(procs)
    assert open_store(*shared).get("counter") == b"200"


def test_unconditional_writes_are_never_lost_to_conditional_ones(shared):
    """One process replaces the object whole with markers M0; M1; ... while three append
    to it conditionally. Each append builds on what it read, so after the last marker
    was written only appends can follow: the final content starts with that marker, and
    every append after it appears once."""
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    rounds = 40
    procs = [ctx.Process(target=_overwrite, args=(*shared, start, rounds))]
    procs += [ctx.Process(target=_append, args=(*shared, start, tag, 30)) for tag in "abc"]
    for p in procs:
        p.start()
    start.set()
    _join(procs)
    final = open_store(*shared).get("doc").decode()
    tokens = final.split(";")[:-1]
    assert tokens[0] == f"M{rounds - 1}", final[:200]
    assert all(t[0] in "abc" for t in tokens[1:]) and len(set(tokens)) == len(tokens)
    for tag in "abc":  # each appender's tokens after the marker come in order
        mine = [int(t[1:]) for t in tokens[1:] if t[0] == tag]
        assert mine == list(range(30 - len(mine), 30)), (tag, mine)


def _join(processes: list) -> None:
    for p in processes:
        p.join(timeout=240)
    assert all(p.exitcode == 0 for p in processes), [p.exitcode for p in processes]


class FreshBytes(dict):
    """A mapping that hands out a new bytes object on every read (as fsspec's mapper)."""

    def __getitem__(self, key):
        return bytes(bytearray(super().__getitem__(key)))

    def get(self, key, default=None):
        return self[key] if key in self else default


def test_memory_store_on_a_mapping_with_fresh_objects():
    st = MemoryStore(FreshBytes())
    st.set("k", b"1")
    assert update_object(st, "k", lambda old: old + b"2") == b"12"
    _, generation = st.get_versioned("k")
    st.set("k", b"other")
    assert not st.set_if("k", b"x", generation) and st.get("k") == b"other"
