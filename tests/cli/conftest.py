"""Running the ``chunkstore`` command as users do, with its output going to a terminal
(a pseudo-terminal, so ``isatty()`` is true) or to a pipe, and sample inputs: good
stores, and every kind of bad input the command must explain in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.cli import main

MODES = ("pty", "pipe")


@dataclass
class Result:
    """Exit status and output of one run (pty line endings turned back into ``\\n``)."""

    status: int
    out: str
    err: str

    @property
    def err_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


def _channel(mode: str) -> tuple[int, int]:
    """(read end, write end) of a pseudo-terminal or of a pipe."""
    return os.openpty() if mode == "pty" else os.pipe()


def _collect(fd: int, into: list[bytes]) -> threading.Thread:
    def read() -> None:
        while True:
            try:
                data = os.read(fd, 65536)
            except OSError:  # a pty whose other end closed
                break
            if not data:
                break
            into.append(data)
        os.close(fd)
    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def _text(parts: list[bytes]) -> str:
    return b"".join(parts).decode("utf-8", "replace").replace("\r\n", "\n")


def run_subprocess(mode: str, *argv: str, cwd: Path | None = None, env: dict | None = None,
                   timeout: float = 120) -> Result:
    """``python -m chunkstore argv`` with stdout and stderr on a pty or on pipes."""
    (out_r, out_w), (err_r, err_w) = _channel(mode), _channel(mode)
    outs: list[bytes] = []
    errs: list[bytes] = []
    proc = subprocess.Popen([sys.executable, "-m", "chunkstore", *argv], stdin=subprocess.DEVNULL,
                            stdout=out_w, stderr=err_w, cwd=cwd,
                            env={**os.environ, **(env or {})})
    os.close(out_w)
    os.close(err_w)
    readers = [_collect(out_r, outs), _collect(err_r, errs)]
    status = proc.wait(timeout=timeout)
    for reader in readers:
        reader.join(timeout=10)
    return Result(status, _text(outs), _text(errs))


def run_in_process(mode: str, *argv: str, monkeypatch: pytest.MonkeyPatch) -> Result:
    """``main(argv)`` in this process with ``sys.stdout`` / ``sys.stderr`` on a pty or pipes
    (fast: no interpreter start)."""
    (out_r, out_w), (err_r, err_w) = _channel(mode), _channel(mode)
    outs: list[bytes] = []
    errs: list[bytes] = []
    readers = [_collect(out_r, outs), _collect(err_r, errs)]
    out = os.fdopen(out_w, "w", buffering=1)
    err = os.fdopen(err_w, "w", buffering=1)
    with monkeypatch.context() as m:
        m.setattr(sys, "stdout", out)
        m.setattr(sys, "stderr", err)
        try:
            status = main(list(argv))
        except SystemExit as e:  # argparse: --help, --version, usage errors
            status = e.code if isinstance(e.code, int) else 0
        finally:
            out.close()
            err.close()
    for reader in readers:
        reader.join(timeout=10)
    return Result(status, _text(outs), _text(errs))


@pytest.fixture(params=MODES)
def mode(request) -> str:
    """Where the output goes: "pty" (a terminal) or "pipe"."""
    return request.param


@pytest.fixture
def cli(mode, monkeypatch, samples):
    """Run the command in this process (cwd: the samples), output to a pty or a pipe."""
    monkeypatch.chdir(samples)

    def run(*argv: str) -> Result:
        return run_in_process(mode, *argv, monkeypatch=monkeypatch)
    return run


@pytest.fixture
def cli_process(mode, samples):
    """Run ``python -m chunkstore`` in a subprocess (cwd: the samples), output to a pty or
    a pipe."""
    def run(*argv: str, **kwargs) -> Result:
        kwargs.setdefault("cwd", samples)
        return run_subprocess(mode, *argv, **kwargs)
    return run


DATA = np.arange(600, dtype="i4").reshape(20, 30)


@pytest.fixture(scope="session")
def samples(tmp_path_factory) -> Path:
    """A directory of sample inputs, good and bad (treat as read-only)."""
    root = tmp_path_factory.mktemp("cli-samples")
    cs.array(DATA, store=str(root / "s.zarr"), path="x", chunks=(8, 8),
             attributes={"units": "m", "long_name": "test field"}, dimension_names=["y", "x"])
    cs.open_group(str(root / "s.zarr"), mode="a").create_group("sub").create_array(
        "z", shape=(4,), dtype="f8", chunks=(2,))
    cs.array(DATA.astype("f4"), store=str(root / "sharded.zarr"), chunks=(4, 5), shards=(8, 10))
    cs.array(DATA, store=str(root / "v2.zarr"), chunks=(10, 10), zarr_format=2)
    cs.array(np.arange(10**6, dtype="i4").reshape(1000, 1000), store=str(root / "big.zarr"),
             chunks=(250, 250))
    np.save(root / "plain.npy", DATA)
    (root / "notzarr" / "sub").mkdir(parents=True)
    (root / "bad.zip").write_text("not a zip archive")
    with cs.ZipStore(str(root / "good.zip"), mode="w") as store:
        cs.array(np.arange(100), store=store, chunks=(10,))
    whole = (root / "good.zip").read_bytes()
    (root / "truncated.zip").write_bytes(whole[:len(whole) // 2])
    (root / "deep.zarr").mkdir()
    (root / "deep.zarr" / "zarr.json").write_text(
        '{"zarr_format": 3, "node_type": "group", "attributes": '
        + "[" * 100_000 + "]" * 100_000 + "}")
    (root / "huge.zarr").mkdir()
    doc = json.loads((root / "s.zarr" / "x" / "zarr.json").read_text())
    doc["shape"] = [2**70, 30]
    (root / "huge.zarr" / "zarr.json").write_text(json.dumps(doc))
    (root / "overflow.zarr").mkdir()  # every axis fits an int64, their product does not
    doc["shape"] = [2**32, 2**32]
    (root / "overflow.zarr" / "zarr.json").write_text(json.dumps(doc))
    try:
        import h5py
    except ImportError:  # the HDF5 tests skip themselves
        return root
    with h5py.File(root / "src.h5", "w") as f:
        f.create_dataset("grp/data", data=DATA, chunks=(5, 30))
        f["grp/data"].attrs["units"] = "K"
        f.create_dataset("other", data=np.arange(3))
    return root
