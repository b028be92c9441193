"""Crash safety of consolidated copies (issue 10, "Consolidated metadata").

A writer that dies at any point of a change of a node listed in consolidated copies
(append, resize, attributes, deletion, replacement, through the group's store or through
the member's own directory) never leaves a copy that shows a wrong shape:

* chunkstore's consolidated open shows exactly the real tree (it reads the nodes a dead
  writer left marked pending from their own documents);
* zarr-python, which ignores the marks, sees such an array missing from the copy
  (``KeyError``), never with its old shape, and can always open the group;
* the next writer of the copy (or ``consolidate_metadata``) drops the dead writer's mark
  and writes the entry back, after which zarr-python sees the real tree again.

Each scenario runs in a child process that ``os._exit``s just after its n-th commit of a
metadata document (the store's ``commit_many``, which every LocalStore write goes
through, patched in the child: the steps of ``nodes.consolidated.guarded_change`` are
those commits: the copies marked, the node's documents committed, v2's ``.zarray``
before its ``.zattrs``, the copies settled), for n = 1, 2, ... until the operation
completes; then a SIGKILL loop kills appenders at random times.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
import warnings

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.nodes.documents import update_node
from chunkstore.nodes.pending import PENDING_KEY
from chunkstore.storage.local.store import LocalStore
from chunkstore.storage.resolve import resolve_store
from tests.multiproc import context
from tests.nodes.consolidated_crash_children import (
    after_document_commits,
    appender,
    crash_at,
    record,
)

zarr = pytest.importorskip("zarr")

MAX_STEPS = 12


def _ctx():
    """The suite's fork server context (one fork server per session, whichever test
    starts it: the same preload)."""
    return context()


def _build(root: str, fmt: int) -> None:
    g = cs.open_group(root, mode="w", zarr_format=fmt)
    a = g.create_array("arr", shape=(3,), chunks=(4,), dtype="i4", attributes={"a": 1})
    a[:] = [1, 2, 3]
    sub = g.create_group("sub", attributes={"t": 0})
    sub.create_array("y", shape=(2,), chunks=(2,), dtype="i4")
    g.create_array("other", shape=(1,), chunks=(1,), dtype="i4")
    cs.consolidate_metadata(root)


def _steps(root: str, op: str) -> list[list[str]]:
    """The metadata documents ``op`` commits, commit by commit (run in a child: the
    patch stays there)."""
    ctx = _ctx()
    out = ctx.Queue()
    p = ctx.Process(target=record, args=(root, op, out))
    p.start()
    steps = out.get(timeout=120)
    p.join(120)
    return steps


def _tree(group) -> dict:
    """path -> what chunkstore shows of every node below ``group``."""
    out = {}
    for name, m in group.members(max_depth=None):
        if isinstance(m, cs.Array):
            out[name] = ("array", m.shape, dict(m.attrs))
        else:
            out[name] = ("group", dict(m.attrs))
    return out


def _zarr_tree(root: str, fmt: int) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z = zarr.open_consolidated(root, zarr_format=fmt)
        return {name: ("array", m.shape, dict(m.attrs)) if isinstance(m, zarr.Array)
                else ("group", dict(m.attrs)) for name, m in z.members(max_depth=None)}


def _marks(root: str, fmt: int) -> dict:
    if fmt == 3:
        with open(os.path.join(root, "zarr.json")) as f:
            return json.load(f)["consolidated_metadata"].get(PENDING_KEY, {})
    with open(os.path.join(root, ".zmetadata")) as f:
        return json.load(f).get(PENDING_KEY, {})


def _check(root: str, fmt: int) -> dict:
    """Every reader's view against the real tree; returns the real tree."""
    real = _tree(cs.open_group(root, mode="r", use_consolidated=False))
    mine = _tree(cs.open_group(root, mode="r", use_consolidated=True))
    assert mine == real, "chunkstore's consolidated open differs from the real tree"
    theirs = _zarr_tree(root, fmt)  # zarr-python can always open the copy
    for name, seen in theirs.items():
        assert name in real, f"zarr-python lists {name!r}, which is gone"
        if seen[0] == "array":
            assert seen == real[name], f"zarr-python shows a stale array {name!r}: {seen}"
    missing = sorted(set(real) - set(theirs))
    if missing:  # only arrays marked pending may be missing
        assert all(real[m][0] == "array" for m in missing), missing
        assert set(missing) <= set(_marks(root, fmt)), (missing, _marks(root, fmt))
    return real


