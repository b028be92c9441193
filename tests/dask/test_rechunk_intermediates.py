"""Rechunk/transpose intermediates are never members (issue 30, item 8), and dead writers
are told apart by a host identity that differs between hosts (item 11).

A plan's intermediate arrays live under ``__chunkstore_tmp__`` (``group.scratch``),
which is never a node: chunkstore's and zarr-python's listings, ``ls``/``tree`` and
consolidated metadata never show them, while the plan runs or after it was SIGKILLed;
``chunkstore clean`` removes those of a dead process and keeps those of a live one.
"""

from __future__ import annotations

import importlib
import json
import os
import socket
import subprocess
import threading
import time
import uuid
import warnings
from pathlib import Path

import numpy as np
import pytest

import chunkstore as cs
import chunkstore.dask as csd
from chunkstore.cli import main
from chunkstore.group.scratch import OWNER, ScratchRun, owner_record, sweep_scratch
from chunkstore.nodes import pending
from chunkstore.nodes.paths import SCRATCH_DIR
from chunkstore.storage import host_identity as hid
from chunkstore.storage.local.temp import TEMP_PREFIX
from tests import multiproc
from tests.dask.rechunk_child import rechunk_until_stage_two

zarr = pytest.importorskip("zarr")

DATA = np.arange(64 * 64, dtype="f4").reshape(64, 64)


def _source(root: Path) -> None:
    g = cs.group(str(root))
    g.create_array("x", shape=DATA.shape, chunks=(64, 1), dtype="f4")[...] = DATA
    cs.consolidate_metadata(str(root))


def _keys(root: Path) -> set[str]:
    return set(cs.LocalStore(str(root)).list())


def _cli(capsys, *args: str) -> str:
    capsys.readouterr()
    assert main(list(args)) == 0
    return capsys.readouterr().out


def _zarr_members(root: Path, consolidated: bool) -> list[str]:
    with warnings.catch_warnings():
        # zarr-python warns of a directory in a group that is no node, and skips it
        warnings.simplefilter("ignore")
        g = zarr.open_group(str(root), mode="r", use_consolidated=consolidated)
        return sorted(name for name, _ in g.members(max_depth=None))


def _assert_no_member(root: Path, capsys) -> None:
    """Only x and y, in every listing there is."""
    g = cs.open_group(str(root), mode="r")
    assert g.keys() == ["x", "y"]
    assert [n for n, _ in g.members(max_depth=None)] == ["x", "y"]
    assert sorted(cs.open_group(str(root), mode="r", use_consolidated=False).keys()) == \
        ["x", "y"]
    assert _zarr_members(root, consolidated=True) == ["x", "y"]
    assert _zarr_members(root, consolidated=False) == ["x", "y"]
    listed = _cli(capsys, "ls", "-r", str(root))
    assert [line.split()[0] for line in listed.splitlines()] == ["x", "y"]
    assert "rechunk" not in _cli(capsys, "tree", str(root))
    consolidated = json.loads((root / "zarr.json").read_bytes())["consolidated_metadata"]
    assert sorted(consolidated["metadata"]) == ["x", "y"]
    assert "rechunk" not in json.dumps(consolidated) and SCRATCH_DIR not in json.dumps(consolidated)


