"""``chunkstore clean`` and ``verify --repair``: writers SIGKILLed mid-write leave temporary
files that no listing shows; the sweep removes them and nothing else."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import chunkstore as cs

WRITER = """
import sys, numpy as np, chunkstore as cs
a = cs.open_array(sys.argv[1], mode="r+")
rng = np.random.default_rng()
print("ready", flush=True)
while True:
    a[:] = rng.random(a.shape).astype("f8")
"""


def _temp_files(root: Path) -> list[Path]:
    return [p for p in root.rglob(".chunkstore-tmp-*")]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "chunkstore", *args], capture_output=True,
                          text=True, timeout=120)


def test_sigkilled_writers_leave_temp_files_that_clean_removes(tmp_path):
    root = tmp_path / "x.zarr"
    cs.create_array(str(root), shape=(512, 512), chunks=(64, 64), dtype="f8",
                    compressors=None)
    left = 0
    for _ in range(8):  # kill writers mid-write until some temporary files are left
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(root)],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.15)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        left = len(_temp_files(root))
        if left >= 2:
            break
    assert left >= 1, "no writer was caught mid-write"
    assert not any(k.rsplit("/", 1)[-1].startswith(".chunkstore-tmp")
                   for k in cs.LocalStore(str(root)).list())  # never listed as keys
    decoded = cs.open_array(str(root), mode="r")[:]  # every chunk old or new, never torn
    assert decoded.shape == (512, 512)
    keys_before = sorted(cs.LocalStore(str(root)).list())
    r = _cli("verify", str(root), "--repair")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"removed {left} leftover temporary file(s)" in r.stdout
    assert _temp_files(root) == []
    assert sorted(cs.LocalStore(str(root)).list()) == keys_before  # nothing else touched
    r = _cli("clean", str(root))
    assert r.returncode == 0 and "removed 0 leftover" in r.stdout


def test_clean_keeps_a_live_writers_temp_file_and_refuses_a_missing_path(tmp_path):
    root = tmp_path / "y.zarr"
    a = cs.array(np.arange(10), store=str(root), chunks=5)
    from chunkstore.storage.local.temp import temp_name
    live = root / "c" / temp_name()  # this (live) process's name: not stale yet
    live.write_bytes(b"partial")
    r = _cli("clean", str(root))
    assert r.returncode == 0 and "removed 0 leftover" in r.stdout and live.exists()
    old = time.time() - 7200
    os.utime(live, (old, old))
    r = _cli("clean", str(root), "--older-than", "3600")
    assert r.returncode == 0 and "removed 1 leftover" in r.stdout and not live.exists()
    np.testing.assert_array_equal(a[:], np.arange(10))
    r = _cli("clean", str(tmp_path / "missing.zarr"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
