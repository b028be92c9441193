"""Helpers for tests with real writer processes: start them together, and a store that
commits without compare-and-swap (the control group that must lose updates)."""

from __future__ import annotations

import multiprocessing as mp
import os
import resource
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from chunkstore.storage import LocalStore
from chunkstore.storage.base import ANY, Store

#: imported once by the fork server, so a writer process starts in milliseconds instead of
#: importing them (spawn: 4 processes took 2-20 s to start, more than most races last)
PRELOAD = ["numpy", "pytest", "hypothesis", "distributed", "chunkstore", "chunkstore.dask",
           "tests.multiproc", "tests.preload_s3"]


class _FreshProcess(mp.context.ForkServerProcess):
    """A forkserver process that runs with the environment variables and working directory
    its creator had when it was made (as a spawned one would: the fork server keeps those
    it was started with)."""

    def __init__(self, group: Any = None, target: Callable[..., Any] | None = None,
                 name: str | None = None, args: tuple = (), kwargs: dict | None = None,
                 **rest: Any) -> None:
        super().__init__(group, _in_child, name,
                         (target, dict(os.environ), os.getcwd(), tuple(args), kwargs or {}),
                         **rest)


class _FreshContext(mp.context.ForkServerContext):
    Process = _FreshProcess


def _in_child(target: Callable[..., Any], env: dict[str, str], cwd: str, args: tuple,
              kwargs: dict) -> None:
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    target(*args, **kwargs)


def context() -> mp.context.BaseContext:
    """The start method of writer processes: ``forkserver`` (a fresh process forked from a
    server that has only imported :data:`PRELOAD`: no threads, no store used, unlike a
    plain fork of the test process), each process with its creator's environment and
    directory. Such a process ends with ``os._exit`` (no ``atexit``, no interpreter
    shutdown): a test of how a process exits spawns one."""
    ctx = _FreshContext()
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def limit_cpu(seconds: int) -> None:
    """Let this process use ``seconds`` of CPU time from now (SIGXCPU beyond): what it
    used before, a fork server's imports included, is not counted."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    limit = int(used.ru_utime + used.ru_stime) + 1 + seconds
    resource.setrlimit(resource.RLIMIT_CPU, (limit, resource.RLIM_INFINITY))


def start_fork_server() -> None:
    """Start the fork server (and multiprocessing's resource tracker) now if not yet
    running: a test that checks it leaves no process behind starts them before it looks."""
    from multiprocessing import forkserver, resource_tracker

    context()  # its preload list
    forkserver.ensure_running()
    resource_tracker.ensure_running()


def run_together(target: Callable[..., Any], args_of: Callable[[int], tuple], n: int = 4,
                 timeout: float = 240) -> None:
    """Start ``n`` new processes (:func:`context`) running ``target(*args_of(i),
    start_event)``, release them at once (each waits on the event), join them, and assert
    each exited 0 (a process still running after ``timeout`` is killed and fails the
    assertion)."""
    ctx = context()
    start = ctx.Event()
    procs = [ctx.Process(target=target, args=(*args_of(i), start)) for i in range(n)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(timeout)
    codes = [p.exitcode for p in procs]
    for p in procs:
        if p.exitcode is None:
            p.kill()
    assert codes == [0] * n, f"exit codes {codes}"


class NoCasLocalStore(LocalStore):
    """A LocalStore whose commits do not check generations (what a store without
    compare-and-swap does): the control group."""

    capabilities = replace(LocalStore.capabilities, conditional_writes=False,
                           conditional_delete=False)

    def get_versioned_many(self, keys):
        return Store.get_versioned_many(self, keys)

    def commit_many(self, items):  # every commit unconditional
        return super().commit_many([(key, value, ANY) for key, value, _ in items])