def test_sigkilled_rechunk_intermediate_is_no_member_and_clean_removes_it(tmp_path, capsys):
    root = tmp_path / "s.zarr"
    _source(root)
    before = _keys(root)
    ready = tmp_path / "ready"
    # a process from the suite's fork server (no interpreter start), SIGKILLed below
    child = multiproc.context().Process(target=rechunk_until_stage_two,
                                        args=(str(root), str(ready)))
    child.start()
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():  # the child's own signal: stage 2 has begun
            assert child.exitcode is None, f"the child exited ({child.exitcode})"
            assert time.monotonic() < deadline, "the child never reached stage 2"
            time.sleep(0.01)
        runs = os.listdir(root / SCRATCH_DIR)
        assert len(runs) == 1 and runs[0].startswith("y.rechunk-")
        intermediate = {k for k in _keys(root) - before if k.startswith(SCRATCH_DIR + "/")}
        assert f"{SCRATCH_DIR}/{runs[0]}/{OWNER}" in intermediate
        assert any("/c/" in k for k in intermediate)  # stage 1 wrote its chunks
        _assert_no_member(root, capsys)
        cs.consolidate_metadata(str(root))  # a consolidation made meanwhile, too
        _assert_no_member(root, capsys)

        live = _keys(root)
        out = _cli(capsys, "clean", str(root))
        assert "kept 1 rechunk intermediate(s) in use" in out and "removed 0" in out
        assert _keys(root) == live  # a live writer's intermediate is kept whole
    finally:
        child.kill()  # SIGKILL
        child.join()  # (reaped: its pid is no live writer's)

    _assert_no_member(root, capsys)
    out = _cli(capsys, "clean", str(root))
    assert f"removed 1 rechunk intermediate(s) of dead writers: {SCRATCH_DIR}/{runs[0]}" in out
    assert _keys(root) == before | {"y/zarr.json"}  # the target it had created, and no more
    assert not (root / SCRATCH_DIR).exists()
    assert not list(root.rglob(TEMP_PREFIX + "*"))
    np.testing.assert_array_equal(cs.open_array(str(root), path="x", mode="r")[...], DATA)
    assert "removed 0 leftover" in _cli(capsys, "clean", str(root))


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _forge_owner(store, run: str, **fields) -> None:
    record = {**owner_record(), **fields}
    store.set(f"{run}/{OWNER}", json.dumps(record).encode())


@pytest.mark.parametrize("in_temp_store", [False, True])
def test_intermediates_of_a_plan_in_use_are_no_members(tmp_path, in_temp_store):
    """While a plan's graph exists (``to_delayed``), its intermediate is no member of the
    target's group nor of a ``temp_store`` group, and clean keeps it (this process is
    alive); the plan then runs and removes it, leaving exactly the new array."""
    root = tmp_path / "s.zarr"
    _source(root)
    temp = tmp_path / "t.zarr"
    cs.group(str(temp)).create_array("keep", shape=(3,), dtype="i4")[...] = [1, 2, 3]
    before, temp_before = _keys(root), _keys(temp)
    plan = csd.rechunk(cs.open_array(str(root), path="x"), (1, 64), str(root), path="g/y",
                       max_mem="6KiB", temp_store=str(temp) if in_temp_store else None)
    delayed = plan.to_delayed()
    home = temp if in_temp_store else root / "g"
    assert len(os.listdir(home / SCRATCH_DIR)) == 1
    assert cs.open_group(str(root), mode="r").keys() == ["g", "x"]
    assert cs.open_group(str(root), path="g", mode="r").keys() == ["y"]
    assert cs.open_group(str(temp), mode="r").keys() == ["keep"]
    assert _zarr_members(root, consolidated=False) == ["g", "g/y", "x"]
    assert _zarr_members(temp, consolidated=False) == ["keep"]
    swept = sweep_scratch(cs.LocalStore(str(temp if in_temp_store else root)))
    assert swept.removed == [] and len(swept.live) == 1
    delayed.compute(scheduler="threads")
    plan.remove_intermediates()
    np.testing.assert_array_equal(cs.open_array(str(root), path="g/y", mode="r")[...], DATA)
    assert _keys(root) - before == {"g/zarr.json", "g/y/zarr.json"} | {
        f"g/y/c/{i}/0" for i in range(64)}
    assert _keys(temp) == temp_before
    assert not (home / SCRATCH_DIR).exists()


def test_root_target_keeps_intermediates_in_its_own_directory(tmp_path):
    """A root array's intermediates live in its own directory: nothing beside the store
    (where an enclosing group would list it), nothing left after."""
    src = cs.array(DATA, chunks=(64, 1))
    enclosing = cs.group(str(tmp_path / "g.zarr"))
    plan = csd.rechunk(src, (1, 64), str(tmp_path / "g.zarr" / "y"), max_mem="6KiB")
    plan.to_delayed()
    assert sorted(os.listdir(tmp_path / "g.zarr")) == ["y", "zarr.json"]
    assert len(os.listdir(tmp_path / "g.zarr" / "y" / SCRATCH_DIR)) == 1
    assert enclosing.keys() == ["y"]
    plan.remove_intermediates()
    plan.execute()
    assert sorted(os.listdir(tmp_path / "g.zarr" / "y")) == ["c", "zarr.json"]
    np.testing.assert_array_equal(cs.open_array(str(tmp_path / "g.zarr" / "y"))[...], DATA)


