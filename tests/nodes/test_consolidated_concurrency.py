"""Node documents and consolidated copies under concurrent writers, in real processes.

* ``nodes.documents.update_node`` is a read-modify-write of the stored document: 4
  processes growing one array's shape 100 times each end at 400 (none lost).
* Consolidated copies follow every change, whatever handle made it: 4 processes each
  appending 20 times to its own array of a consolidated group, each opening the array by
  its own path (never through the group), leave the root's copy with the real shapes;
  and a consolidated open after an append never shows the old shape.
"""

from __future__ import annotations

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.nodes.documents import read_node, update_node
from chunkstore.storage.resolve import resolve_store
from tests.multiproc import run_together

N_PROCS = 4
#: each S3 writer's changes: every one a request or more to the one server, and 8 from each
#: of 4 processes already collide (25 and 20 cost ~3x as much and proved the same)
S3_UPDATES = 8


def _run(target, args_of, n=N_PROCS, timeout=240):
    run_together(target, args_of, n, timeout)


def _grow(where, options, path, times, start):
    store = resolve_store(where, mode="r+", storage_options=options)
    start.wait()
    for _ in range(times):
        update_node(store, path, lambda m: m.replace(shape=(m.shape[0] + 1, *m.shape[1:])))


@pytest.mark.parametrize("fmt", [2, 3])
def test_update_node_in_four_processes_loses_nothing(tmp_path, fmt):
    where = str(tmp_path / "g.zarr")
    cs.create_array(where, "x", shape=(0, 3), chunks=(10, 3), dtype="i4", zarr_format=fmt)
    _run(_grow, lambda i: (where, None, "x", 100))
    store = resolve_store(where, mode="r")
    assert read_node(store, "x").shape == (400, 3)


# a race proves a backend once: this one on fsspec, the obstore race is test_s3_appenders_keep_the_root_copy_current
@pytest.mark.parametrize("s3_bucket_both", ["fsspec"], indirect=True)
def test_update_node_on_s3_loses_nothing(s3_bucket_both):
    url, options = s3_bucket_both  # options name the backend
    where = f"{url}/g.zarr"
    store = resolve_store(where, mode="a", storage_options=options)
    if not store.capabilities.conditional_writes:
        pytest.skip(f"{store!r} has no conditional commits: concurrent writers of one S3 "
                    "object need a synchronizer")
    cs.create_array(store, "x", shape=(0,), chunks=(10,), dtype="i4")
    _run(_grow, lambda i: (where, options, "x", S3_UPDATES))
    assert read_node(resolve_store(where, mode="r", storage_options=options),
                     "x").shape == (N_PROCS * S3_UPDATES,)


def test_update_node_changes_only_what_it_must(tmp_path):
    store = cs.MemoryStore()
    a = cs.create_array(store, "a", shape=(4,), dtype="i2", zarr_format=2,
                        attributes={"k": 1})
    zattrs = store.get("a/.zattrs")
    meta = update_node(store, "a", lambda m: m.replace(shape=(6,)))
    assert meta.shape == (6,) and meta.attributes == {"k": 1}
    assert store.get("a/.zattrs") is zattrs  # untouched document, not rewritten
    same = update_node(store, "a", lambda m: m)
    assert same.shape == (6,) and a.store is store
    with pytest.raises(cs.NodeNotFoundError):
        update_node(store, "missing", lambda m: m)
    with pytest.raises(cs.MetadataError, match="kind"):
        update_node(store, "a", lambda m: cs.group().metadata)


@pytest.mark.parametrize("fmt", [2, 3])
def test_change_runs_once_per_attempt_so_its_side_effects_are_committed_ones(fmt):
    store = cs.MemoryStore()
    a = cs.create_array(store, "a", shape=(0,), chunks=(7,), dtype="i4", zarr_format=fmt,
                        attributes={"k": 0})
    seen = []

    def grow(m):
        seen.append(m.shape[0])  # e.g. the row an append will write
        return m.replace(shape=(m.shape[0] + 1,), attributes={**m.attributes, "n": m.shape[0]})
    for _ in range(3):
        update_node(store, "a", grow)
    assert seen == [0, 1, 2]
    assert read_node(store, "a").attributes == {"k": 0, "n": 2}
    for i in range(10):  # a single appender's rows all land (v2 lost them once)
        a.append(np.array([i], dtype="i4"))
    np.testing.assert_array_equal(cs.open_array(store, path="a")[3:], np.arange(10))


