"""Red team: a rechunk into an object store keeping its intermediate on this machine's disk
(``chunkstore.dask.local_scratch``, commits 175f5c9 and 52a11ce), attacked as a hostile
user would: concurrent plans sharing the scratch directory, a plan SIGKILLed mid-way, odd
or hostile scratch directories, an intermediate removed under a running plan, transpose,
fsspec ``memory://`` on worker processes, the free-space check.

The tests once named ``test_BUG_...`` failed on 52a11ce (a shared, predictable
``chunkstore-scratch`` directory; missing intermediate chunks read as fill; the room
checked without padded edge chunks); they pass since each plan makes a private directory
of its own (``tempfile.mkdtemp``) in a place only this user can change, and scratch arrays
store every chunk and refuse a missing one. Dask's ``temporary-directory`` is a tmp_path
in every test."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import dask
import numpy as np
import pytest
from dask.callbacks import Callback

import chunkstore as cs
import chunkstore.dask as csd
from chunkstore.dask import local_scratch
from chunkstore.dask.local_scratch import PREFIX, local_temp_store
from chunkstore.group.scratch import OWNER
from chunkstore.nodes.paths import SCRATCH_DIR
from tests.dask.scratch_helpers import files_below, s3_keys

distributed = pytest.importorskip("distributed")
ROOT = Path(__file__).resolve().parents[2]
DATA = np.random.default_rng(5).standard_normal((32, 48, 20))  # 240 KB: 2 stages at 200KB
TARGET_CHUNKS = (32, 4, 20)
rechunk_module = importlib.import_module("chunkstore.dask.rechunk")


def _s3_source(url, options):
    return cs.array(DATA, store=f"{url}/src.zarr", chunks=(8, 48, 2), storage_options=options)


def _local_note(plan) -> bool:
    return any("intermediate on this machine's disk" in n for n in plan.notes)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


class _AfterStage0(Callback):
    """Runs ``action`` once, when stage 0's barrier task is done (the intermediate is
    complete, stage 1 has not read it yet)."""

    def __init__(self, action):
        super().__init__()
        self.action, self.done = action, False

    def _posttask(self, key, result, dsk, state, worker_id):
        if not self.done and isinstance(key, str) and key.startswith("rechunk-stage-0-done"):
            self.done = True
            self.action()


# A plan in a child process: ``url options tmpdir out marker go``; after stage 0 it
# writes ``marker`` and waits for ``go`` to exist (or forever when go is "-").
CHILD = r"""
import json, os, sys, time
import dask, numpy as np
import chunkstore as cs, chunkstore.dask as csd
from dask.callbacks import Callback
url, options, tmpdir, out, marker, go = sys.argv[1:7]
options = json.loads(options)
dask.config.set({"temporary-directory": tmpdir, "scheduler": "sync"})
src = cs.open_array(f"{url}/src.zarr", mode="r", storage_options=options)
plan = csd.rechunk(src, (32, 4, 20), f"{url}/{out}", max_mem="200KB",
                   storage_options=options)
assert any("this machine's disk" in n for n in plan.notes), plan.notes

class Pause(Callback):
    def _posttask(self, key, result, dsk, state, worker_id):
        if isinstance(key, str) and key.startswith("rechunk-stage-0-done"):
            open(marker, "w").close()
            deadline = time.monotonic() + 60
            while (go == "-" or not os.path.exists(go)) and time.monotonic() < deadline:
                time.sleep(0.05)

with Pause():
    a = plan.execute()
