"""Processes a benchmark or test starts as users do (``dask scheduler``, ``dask worker``,
an S3 server): a free port to give them, and stopping them in the right order."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Sequence


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_in_order(workers: Sequence[subprocess.Popen], others: Sequence[subprocess.Popen],
                  timeout: float = 30) -> None:
    """Terminate the ``workers`` together first, while the scheduler still answers (a
    worker whose scheduler is gone waits for it before its nanny stops it), then each
    of ``others`` in turn (give them in reverse start order: scheduler, then S3); kill
    what has not ended within ``timeout`` seconds."""
    for group in (list(workers), *([p] for p in others)):
        for proc in group:
            proc.terminate()
        for proc in group:
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