def test_clean_and_repair_judge_owners(tmp_path, capsys):
    """Dead here (PID gone, or reused by a later process): removed; another host's with a
    dead PID: kept while its heartbeat is fresh, removed once it is old; no owner record:
    never touched. ``verify --repair`` sweeps them too."""
    root = tmp_path / "s.zarr"
    _source(root)
    store = cs.LocalStore(str(root))
    before = _keys(root)
    other_host = hid.host_identity(boot_id=str(uuid.uuid4()))
    dead = _dead_pid()
    runs = {
        "dead": {"pid": dead},
        "reused": {"start": hid.process_start(os.getpid()) + 1},  # this PID, a later start
        "alive": {},
        "remote-fresh": {"host": other_host, "pid": dead},
        "remote-old": {"host": other_host, "pid": dead, "heartbeat": time.time() - 7200},
    }
    paths = {}
    for i, (name, fields) in enumerate(runs.items()):
        paths[name] = f"{SCRATCH_DIR}/a{i}.rechunk-{uuid.uuid4().hex[:16]}"
        _forge_owner(store, paths[name], **fields)
        store.set(f"{paths[name]}/0/zarr.json", b"{}")
        store.set(f"{paths[name]}/0/c/0", b"x")
    # no owner record, one that is no JSON, one too large to be ours (dead PID inside)
    unowned = [f"{SCRATCH_DIR}/b{i}.rechunk-{uuid.uuid4().hex[:16]}" for i in range(3)]
    store.set(f"{unowned[1]}/{OWNER}", b"{not json")
    _forge_owner(store, unowned[2], pid=dead, pad="x" * 5000)
    for run in unowned:
        store.set(f"{run}/0/c/0", b"x")
    out = _cli(capsys, "clean", str(root))
    assert "removed 3 rechunk intermediate(s)" in out
    left = {k.split("/")[1] for k in _keys(root) - before}
    assert left == {paths[n].split("/")[1] for n in ("alive", "remote-fresh")} | {
        run.split("/")[1] for run in unowned}
    assert "kept 2 rechunk intermediate(s) in use" in out and "kept 3 unknown" in out
    _forge_owner(store, paths["alive"], pid=dead)
    capsys.readouterr()
    assert main(["verify", str(root), "--repair"]) == 0
    assert "repair: removed 1 rechunk intermediate(s)" in capsys.readouterr().out
    assert {k.split("/")[1] for k in _keys(root) - before} == {
        paths["remote-fresh"].split("/")[1]} | {run.split("/")[1] for run in unowned}
    assert store.get(f"{unowned[2]}/0/c/0") == b"x"


@pytest.mark.parametrize("kind", ["memory", "fsspec-memory"])
def test_sweep_finds_runs_in_nested_groups_of_any_store(kind, monkeypatch):
    # the intermediate beside the target, also for fsspec's memory:// (a "remote" store
    # to chunkstore, whose intermediates would otherwise go to this machine's disk)
    monkeypatch.setattr(importlib.import_module("chunkstore.dask.rechunk"), "local_temp_store",
                        lambda nbytes, client: None)
    st = cs.MemoryStore() if kind == "memory" else cs.FsspecStore(
        f"memory://sweep-{uuid.uuid4().hex}/s.zarr")
    g = cs.group(st)
    g.create_array("x", shape=DATA.shape, chunks=(64, 1), dtype="f4")[...] = DATA
    g.create_group("a").create_group("b")
    before = set(st.list())
    plan = csd.rechunk(cs.open_array(st, path="x"), (1, 64), st, path="a/b/y", max_mem="6KiB")
    plan.to_delayed()
    assert cs.open_group(st, path="a/b").keys() == ["y"]
    swept = sweep_scratch(st)
    assert swept.removed == [] and [r.rsplit("/", 1)[0] for r in swept.live] == \
        [f"a/b/{SCRATCH_DIR}"]
    _forge_owner(st, swept.live[0], pid=_dead_pid(), start=None)
    assert sweep_scratch(st).removed == swept.live
    assert set(st.list()) == before | {"a/b/y/zarr.json"}


