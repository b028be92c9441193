"""``chunkstore clean`` and ``verify --repair``: writers SIGKILLed mid-write leave temporary
files that no listing shows; the sweep removes them and nothing else."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np

import chunkstore as cs
from tests.cli_run import run_cli
from tests.multiproc import context


def _writer(path: str, ready) -> None:
    """Rewrite the whole array forever (until SIGKILLed), saying when it has started."""
    a = cs.open_array(path, mode="r+")
    rng = np.random.default_rng()
    ready.set()
    while True:
        a[:] = rng.random(a.shape).astype("f8")


def _temp_files(root: Path) -> list[Path]:
    return [p for p in root.rglob(".chunkstore-tmp-*")]


def test_sigkilled_writers_leave_temp_files_that_clean_removes(tmp_path):
    root = tmp_path / "x.zarr"
    cs.create_array(str(root), shape=(512, 512), chunks=(64, 64), dtype="f8",
                    compressors=None)
    left = 0
    ctx = context()  # writer processes forked from a server that imported chunkstore
    for _ in range(8):  # kill writers mid-write until some temporary files are left
        ready = ctx.Event()
        proc = ctx.Process(target=_writer, args=(str(root), ready))
        proc.start()
        assert ready.wait(60)
        time.sleep(0.15)
        os.kill(proc.pid, signal.SIGKILL)
        proc.join()
        assert proc.exitcode == -signal.SIGKILL
        left = len(_temp_files(root))
        if left >= 2:
            break
    assert left >= 1, "no writer was caught mid-write"
    assert not any(k.rsplit("/", 1)[-1].startswith(".chunkstore-tmp")
                   for k in cs.LocalStore(str(root)).list())  # never listed as keys
    decoded = cs.open_array(str(root), mode="r")[:]  # every chunk old or new, never torn
    assert decoded.shape == (512, 512)
    keys_before = sorted(cs.LocalStore(str(root)).list())
    r = run_cli("verify", str(root), "--repair")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"removed {left} leftover temporary file(s)" in r.stdout
    assert _temp_files(root) == []
    assert sorted(cs.LocalStore(str(root)).list()) == keys_before  # nothing else touched
    r = run_cli("clean", str(root))
    assert r.returncode == 0 and "removed 0 leftover" in r.stdout


def test_clean_keeps_a_live_writers_temp_file_and_refuses_a_missing_path(tmp_path):
    root = tmp_path / "y.zarr"
    a = cs.array(np.arange(10), store=str(root), chunks=5)
    from chunkstore.storage.local.temp import temp_name
    live = root / "c" / temp_name()  # this (live) process's name: not stale yet
    live.write_bytes(b"partial")
    r = run_cli("clean", str(root))
    assert r.returncode == 0 and "removed 0 leftover" in r.stdout and live.exists()
    old = time.time() - 7200
    os.utime(live, (old, old))
    r = run_cli("clean", str(root), "--older-than", "3600")
    assert r.returncode == 0 and "removed 1 leftover" in r.stdout and not live.exists()
    np.testing.assert_array_equal(a[:], np.arange(10))
    r = run_cli("clean", str(tmp_path / "missing.zarr"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
