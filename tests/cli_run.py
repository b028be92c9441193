"""The ``chunkstore`` command run in this process (``chunkstore.cli.main``): what a test of
the command's behaviour (exit status, output, files left) needs, without the second or so
of imports a ``python -m chunkstore`` subprocess costs. Tests whose proof needs a separate
process (the installed entry point, signals, a fresh interpreter) start one instead
(tests/cli/test_errors.py keeps those of the one-line error path)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from chunkstore.cli import main


@contextlib.contextmanager
def _environment(cwd: str | os.PathLike[str] | None, unset: tuple[str, ...]) -> Iterator[None]:
    old_cwd = os.getcwd()
    saved = {name: os.environ.pop(name) for name in unset if name in os.environ}
    try:
        if cwd is not None:
            os.chdir(cwd)
        yield
    finally:
        os.chdir(old_cwd)
        os.environ.update(saved)


def run_cli(*args: str | os.PathLike[str], cwd: str | Path | None = None,
            unset: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """``chunkstore *args`` (in ``cwd``, without the environment variables ``unset``) as a
    ``CompletedProcess``: its exit status and what it wrote to stdout and stderr."""
    argv = [os.fspath(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    with _environment(cwd, unset), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as e:  # argparse: usage errors (2), --help and --version (0)
            status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return subprocess.CompletedProcess([sys.executable, "-m", "chunkstore", *argv], status,
                                       out.getvalue(), err.getvalue())