@pytest.mark.parametrize("fmt", [3, 2])
@pytest.mark.parametrize("op", ["append", "grow_and_attrs", "own_directory", "delete",
                                "group_attrs", "replace"])
def test_a_crash_at_any_step_never_shows_a_wrong_shape(tmp_path, fmt, op):
    ctx = _ctx()
    crashed_at = []
    for n in range(1, MAX_STEPS + 1):
        root = str(tmp_path / f"g{n}.zarr")
        _build(root, fmt)
        p = ctx.Process(target=crash_at, args=(root, op, n))
        p.start()
        p.join(120)
        assert p.exitcode in (0, 17), p.exitcode
        real = _check(root, fmt)
        # the next writer of the copy drops the dead writer's mark: all readers agree
        cs.open_array(root, path="other", mode="r+").attrs["after"] = n
        assert _marks(root, fmt) == {}
        real = _check(root, fmt)
        assert _zarr_tree(root, fmt) == real
        if p.exitcode == 0:
            break
        crashed_at.append(n)
    else:
        pytest.fail(f"{op} still crashing after {MAX_STEPS} steps")
    assert len(crashed_at) >= 3  # marked, committed, settled at least


COPY = {3: "zarr.json", 2: ".zmetadata"}


@pytest.mark.parametrize("fmt, op, node", [
    (3, "append", ["arr/zarr.json"]), (2, "append", ["arr/.zarray"]),
    (3, "own_directory", ["zarr.json"]),
    (3, "group_attrs", ["sub/zarr.json"]), (2, "group_attrs", ["sub/.zattrs"]),
])
def test_the_crash_points_are_the_protocol_steps(tmp_path, fmt, op, node):
    """What the loop above dies after, step by step: the copy marked, the node's
    document committed, the copy settled (each commit a point where a crash is tried)."""
    root = str(tmp_path / "g.zarr")
    _build(root, fmt)
    steps = _steps(root, op)
    assert steps[0] == [COPY[fmt]]  # marked
    assert node in steps[1:-1]  # committed (own_directory: keys of the array's store)
    assert steps[-1] == [COPY[fmt]]  # settled


def test_a_v2_crash_point_between_the_node_documents(tmp_path):
    """v2 keeps a node's shape and attributes in two documents: a crash can come between
    them (the point ``main-committed`` of the old hook)."""
    root = str(tmp_path / "g.zarr")
    _build(root, 2)
    steps = _steps(root, "grow_and_attrs")
    i = steps.index(["arr/.zarray"])
    assert steps[i + 1] == ["arr/.zattrs"]
    assert steps[0] == steps[-1] == [COPY[2]]


@pytest.mark.parametrize("fmt", [3, 2])
def test_consolidate_metadata_clears_a_dead_writers_mark(tmp_path, fmt):
    root = str(tmp_path / "g.zarr")
    _build(root, fmt)
    p = _ctx().Process(target=crash_at, args=(root, "append", 2))  # after the commit
    p.start()
    p.join(120)
    assert p.exitcode == 17
    assert list(_marks(root, fmt)) == ["arr"]
    assert "arr" not in _zarr_tree(root, fmt)
    assert cs.open_group(root, mode="r", use_consolidated=True)["arr"].shape == (5,)
    cs.consolidate_metadata(root)
    assert _marks(root, fmt) == {}
    assert _zarr_tree(root, fmt)["arr"][1] == (5,)


def test_a_live_writers_mark_survives_consolidate_and_other_writers(tmp_path):
    """A mark of a writer still at work is kept (its entry stays out of the copy) by
    consolidate_metadata and by other writers: dropping it could let the copy show the
    node's old metadata after that writer commits."""
    root = str(tmp_path / "g.zarr")
    _build(root, 3)
    seen = []

    def hook(keys):
        if keys == ["arr/zarr.json"] and not seen:  # the node committed, not yet settled
            seen.append(keys)
            cs.consolidate_metadata(root)  # mid-change, in this (live) process
            cs.open_array(root, path="other", mode="r+").attrs["x"] = 1
            assert list(_marks(root, 3)) == ["arr"]
            assert "arr" not in _zarr_tree(root, 3)
            assert cs.open_group(root, mode="r", use_consolidated=True)["arr"].shape == (5,)
    real = LocalStore.commit_many
    try:
        after_document_commits(hook)
        cs.open_array(root, path="arr", mode="r+").append(np.array([4, 5], dtype="i4"))
    finally:
        LocalStore.commit_many = real
    assert seen and _marks(root, 3) == {}
    assert _zarr_tree(root, 3)["arr"][1] == (5,)


