"""A rechunk into an object store keeps its intermediate on this machine's disk when every
worker reaches it (``chunkstore.dask.local_scratch``): real worker processes, a real S3
server (moto), real file systems (``/dev/shm`` is tmpfs)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import dask
import numpy as np
import pytest

import chunkstore as cs
import chunkstore.dask as csd
from chunkstore.dask import local_scratch
from chunkstore.dask.local_scratch import (
    PREFIX,
    file_system_type,
    local_temp_store,
    sweep_directories,
    workers_reach,
)
from chunkstore.group.scratch import OWNER, owner_record
from chunkstore.nodes.paths import SCRATCH_DIR
from chunkstore.storage.resolve import resolve_store
from tests.dask.scratch_helpers import files_below, s3_keys

distributed = pytest.importorskip("distributed")
DATA = np.random.default_rng(5).standard_normal((32, 48, 20))  # 240 KB: 2 stages at 200KB


def _left(base) -> list[str]:
    """What is left in the temporary directory: nothing, once a plan has ended."""
    return sorted(p.name for p in base.iterdir()) if base.exists() else []


def _s3_source(url, options):
    return cs.array(DATA, store=f"{url}/src.zarr", chunks=(8, 48, 2), storage_options=options)


def test_s3_rechunk_on_worker_processes_keeps_its_intermediate_on_local_disk(
        client, s3_bucket, scratch):
    """Two worker processes on this machine reach the directory: stage 1 writes the
    intermediate there (raw), never to S3; the target is exact, and both places hold
    no intermediate afterwards."""
    url, options = s3_bucket
    src = _s3_source(url, options)
    store = resolve_store(f"{url}/out.zarr", storage_options=options)
    plan = csd.rechunk(src, (32, 4, 20), store, path="re", max_mem="200KB")
    assert len(plan.stages) == 2 and plan.stages[0].raw_target
    assert any("intermediate on this machine's disk" in n for n in plan.notes), plan.notes
    delayed = plan.to_delayed()  # the intermediate array is created now
    try:
        (mine,) = _left(scratch)  # the plan's own directory, this user's alone
        assert mine.startswith(PREFIX) and (scratch / mine).stat().st_mode & 0o777 == 0o700
        assert mine in next(n for n in plan.notes if "this machine's disk" in n)
        made = files_below(scratch / mine)
        assert any(f.startswith(f"{SCRATCH_DIR}/rechunk-") and f.endswith(OWNER)
                   for f in made), made
        assert not any(SCRATCH_DIR in k for k in s3_keys(url, options))
        client.compute(delayed).result()
        written = files_below(scratch)
        assert any("/c/" in f for f in written), written  # stage 1's chunks, on this disk
        assert not any(SCRATCH_DIR in k for k in s3_keys(url, options))
    finally:
        plan.remove_intermediates()
    np.testing.assert_array_equal(cs.open_array(store, path="re", mode="r")[...], DATA)
    assert cs.open_array(store, path="re", mode="r").chunks == (32, 4, 20)
    assert _left(scratch) == []
    assert {k for k in s3_keys(url, options) if k.startswith("out.zarr/")} == {
        "out.zarr/zarr.json", "out.zarr/re/zarr.json"} | {
        f"out.zarr/re/c/0/{j}/0" for j in range(12)}


def test_without_a_cluster_the_threads_use_local_disk_too(s3_bucket, scratch):
    url, options = s3_bucket
    src = _s3_source(url, options)
    out = csd.rechunk(src, (32, 4, 20), f"{url}/out.zarr", max_mem="200KB",
                      storage_options=options)
    assert any("intermediate on this machine's disk" in n for n in out.notes)
    np.testing.assert_array_equal(out.execute()[...], DATA)
    assert _left(scratch) == []
    assert not any(SCRATCH_DIR in k for k in s3_keys(url, options))


def test_a_temp_store_given_wins(s3_bucket, scratch):
    """``temp_store=`` (here the bucket itself) keeps the intermediate where it says."""
    url, options = s3_bucket
    src = _s3_source(url, options)
    plan = csd.rechunk(src, (32, 4, 20), f"{url}/out.zarr", max_mem="200KB",
                       temp_store=resolve_store(f"{url}/tmp", storage_options=options),
                       storage_options=options)
    assert not any("this machine's disk" in n for n in plan.notes)
    plan.to_delayed()
    try:
        assert any(k.startswith(f"tmp/{SCRATCH_DIR}/rechunk-") for k in s3_keys(url, options))
        assert _left(scratch) == []
    finally:
        plan.remove_intermediates()


def test_local_targets_and_one_stage_plans_are_unchanged(tmp_path, scratch):
    """A target on this disk keeps its intermediate beside it; a one-stage plan has none."""
    cs.array(DATA, store=str(tmp_path / "a.zarr"), chunks=(8, 48, 2))
    plan = csd.rechunk(str(tmp_path / "a.zarr"), (32, 4, 20), str(tmp_path / "b.zarr"),
                       max_mem="200KB")
    assert len(plan.stages) == 2 and not any("this machine's disk" in n for n in plan.notes)
    np.testing.assert_array_equal(plan.execute()[...], DATA)
    assert _left(scratch) == []


def test_a_memory_backed_directory_is_never_used(tmp_path):
    """``/dev/shm`` is tmpfs: an intermediate there would be RAM, whatever its room."""
    if not os.path.isdir("/dev/shm") or file_system_type("/dev/shm") != "tmpfs":
        pytest.skip("no tmpfs at /dev/shm")
    assert file_system_type(str(tmp_path)) not in local_scratch.MEMORY_FILE_SYSTEMS
    with dask.config.set({"temporary-directory": "/dev/shm"}):
        assert local_temp_store(1, None) is None
    with dask.config.set({"temporary-directory": str(tmp_path)}):
        store, directory = local_temp_store(1, None)
        assert os.path.dirname(directory) == str(tmp_path)


def test_too_little_room_keeps_it_beside_the_target(s3_bucket, scratch):
    """An intermediate larger than the directory's free space (less the margin) is not
    put there: the plan keeps it beside the target on S3."""
    scratch.mkdir(parents=True)
    free = shutil.disk_usage(scratch).free
    assert local_temp_store(free, None) is None
    assert _left(scratch) == []
    assert local_temp_store(free - local_scratch.MARGIN_BYTES - (free // 5), None) is not None
    url, options = s3_bucket
    src = _s3_source(url, options)
    original = local_scratch.MARGIN_BYTES
    try:
        local_scratch.MARGIN_BYTES = free  # no room left over for anything
        plan = csd.rechunk(src, (32, 4, 20), f"{url}/out.zarr", max_mem="200KB",
                           storage_options=options)
    finally:
        local_scratch.MARGIN_BYTES = original
    assert not any("this machine's disk" in n for n in plan.notes)
    plan.to_delayed()
    try:
        assert any(SCRATCH_DIR in k for k in s3_keys(url, options))
    finally:
        plan.remove_intermediates()


def test_a_place_others_can_change_is_never_used(tmp_path):
    """A temporary directory (or one above it) writable by others without the sticky
    bit, or another user's: they could rename the plan's directory and put theirs in its
    place between the stages. Not used; ``/tmp``-like (sticky) is."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    for base in (shared, shared / "below"):
        with dask.config.set({"temporary-directory": str(base)}):
            assert local_temp_store(1, None) is None
    assert os.listdir(shared) == []
    shared.chmod(0o1777)  # sticky: only an entry's owner renames it
    with dask.config.set({"temporary-directory": str(shared)}):
        assert local_temp_store(1, None) is not None
    if os.geteuid() == 0:  # another user's directory
        theirs = tmp_path / "theirs"
        theirs.mkdir(mode=0o755)
        os.chown(theirs, 65534, 65534)
        with dask.config.set({"temporary-directory": str(theirs)}):
            assert local_temp_store(1, None) is None


