"""The writer that test_rechunk_intermediates SIGKILLs, run in a process from the suite's
fork server (tests/multiproc.py: chunkstore and dask already imported, no interpreter
start)."""

from __future__ import annotations

import threading


def rechunk_until_stage_two(root: str, ready: str) -> None:
    """A two-stage rechunk of ``root``/x into ``root``/y that stops (forever) when the
    second stage starts reading the intermediate, after creating the file ``ready``."""
    import dask

    import chunkstore as cs
    import chunkstore.dask as csd
    import chunkstore.dask.graph as graph
    copy = graph.copy_block

    def blocking(source, target, *args):
        if "__chunkstore_tmp__" in getattr(source, "path", ""):
            open(ready, "w").close()  # noqa: SIM115 (an empty file: the signal)
            threading.Event().wait()
        return copy(source, target, *args)

    graph.copy_block = blocking
    src = cs.open_array(root, path="x", mode="r")
    with dask.config.set(scheduler="synchronous"):
        plan = csd.rechunk(src, (1, 64), root, path="y", max_mem="6KiB")
        assert len(plan.stages) == 2, plan
        plan.execute()