def test_heartbeat_refreshes_the_owner_record_until_removed(tmp_path):
    store = cs.LocalStore(str(tmp_path / "h"))
    run = ScratchRun(store, f"{SCRATCH_DIR}/rechunk-{uuid.uuid4().hex[:16]}")
    run.add_array(cs.create_array(cs.MemoryStore(), shape=(2,), dtype="i4").metadata)
    first = json.loads(store.get(run.owner_key))
    run.start_heartbeat(0.005)
    deadline = time.monotonic() + 10
    while json.loads(store.get(run.owner_key))["heartbeat"] == first["heartbeat"]:
        assert time.monotonic() < deadline, "no heartbeat"
        time.sleep(0.002)
    beat = json.loads(store.get(run.owner_key))
    assert {k: v for k, v in beat.items() if k != "heartbeat"} == \
        {k: v for k, v in first.items() if k != "heartbeat"}
    run.remove()
    assert list(store.list()) == [] and not (tmp_path / "h" / SCRATCH_DIR).exists()
    assert not [t for t in threading.enumerate() if t.name == "scratch-heartbeat"]
    # execute() beats while it runs, and stops
    plan = csd.rechunk(cs.array(DATA, chunks=(64, 1)), (1, 64), str(tmp_path / "o"),
                       max_mem="6KiB")
    plan.heartbeat = 0.001
    np.testing.assert_array_equal(plan.execute()[...], DATA)
    assert not [t for t in threading.enumerate() if t.name == "scratch-heartbeat"]
    assert sorted(os.listdir(tmp_path / "o")) == ["c", "zarr.json"]


# -- item 11: host identity --------------------------------------------------------------
def _old_format_host() -> str:
    """What the previous versions wrote for this host (host name + PID namespace only):
    just as well another host with the same name, in its initial PID namespace."""
    return f"{socket.gethostname()}/{os.readlink('/proc/self/ns/pid')}"


def test_host_identity_differs_between_boots_and_hosts():
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    assert hid.host_identity(boot_id=a) == hid.host_identity(boot_id=a)
    assert hid.host_identity(boot_id=a) != hid.host_identity(boot_id=b)
    assert hid.host_tag(hid.host_identity(boot_id=a)) != hid.host_tag(hid.host_identity(boot_id=b))
    real = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert hid.HOST_ID == hid.host_identity(boot_id=real) and real in hid.HOST_ID
    assert len(hid.HOST_TAG) == 16
    assert hid.process_start(os.getpid()) == hid.process_start(os.getpid()) is not None


def test_pending_token_of_another_host_is_not_taken_for_dead():
    dead = _dead_pid()
    now = time.time()
    assert pending.expired([now, hid.HOST_ID, dead, "self"])  # this host: dead at once
    for host in (hid.host_identity(boot_id=str(uuid.uuid4())), _old_format_host()):
        assert not pending.expired([now, host, dead, "self"]), host
        assert pending.expired([now - pending.TOKEN_TTL - 1, host, dead, "self"])  # by age
    assert not pending.expired([now, hid.HOST_ID, os.getpid(), "self"])


def test_temp_file_of_another_host_is_not_taken_for_dead(tmp_path):
    root = tmp_path / "r"
    cs.array(np.arange(4), store=str(root), chunks=2)
    dead = _dead_pid()
    import hashlib
    old_tag = hashlib.sha1(
        f"{socket.gethostname()}/{os.stat('/proc/self/ns/pid').st_ino}".encode()).hexdigest()[:8]
    other_tag = hid.host_tag(hid.host_identity(boot_id=str(uuid.uuid4())))
    names = {tag: f"{TEMP_PREFIX}{tag}-{dead}-1-0" for tag in (hid.HOST_TAG, old_tag, other_tag)}
    for name in names.values():
        (root / "c" / name).write_bytes(b"x")
    assert cs.LocalStore(str(root)).sweep_temp() == 1
    assert sorted(p.name for p in (root / "c").iterdir() if p.name.startswith(TEMP_PREFIX)) == \
        sorted([names[old_tag], names[other_tag]])