def test_workers_are_asked_for_the_probe(client, tmp_path):
    """Every worker process reads the probe this process wrote; a probe with another
    token, or none, is not taken for the directory."""
    assert workers_reach(client, str(tmp_path))
    assert os.listdir(tmp_path) == []  # the probes are removed
    probe = tmp_path / ".probe-x"
    probe.write_text("abc")
    answers = client.run(local_scratch._reaches, str(probe), "abd")
    assert set(answers.values()) == {False}
    answers = client.run(local_scratch._reaches, str(tmp_path / "missing"), "abc")
    assert set(answers.values()) == {False}


def test_a_dead_plans_directory_is_swept_when_a_plan_makes_one(scratch):
    """A plan's directory whose run's owner died (SIGKILLed before its clean-up) is
    removed when a plan next makes one; one with a live run, one never used yet, and
    another user's are kept."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    scratch.mkdir(parents=True)
    for name, pid in (("dead", dead.pid), ("live", os.getpid())):
        store = cs.LocalStore(scratch / f"{PREFIX}{name}")
        run = f"{SCRATCH_DIR}/rechunk-{name.encode().hex():0>16}"
        store.set(f"{run}/{OWNER}", json.dumps({**owner_record(), "pid": pid}).encode())
        store.set(f"{run}/x/c/0", b"leftover")
    (scratch / f"{PREFIX}fresh").mkdir()
    _, directory = local_temp_store(1, None)
    assert _left(scratch) == sorted([f"{PREFIX}fresh", f"{PREFIX}live",
                                     os.path.basename(directory)])
    assert files_below(scratch / f"{PREFIX}live") == {
        f"{SCRATCH_DIR}/rechunk-000000006c697665/{OWNER}",
        f"{SCRATCH_DIR}/rechunk-000000006c697665/x/c/0"}
    old = scratch / f"{PREFIX}fresh"
    os.utime(old, (0, 0))  # made long ago and never used: a plan described, not run
    assert sweep_directories(str(scratch)) == [str(old)]


def test_an_asynchronous_client_is_not_taken_for_workers_that_reach(client, tmp_path):
    """An asynchronous client answers ``run`` with a coroutine: no probe is waited for, so
    the directory is not used (and nothing is left unawaited)."""
    import asyncio
    import warnings

    async def probe():
        async with distributed.Client(client.scheduler.address, asynchronous=True) as c:
            return workers_reach(c, str(tmp_path))

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # "coroutine ... never awaited"
        assert asyncio.run(probe()) is False
    assert os.listdir(tmp_path) == []


def test_where_owners_cannot_be_told_nothing_is_used_nor_swept(tmp_path, monkeypatch):
    """Without ``os.getuid`` (Windows) the safety of a place cannot be checked: the
    intermediate stays beside the target, and no directory is taken for this user's."""
    (tmp_path / f"{PREFIX}old").mkdir()
    os.utime(tmp_path / f"{PREFIX}old", (0, 0))
    monkeypatch.delattr(os, "getuid")
    with dask.config.set({"temporary-directory": str(tmp_path)}):
        assert local_temp_store(1, None) is None
    assert sweep_directories(str(tmp_path)) == []
    assert os.listdir(tmp_path) == [f"{PREFIX}old"]