print("OK", bool(np.array_equal(a[...], np.random.default_rng(5).standard_normal((32, 48, 20)))))
"""


def _child(url, options, tmpdir, out, marker, go="-") -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, url, json.dumps(options), str(tmpdir), out,
         str(marker), str(go)], env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"child ended early: {proc.communicate()}")
        assert time.monotonic() < deadline, "child never reached the end of stage 0"
        time.sleep(0.05)


def _runs(scratch: Path) -> set[str]:
    """The runs in every plan directory of ``scratch``."""
    return {p.name for d in scratch.glob(f"{PREFIX}*") if (d / SCRATCH_DIR).is_dir()
            for p in (d / SCRATCH_DIR).iterdir()}


def _plan_dirs(scratch: Path) -> list[Path]:
    return sorted(scratch.glob(f"{PREFIX}*"))


def _planfiles_below(scratch: Path) -> set[str]:
    """The files in the plans' directories (not Dask's own, e.g. its workers' spill
    directory ``dask-scratch-space`` in the same temporary directory)."""
    return {f"{d.name}/{f}" for d in _plan_dirs(scratch) for f in files_below(d)}


# -- 1. concurrent plans sharing one scratch directory -----------------------------------

def test_two_plans_on_threads_share_the_scratch_directory(s3_bucket, scratch):
    """Plan A's run exists (to_delayed) when plan B is made (B sweeps on use), then both
    run at once on threads: both exact, A's run survives B's sweep, nothing left."""
    url, options = s3_bucket
    src = _s3_source(url, options)
    a = csd.rechunk(src, TARGET_CHUNKS, f"{url}/a.zarr", max_mem="200KB",
                    storage_options=options)
    da = a.to_delayed()
    run_a = _runs(scratch)
    assert len(run_a) == 1
    b = csd.rechunk(src, TARGET_CHUNKS, f"{url}/b.zarr", max_mem="200KB",
                    storage_options=options)
    assert _local_note(a) and _local_note(b)
    assert run_a <= _runs(scratch)  # B's sweep kept A's live run
    db = b.to_delayed()
    try:
        dask.compute(da, db, scheduler="threads")
    finally:
        a.remove_intermediates()
        b.remove_intermediates()
    for name in ("a.zarr", "b.zarr"):
        np.testing.assert_array_equal(cs.open_array(f"{url}/{name}", mode="r",
                                                    storage_options=options)[...], DATA)
    assert _planfiles_below(scratch) == set()
    assert not any(SCRATCH_DIR in k for k in s3_keys(url, options))


def test_two_plans_in_two_processes_share_the_scratch_directory(s3_bucket, scratch, tmp_path):
    """Process A pauses after stage 0 (its intermediate complete, on disk); process B is
    started then (its rechunk() sweeps the directory while A's run is live) and pauses
    after its own stage 0; both runs are there; both go on: both exact, nothing left."""
    url, options = s3_bucket
    _s3_source(url, options)
    go = tmp_path / "go"
    pa = _child(url, options, scratch, "a.zarr", tmp_path / "a.marker", go)
    try:
        _wait_for(tmp_path / "a.marker", pa)
        (run_a,) = _runs(scratch)
        pb = _child(url, options, scratch, "b.zarr", tmp_path / "b.marker", go)
        try:
            _wait_for(tmp_path / "b.marker", pb)
            assert run_a in _runs(scratch) and len(_runs(scratch)) == 2
            go.touch()
            outs = [p.communicate(timeout=30) for p in (pa, pb)]
        finally:
            pb.kill()
    finally:
        pa.kill()
    assert [p.returncode for p in (pa, pb)] == [0, 0], outs
    assert all(o[0].strip().endswith("OK True") for o in outs), outs
    for name in ("a.zarr", "b.zarr"):
        np.testing.assert_array_equal(cs.open_array(f"{url}/{name}", mode="r",
                                                    storage_options=options)[...], DATA)
    assert _planfiles_below(scratch) == set()
    assert not any(SCRATCH_DIR in k for k in s3_keys(url, options))


# -- 2. SIGKILL mid-plan ------------------------------------------------------------------

@pytest.mark.parametrize("cleaner", ["next-plan", "cli-clean"])
def test_a_killed_plans_run_stays_until_swept(s3_bucket, scratch, tmp_path, cleaner):
    """A plan SIGKILLed after stage 0 wrote its intermediate: the run stays (with its
    chunks) while the owner lives; once it is dead the next plan using the directory, or
    ``chunkstore clean <dir>``, removes it; the source is intact; the target on S3 is
    incomplete (no chunk of stage 1 written), not whole."""
    url, options = s3_bucket
    _s3_source(url, options)
    marker = tmp_path / "marker"
    proc = _child(url, options, scratch, "out.zarr", marker)
    try:
        _wait_for(marker, proc)
        left = _planfiles_below(scratch)
        assert any("/c/" in f for f in left) and any(f.endswith(OWNER) for f in left), left
        # live owner: a plan using the directory now keeps the run
        assert local_temp_store(1, None) is not None
        assert _planfiles_below(scratch) == left
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    assert _planfiles_below(scratch) == left  # nobody removed it at the kill
    if cleaner == "next-plan":
        src = cs.open_array(f"{url}/src.zarr", mode="r", storage_options=options)
        plan = csd.rechunk(src, TARGET_CHUNKS, f"{url}/again.zarr",
                           max_mem="200KB", storage_options=options)
        assert _local_note(plan)
        assert _planfiles_below(scratch) == set()
        np.testing.assert_array_equal(plan.execute()[...], DATA)
    else:
        (dead,) = [d for d in _plan_dirs(scratch) if files_below(d)]
        res = subprocess.run([sys.executable, "-m", "chunkstore", "clean", str(dead)],
                             env=_env(), capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res
        assert _planfiles_below(scratch) == set()
    np.testing.assert_array_equal(cs.open_array(f"{url}/src.zarr", mode="r",
                                                storage_options=options)[...], DATA)
    assert not any(k.startswith("out.zarr/c/") for k in s3_keys(url, options))
    assert _planfiles_below(scratch) == set()


# -- 3. odd scratch directories -------------------------------------------------------------

def _plan_and_run(url, options):
    src = _s3_source(url, options)
    plan = csd.rechunk(src, TARGET_CHUNKS, f"{url}/out.zarr", max_mem="200KB",
                       storage_options=options)
    out = plan.execute()
    np.testing.assert_array_equal(out[...], DATA)
    assert not any(SCRATCH_DIR in k for k in s3_keys(url, options))
    return plan


@pytest.mark.parametrize("kind", ["file", "dangling-symlink", "uncreatable",
                                  "spaces-unicode", "own-symlink", "relative", "home"])
def test_odd_temporary_directories(s3_bucket, tmp_path, monkeypatch, kind):
    """A temporary-directory that is a regular file, or below a file: the intermediate
    beside the target; a path with spaces and unicode, a symlink (of this user) to
    another directory or to one not made yet, a relative path, '~/x': used, exact,
    nothing left."""
    base = tmp_path / "t"
    base.mkdir()
    local, chosen = True, base / "tmp"
    if kind == "file":
        chosen.write_text("not a directory")
        local = False
    elif kind == "dangling-symlink":  # followed: its target made, this user's
        chosen.symlink_to(tmp_path / "nowhere" / "deeper")
    elif kind == "uncreatable":
        (base / "f").write_text("x")
        chosen, local = base / "f" / "sub", False
    elif kind == "spaces-unicode":
        chosen = base / "dir with spaces é ü 日本"
    elif kind == "own-symlink":
        (tmp_path / "elsewhere").mkdir()
        chosen.symlink_to(tmp_path / "elsewhere")
    elif kind == "relative":
        monkeypatch.chdir(base)
        chosen = "rel/x"
    elif kind == "home":
        monkeypatch.setenv("HOME", str(base))
        chosen = "~/x"
    url, options = s3_bucket
    with dask.config.set({"temporary-directory": str(chosen)}):
        plan = _plan_and_run(url, options)
    assert _local_note(plan) is local, plan.notes
    where = {"relative": base / "rel/x", "home": base / "x",
             "own-symlink": tmp_path / "elsewhere",
             "dangling-symlink": tmp_path / "nowhere" / "deeper"}.get(kind, Path(chosen))
    if local:
        assert where.is_dir() and list(where.iterdir()) == []
    if kind == "file":
        assert chosen.read_text() == "not a directory"


@pytest.mark.parametrize("content", ["array", "junk-json"])
def test_metadata_in_the_temporary_directory_breaks_no_plan(s3_bucket, scratch, content):
    """A ``zarr.json`` in the temporary directory (an array's, or malformed JSON) failed
    every rechunk into S3 on 52a11ce (PlanError: "... cannot hold this rechunk's
    intermediate array", or MetadataError): the plan's directory is its own now, and the
    plan is exact."""
    scratch.mkdir(parents=True)
    if content == "array":
        cs.array(np.zeros(3), store=str(scratch), chunks=(3,))
    else:
        (scratch / "zarr.json").write_text("{not json")
    url, options = s3_bucket
    _plan_and_run(url, options)


def _drop_dac_override() -> list[str]:
    """A command prefix that runs a child as root without CAP_DAC_OVERRIDE (file modes
    then apply to it, as to any other user)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run a child that file modes apply to")
    caps = "-dac_override,-dac_read_search"
    return ["setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}"]


UNWRITABLE_CHILD = r"""
import json, sys
import dask, numpy as np
import chunkstore as cs, chunkstore.dask as csd
url, options, tmpdir = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
dask.config.set({"temporary-directory": tmpdir})
src = cs.open_array(f"{url}/src.zarr", mode="r", storage_options=options)
plan = csd.rechunk(src, (32, 4, 20), f"{url}/out.zarr", max_mem="200KB",
                   storage_options=options)
a = plan.execute()
print("OK", bool(np.array_equal(a[...], np.random.default_rng(5).standard_normal((32, 48, 20)))))
"""


def test_an_unwritable_temporary_directory_is_not_used_without_a_cluster(
        s3_bucket, scratch):
    """A temporary directory this user cannot write (a 0555 directory, a child process
    without CAP_DAC_OVERRIDE): on 52a11ce the plan took it without a ``distributed``
    client and ``execute()`` raised PermissionError; now the plan's directory cannot be
    made there, so the intermediate stays beside the target and the plan is exact."""
    prefix = _drop_dac_override()
    url, options = s3_bucket
    _s3_source(url, options)
    scratch.mkdir(parents=True)
    scratch.chmod(0o555)
    try:
        res = subprocess.run([*prefix, sys.executable, "-c", UNWRITABLE_CHILD, url,
                              json.dumps(options), str(scratch)], env=_env(),
                             capture_output=True, text=True, timeout=60)
    finally:
        scratch.chmod(0o755)
    assert res.returncode == 0, res.stderr[-600:]
    assert res.stdout.strip().endswith("OK True"), res.stdout


@pytest.mark.parametrize("how", ["directory", "symlink"])
def test_a_temporary_directory_of_another_user_is_not_used(s3_bucket, scratch, tmp_path, how):
    """On 52a11ce the place was the predictable ``/tmp/chunkstore-scratch``: another local
    user could make it first (a 0777 directory of theirs, or a symlink to one) and read or
    change the intermediate between the stages. A temporary directory (or symlink to one)
    of another user is not used now (as ssh-style checks of a path do)."""
    other = 65534
    if os.geteuid() != 0:
        pytest.skip("needs root to give the directory to another user")
    if how == "directory":
        scratch.mkdir()
        scratch.chmod(0o777)
        os.chown(scratch, other, other)
    else:
        theirs = tmp_path / "theirs"
        theirs.mkdir()
        theirs.chmod(0o777)
        os.chown(theirs, other, other)
        scratch.symlink_to(theirs)
        os.lchown(scratch, other, other)
    url, options = s3_bucket
    src = _s3_source(url, options)
    plan = csd.rechunk(src, TARGET_CHUNKS, f"{url}/out.zarr", max_mem="200KB",
                       storage_options=options)
    try:
        assert not _local_note(plan), plan.notes
    finally:
        np.testing.assert_array_equal(plan.execute()[...], DATA)


# -- 4. the intermediate removed under the plan -----------------------------------------------

def test_the_scratch_removed_after_to_delayed_before_compute(s3_bucket, scratch):
    """rm -rf of the whole scratch directory after to_delayed(), before compute on worker
    processes: stage 0 fails loudly (NodeNotFoundError naming
    '__chunkstore_tmp__/rechunk-<hex>/0', the workers read the intermediate's metadata
    again), no chunk is written to the target; on this process's threads the cached
    metadata lets stage 0 write it again and the target is exact. Either way nothing is
    left."""
    url, options = s3_bucket
    src = _s3_source(url, options)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        plan = csd.rechunk(src, TARGET_CHUNKS, f"{url}/out.zarr", max_mem="200KB",
                           storage_options=options)
        assert _local_note(plan)
        delayed = plan.to_delayed()
        for d in _plan_dirs(scratch):
            shutil.rmtree(d)
        try:
            with pytest.raises(Exception, match=f"no array or group at path "
                                                f"'{SCRATCH_DIR}/rechunk-[0-9a-f]+/0'"):
                client.compute(delayed).result()
        finally:
            plan.remove_intermediates()
    assert not any(k.startswith("out.zarr/c/") for k in s3_keys(url, options))
    assert _planfiles_below(scratch) == set()
    plan = csd.rechunk(src, TARGET_CHUNKS, f"{url}/out2.zarr", max_mem="200KB",
                       storage_options=options)
    delayed = plan.to_delayed()
    for d in _plan_dirs(scratch):
        shutil.rmtree(d)
    try:
        dask.compute(delayed, scheduler="threads")
    finally:
        plan.remove_intermediates()
    np.testing.assert_array_equal(cs.open_array(f"{url}/out2.zarr", mode="r",
                                                storage_options=options)[...], DATA)
    assert _planfiles_below(scratch) == set()


def test_an_intermediate_removed_between_stages_fails_loudly(
        s3_bucket, scratch):
    """The intermediate removed after stage 0 wrote it and before stage 1 reads it (a
    cleaner of the temporary directory): on 52a11ce (and d57ab6c, beside a local target)
    stage 1 read every missing chunk as the fill value and the target on S3 held 0.0
    everywhere, with no error. Scratch arrays store every chunk and refuse a missing one
    now: a loud error naming the intermediate, or a correct target; never zeros."""
    url, options = s3_bucket
    src = _s3_source(url, options)
    plan = csd.rechunk(src, TARGET_CHUNKS, f"{url}/out.zarr", max_mem="200KB",
                       storage_options=options)
    assert _local_note(plan)
    with dask.config.set(scheduler="sync"), \
            _AfterStage0(lambda: [shutil.rmtree(d / SCRATCH_DIR) for d in _plan_dirs(scratch)]):
        try:
            plan.execute()
        except Exception as e:  # a loud failure is fine if it names the intermediate
            assert SCRATCH_DIR in str(e) or "rechunk-" in str(e), e
            return
    out = cs.open_array(f"{url}/out.zarr", mode="r", storage_options=options)[...]
    assert np.count_nonzero(out == 0) == 0, "the target holds zeros read from nowhere"
    np.testing.assert_array_equal(out, DATA)


# -- 5. transpose; more than two stages ---------------------------------------------------------

def test_transpose_into_s3_keeps_its_intermediate_local_and_removes_it(
        s3_bucket, scratch, monkeypatch):
    """transpose into S3 with chunks that need an intermediate: local, removed, exact.
    (The planner makes at most two stages, planner.py: three are not possible.)"""
    url, options = s3_bucket
    src = _s3_source(url, options)
    asked = []
    real = rechunk_module.local_temp_store
    monkeypatch.setattr(rechunk_module, "local_temp_store",
                        lambda n, c: asked.append(n) or real(n, c))
    out = csd.transpose(src, (2, 0, 1), f"{url}/t.zarr", chunks=(20, 32, 4),
                        max_mem="200KB", storage_options=options)
    assert asked, "no intermediate: the test needs a two-stage plan"
    np.testing.assert_array_equal(out[...], np.transpose(DATA, (2, 0, 1)))
    assert _planfiles_below(scratch) == set() and _plan_dirs(scratch) == []
    assert not any(SCRATCH_DIR in k for k in s3_keys(url, options))


# -- 6. fsspec memory:// on worker processes -----------------------------------------------------

def test_memory_target_on_worker_processes_fails_loudly_as_before(scratch):
    """fsspec memory:// is remote to chunkstore but lives in one process: the workers do
    not see it. Before 175f5c9 the plan failed at stage 0 (NodeNotFoundError, the
    intermediate in memory://); now stage 0 writes the local intermediate and stage 1
    fails (NodeNotFoundError naming the target 're'): loud either way (a pre-existing
    limitation, not a regression), nothing left on disk."""
    src = cs.array(DATA, store=str(scratch.parent / "src.zarr"), chunks=(8, 48, 2))
    store = cs.FsspecStore(f"memory://{uuid.uuid4().hex}/out.zarr")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        plan = csd.rechunk(src, TARGET_CHUNKS, store, path="re", max_mem="200KB")
        assert _local_note(plan)
        with pytest.raises(Exception, match="no array or group at path 're'"):
            plan.execute()
    assert _planfiles_below(scratch) == set()
    assert not cs.open_array(store, path="re", mode="r")[...].any()


# -- 7. free space ----------------------------------------------------------------------------

def test_free_space_boundary(scratch, monkeypatch):
    """(shutil.disk_usage monkeypatched in this process only) room for exactly the
    intermediate plus the margin: taken; one byte less: not."""
    nbytes = 10 << 30
    need = nbytes + max(local_scratch.MARGIN_BYTES, int(local_scratch.MARGIN_SHARE * nbytes))
    for free, taken in ((need, True), (need - 1, False)):
        monkeypatch.setattr(local_scratch.shutil, "disk_usage",
                            lambda p, f=free: shutil._ntuple_diskusage(f * 2, f, f))
        assert (local_temp_store(nbytes, None) is not None) is taken


def test_the_room_checked_counts_the_padded_edge_chunks(s3_bucket, scratch, monkeypatch):
    """Raw edge chunks are whole chunks on disk: (33, 33) float64, (1, 33) -> (33, 1) at
    max_mem=8KB has intermediate chunks (16, 16), 48*48 elements on disk for 33*33. On
    52a11ce the room asked for was prod(shape) * itemsize: 2.1x less than what was
    written. Simulated: MARGIN_BYTES=0 (an intermediate of 10 GiB or more, where the 10%
    share rules) and ``shutil.disk_usage`` monkeypatched in this process to report
    exactly the room asked for: what stage 0 writes fits in it."""
    url, options = s3_bucket
    data = np.random.default_rng(1).standard_normal((33, 33))
    src = cs.array(data, store=f"{url}/src2.zarr", chunks=(1, 33), storage_options=options)
    asked = []
    monkeypatch.setattr(local_scratch, "MARGIN_BYTES", 0)

    def room(path):
        n = asked[-1]
        free = n + int(local_scratch.MARGIN_SHARE * n)
        return shutil._ntuple_diskusage(free * 10, free * 9, free)

    monkeypatch.setattr(local_scratch.shutil, "disk_usage", room)
    real = rechunk_module.local_temp_store
    monkeypatch.setattr(rechunk_module, "local_temp_store",
                        lambda n, c: asked.append(n) or real(n, c))
    plan = csd.rechunk(src, (33, 1), f"{url}/out.zarr", max_mem="8KB",
                       storage_options=options)
    assert _local_note(plan)
    free = room(None).free
    delayed = plan.to_delayed()
    try:
        with _AfterStage0(lambda: asked.append(sum(
                p.stat().st_size for p in scratch.rglob("*") if p.is_file()))), \
                dask.config.set(scheduler="sync"):
            dask.compute(delayed)
    finally:
        plan.remove_intermediates()
    np.testing.assert_array_equal(cs.open_array(f"{url}/out.zarr", mode="r",
                                                storage_options=options)[...], data)
    written = asked[-1]
    assert written <= free, f"{written} bytes written to a directory with {free} free"
