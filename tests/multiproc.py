"""Helpers for tests with real writer processes: start them together, and a store that
commits without compare-and-swap (the control group that must lose updates)."""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from chunkstore.storage import LocalStore
from chunkstore.storage.base import ANY, Store


def run_together(target: Callable[..., Any], args_of: Callable[[int], tuple], n: int = 4,
                 timeout: float = 240) -> None:
    """Start ``n`` spawned processes running ``target(*args_of(i), start_event)``, release
    them at once (each waits on the event), join them, and assert each exited 0 (a
    process still running after ``timeout`` is killed and fails the assertion)."""
    ctx = mp.get_context("spawn")
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