# -- consolidated copies ----------------------------------------------------------------
APPENDS = 20


def _appender(where, options, name, times, start):
    a = cs.open_array(where, path=f"sub/{name}", mode="r+", storage_options=options)
    start.wait()
    for i in range(times):
        a.append(np.array([i], dtype="i4"))


def _consolidated_group(where, fmt, options=None):
    root = cs.open_group(where, mode="w", zarr_format=fmt, storage_options=options)
    sub = root.create_group("sub")
    for i in range(N_PROCS):
        sub.create_array(f"a{i}", shape=(0,), chunks=(7,), dtype="i4")
    cs.consolidate_metadata(where, storage_options=options)


@pytest.mark.parametrize("fmt", [2, 3])
def test_four_appenders_by_own_path_keep_the_root_copy_current(tmp_path, fmt):
    where = str(tmp_path / "g.zarr")
    _consolidated_group(where, fmt)
    _run(_appender, lambda i: (where, None, f"a{i}", APPENDS))
    g = cs.open_group(where, mode="r", use_consolidated=True)
    seen = [g[f"sub/a{i}"].shape[0] for i in range(N_PROCS)]
    real = [cs.open_array(where, path=f"sub/a{i}", mode="r").shape[0] for i in range(N_PROCS)]
    assert seen == real == [APPENDS] * N_PROCS
    for i in range(N_PROCS):
        np.testing.assert_array_equal(g[f"sub/a{i}"][:], np.arange(APPENDS))


def test_a_consolidated_open_after_an_append_never_shows_the_old_shape(tmp_path):
    where = str(tmp_path / "g.zarr")
    _consolidated_group(where, 3)
    a = cs.open_array(where, path="sub/a0", mode="r+")
    for n in range(1, 6):
        a.append(np.array([n], dtype="i4"))
        c = cs.open_group(where, mode="r", use_consolidated=True)
        assert c["sub/a0"].shape == (n,)
        assert c["sub"]["a0"].shape == (n,)
        np.testing.assert_array_equal(c["sub/a0"][:], np.arange(1, n + 1))


def test_members_created_or_deleted_anywhere_follow_in_the_copy(tmp_path):
    where = str(tmp_path / "g.zarr")
    _consolidated_group(where, 3)
    plain = cs.open_group(where, mode="r+", path="sub", use_consolidated=False)
    plain.create_array("new/deep", shape=(3,), dtype="u1")
    del plain["a1"]
    plain.attrs["title"] = "t"
    c = cs.open_group(where, mode="r", use_consolidated=True)
    assert "sub/new/deep" in c and "sub/new" in c and "sub/a1" not in c
    assert c["sub"].attrs["title"] == "t"
    assert sorted(c["sub"].array_keys()) == ["a0", "a2", "a3"]


def test_consolidate_then_nested_consolidation_both_follow(tmp_path):
    where = str(tmp_path / "g.zarr")
    _consolidated_group(where, 3)
    cs.consolidate_metadata(where, path="sub")  # "sub" holds its own copy too
    cs.open_array(where, path="sub/a2", mode="r+").resize(9)
    assert cs.open_group(where, mode="r", use_consolidated=True)["sub/a2"].shape == (9,)
    sub = cs.open_group(where, path="sub", mode="r", use_consolidated=True)
    assert sub["a2"].shape == (9,)


# a race proves a backend once: this one on obstore, the fsspec race is test_update_node_on_s3_loses_nothing
@pytest.mark.parametrize("s3_bucket_both", ["obstore"], indirect=True)
def test_s3_appenders_keep_the_root_copy_current(s3_bucket_both):
    url, options = s3_bucket_both  # options name the backend
    where = f"{url}/g.zarr"
    if not resolve_store(where, mode="a", storage_options=options).capabilities.conditional_writes:
        pytest.skip("FsspecStore has no conditional commits yet (storage/fsspec_store.py)")
    _consolidated_group(where, 3, options)
    _run(_appender, lambda i: (where, options, f"a{i}", S3_UPDATES))
    g = cs.open_group(where, mode="r", use_consolidated=True, storage_options=options)
    assert [g[f"sub/a{i}"].shape[0] for i in range(N_PROCS)] == [S3_UPDATES] * N_PROCS
