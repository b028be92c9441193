"""Python source run as a fresh ``python -c`` would run it, in a process forked from the
suite's fork server (tests/multiproc.py: numpy, dask and chunkstore already imported), so
that a child costs milliseconds instead of a second or more of imports. For tests whose
point is a process of its own (resource limits, another writer, a cold handle), not a new
interpreter."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from tests.multiproc import context, limit_cpu


def _run(code: str, argv: Sequence[str], cpu: int | None, conn: Any) -> None:
    if cpu is not None:
        limit_cpu(cpu)
    sys.argv = ["-c", *argv]
    out, status, error = io.StringIO(), 0, ""
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, "<child>", "exec"), {"__name__": "__main__"})
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001 - reported to the parent as a failing status
        status, error = 1, traceback.format_exc()
    conn.send((status, out.getvalue(), error))
    conn.close()


def run_code(code: str, *argv: str, cpu: int | None = None,
             timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -c code *argv`` in a process from the fork server (``cpu``: its CPU-time
    limit in seconds on top of what it has used, SIGXCPU beyond): a CompletedProcess with
    its exit status (negative: the signal that ended it), stdout and, when it raised, the
    traceback as stderr."""
    ctx = context()
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_run, args=(code, list(argv), cpu, send))
    proc.start()
    send.close()
    try:
        result = receive.recv() if receive.poll(timeout) else None
    except EOFError:  # it ended without a report (a signal)
        result = None
    finally:
        proc.join(timeout)
        if proc.exitcode is None:
            proc.kill()
            proc.join()
    status, out, err = (proc.exitcode, "", "") if result is None or proc.exitcode else result
    return subprocess.CompletedProcess(["-c", code, *argv], status, out, err)