def test_a_failed_change_takes_its_mark_back(tmp_path):
    root = str(tmp_path / "g.zarr")
    _build(root, 3)
    store = resolve_store(root, mode="r+")

    def boom(meta):
        raise RuntimeError("refused")
    with pytest.raises(RuntimeError, match="refused"):
        update_node(store, "arr", boom)
    assert _marks(root, 3) == {}
    assert _zarr_tree(root, 3)["arr"][1] == (3,)


def test_expired_marks_of_other_hosts_are_dropped(tmp_path, monkeypatch):
    from chunkstore.nodes import pending
    root = str(tmp_path / "g.zarr")
    _build(root, 3)
    with open(os.path.join(root, "zarr.json")) as f:
        doc = json.load(f)
    entry = doc["consolidated_metadata"]["metadata"].pop("arr")
    doc["consolidated_metadata"][PENDING_KEY] = {
        "arr": {"t1": [time.time() - 10, "elsewhere/ns", 1, "self"]}}
    with open(os.path.join(root, "zarr.json"), "w") as f:
        json.dump(doc, f)
    cs.open_array(root, path="other", mode="r+").attrs["x"] = 1  # too young: kept
    assert list(_marks(root, 3)) == ["arr"]
    assert cs.open_group(root, mode="r", use_consolidated=True)["arr"].shape == (3,)
    monkeypatch.setattr(pending, "TOKEN_TTL", 5.0)
    cs.open_array(root, path="other", mode="r+").attrs["x"] = 2
    assert _marks(root, 3) == {}
    assert _zarr_tree(root, 3)["arr"] == ("array", (3,), entry["attributes"])


def test_malformed_marks_are_refused_with_a_clear_error(tmp_path):
    root = str(tmp_path / "g.zarr")
    _build(root, 3)
    with open(os.path.join(root, "zarr.json")) as f:
        doc = json.load(f)
    doc["consolidated_metadata"][PENDING_KEY] = {"arr": ["not", "a", "token"]}
    with open(os.path.join(root, "zarr.json"), "w") as f:
        json.dump(doc, f)
    with pytest.raises(cs.MetadataError, match=PENDING_KEY):
        cs.open_group(root, mode="r", use_consolidated=True)
    doc["consolidated_metadata"][PENDING_KEY] = {"../../x": {"t": [0, "h", 1, "self"]}}
    with open(os.path.join(root, "zarr.json"), "w") as f:
        json.dump(doc, f)
    with pytest.raises(cs.errors.ChunkstoreError):
        cs.open_group(root, mode="r", use_consolidated=True)


def test_what_we_write_with_marks_stays_readable_by_zarr_python_and_tensorstore(tmp_path):
    ts = pytest.importorskip("tensorstore")
    root = str(tmp_path / "g.zarr")
    _build(root, 3)
    p = _ctx().Process(target=crash_at, args=(root, "append", 2))
    p.start()
    p.join(120)
    assert _marks(root, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z = zarr.open_group(root, mode="r")  # default: uses the copy
        assert sorted(z.keys()) == ["other", "sub"]  # "arr" pending: absent, not stale
        assert zarr.open_array(root, path="arr", mode="r").shape == (5,)
    t = ts.open({"driver": "zarr3", "kvstore": {"driver": "file",
                                                 "path": os.path.join(root, "arr")}}).result()
    assert t.shape == (5,)
    np.testing.assert_array_equal(t.read().result()[:3], [1, 2, 3])


# -- SIGKILL at random times ------------------------------------------------------------
@pytest.mark.parametrize("fmt", [3, 2])
def test_sigkill_loop_chunkstore_exact_zarr_python_never_stale(tmp_path, fmt):
    root = str(tmp_path / "g.zarr")
    _build(root, fmt)
    ctx = _ctx()
    rng = random.Random(fmt)
    outcomes = {"marked": 0, "clean": 0}
    for k in range(8):
        ready = ctx.Event()
        p = ctx.Process(target=appender, args=(root, k % 2 == 1, ready))
        p.start()
        assert ready.wait(60)
        time.sleep(rng.uniform(0.05, 0.4))
        os.kill(p.pid, signal.SIGKILL)
        p.join()
        outcomes["marked" if _marks(root, fmt) else "clean"] += 1
        _check(root, fmt)
    print(f"v{fmt}: after 8 kills: {outcomes}")
    cs.open_array(root, path="other", mode="r+").attrs["done"] = True
    assert _marks(root, fmt) == {}
    assert _zarr_tree(root, fmt) == _check(root, fmt)
