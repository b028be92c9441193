"""``RechunkPlan``: what a rechunk/transpose will do (``describe()``, ``simulate()``), and
``execute()`` to do it on the current scheduler."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import uuid
from typing import Any

import dask
from dask.base import get_scheduler
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph
from dask.local import get_sync

from chunkstore.api.creation import create_array
from chunkstore.api.locations import resolve_location
from chunkstore.array.array import Array
from chunkstore.dask.calibrate import copy_rates
from chunkstore.dask.graph import PlanGraph
from chunkstore.dask.memory import (
    Workers,
    active_client,
    configure_workers,
    limit_map_cache,
    nanny_thresholds,
    refuse_copied,
)
from chunkstore.dask.source import TransposedSource
from chunkstore.errors import ContainsArrayError
from chunkstore.group.scratch import HEARTBEAT, ScratchRun, run_path, temp_run_path
from chunkstore.rechunk import report
from chunkstore.rechunk.planner import MAX_TASKS_PER_STAGE, PlanError, Stage
from chunkstore.rechunk.report import CopyRates, PlanDescription
from chunkstore.runtime.sync import ProcessSynchronizer


class RechunkPlan:
    """What a rechunk/transpose will do; ``execute()`` does it.

    Its intermediate arrays live in a scratch directory that is never a node
    (``group.scratch``): never listed as members, removed by ``execute()`` when done
    (also on failure), and by ``chunkstore clean`` once their owner (this process) is
    dead."""

    #: how often ``execute()`` refreshes the owner record of the intermediates (seconds)
    heartbeat = HEARTBEAT

    def __init__(self, source: Array | TransposedSource, target: Array, stages: list[Stage],
                 max_mem: int, temp_store: Any, progress: bool,
                 workers: Workers | None = None, *, shared_units: bool = False,
                 scratch_directory: str | None = None) -> None:
        self.source, self.target, self.stages = source, target, stages
        #: tasks of the last stage write into common write units of a target whose store
        #: cannot commit conditionally: they take turns under ``target.synchronizer``
        self.shared_units = shared_units
        self.max_mem, self.temp_store, self.progress = max_mem, temp_store, progress
        self.workers = workers or Workers()
        #: a directory made for this plan alone (``local_scratch``): its ``temp_store``,
        #: removed with the intermediates
        self.scratch_directory = scratch_directory
        self._scratch: ScratchRun | None = None
        self.notes: list[str] = []

    # -- inspection (the figures are ``rechunk.report``'s) ---------------------------------
    @property
    def ntasks(self) -> int:
        """Copy tasks of the graph (a task may copy a run of blocks)."""
        return report.ntasks(self.stages)

    @property
    def nblocks(self) -> int:
        """Blocks copied, over the stages."""
        return report.nblocks(self.stages)

    @property
    def peak_task_memory(self) -> int:
        """The largest modelled memory of one task, over the stages (bytes)."""
        return report.peak_task_memory(self.stages)

    @property
    def peak_worker_memory(self) -> int:
        """Modelled peak RSS of one worker: its baseline plus ``threads`` tasks at once
        (their codec buffers counted once: the tasks of a worker share one IO pool)."""
        return report.peak_worker_memory(self.stages, self.workers.threads,
                                         self.workers.baseline)

    def rates(self, slots: int | None = None) -> CopyRates:
        """This machine's measured rates of the plan's copy per worker thread, and the
        scheduling overhead per task on ``slots`` threads (default: the plan's workers),
        measured once per process; and the share of a core each thread gets now
        (``chunkstore.dask.calibrate``)."""
        if slots is None:
            slots = self.workers.count * self.workers.threads
        return copy_rates(self.source, self.target, self.stages, slots,
                          self.workers.codec_threads)

    def describe(self, predict_time: bool = True) -> PlanDescription:
        """Stages, tasks, bytes read and written, the expected peak memory per task and
        per worker, and the predicted wall time per stage and in all
        (``predicted_wall_seconds``, from this machine's measured copy rates: see
        ``rates()``; the first call in a process measures them, 1-3 s; ``predict_time=
        False`` leaves the time out and measures nothing): a dict that prints as the
        plan's summary."""
        return report.describe(self.stages, shape=tuple(self.target.shape),
                               dtype=str(self.target.dtype), max_mem=self.max_mem,
                               workers=self.workers,
                               write_unit=tuple(self.target.layout.write_shape),
                               notes=self.notes, thresholds=nanny_thresholds(),
                               rates=self.rates() if predict_time else None)

    def __repr__(self) -> str:  # printing a plan measures nothing
        return str(self.describe(predict_time=False))

    def simulate(self, workers: int, threads_per_worker: int, worker_memory: int | str,
                 throughput: float | str | None = None, *, baseline: int | None = None,
                 store_bandwidth: float | str | None = None) -> PlanDescription:
        """Estimate a run on ``workers`` x ``threads_per_worker`` with ``worker_memory``
        each: tasks, stages, bytes per stage, per-worker peak memory and wall time.

        ``throughput``: decoded bytes one worker thread copies per second (read, decode,
        encode, write), for every stage; by default each stage's as measured on this
        machine (``rates()``: its stores and codecs, plus the per-task overhead of the
        current scheduler); ``store_bandwidth``: optional aggregate bytes/s the store
        sustains (read + write).
        """
        # a simulated cluster's threads each have a core: no share of this machine's
        rates = None if throughput is not None else dataclasses.replace(
            self.rates(workers * threads_per_worker), cpu_share=1.0)
        return report.simulate(self.stages, self.max_mem, workers, threads_per_worker,
                               worker_memory, throughput,
                               baseline=baseline if baseline is not None
                               else self.workers.baseline, store_bandwidth=store_bandwidth,
                               thresholds=nanny_thresholds(), rates=rates)

    # -- execution ----------------------------------------------------------------------------
    def _intermediate(self, stage: Stage) -> Array:
        if self._scratch is None:
            self._scratch = ScratchRun(*intermediate_home(self.target.store, self.target.path,
                                                          self.temp_store))
        # a local intermediate is stored raw (``Stage.raw_target``): no encode, no
        # decode, chunks read straight from the mapped file (the 4 GiB rechunk: 15% less
        # CPU); elsewhere compressed as by default (fewer bytes over the network)
        probe = create_array(None, "", shape=stage.shape, dtype=self.target.dtype,
                             chunks=stage.target_chunks, zarr_format=3,
                             compressors=None if stage.raw_target else "auto")
        return self._scratch.add_array(probe.metadata)

    def to_delayed(self, max_tasks: int = MAX_TASKS_PER_STAGE) -> Delayed:
        """The whole plan as one Delayed over a lazy graph (intermediate arrays are
        created now, owned by this process: ``chunkstore clean`` removes them once it is
        dead, or the caller with ``remove_intermediates()``). PlanError on a ``distributed`` cluster when the tasks share write
        units under locks of this process (``shared_units``)."""
        self._check_scheduler(active_client())  # before any intermediate array is created
        token = uuid.uuid4().hex
        handles, source = [], self.source
        for i, stage in enumerate(self.stages):
            last = i == len(self.stages) - 1
            target = self.target if last else self._intermediate(stage)
            handles.append((source, target))
            source = target
        graph = PlanGraph(token, self.stages, handles, max_tasks)
        final = graph.barrier(len(self.stages) - 1)
        return Delayed(final, HighLevelGraph.from_collections(final, graph, dependencies=[]))

    def execute(self) -> Array:
        """Run on the current scheduler; returns the target Array. Temporary arrays are
        removed afterwards, also on failure. On a ``distributed`` cluster each worker
        first gets chunkstore's memory settings (``memory.configure_workers``)."""
        restore = None
        try:
            delayed = self.to_delayed()
            if self._scratch is not None:
                self._scratch.start_heartbeat(self.heartbeat)
            client = active_client()
            if client is not None:
                configure_workers(client)
                future = client.compute(delayed)
                if self.progress:
                    from distributed import progress
                    progress(future)
                future.result()
            else:
                restore = limit_map_cache()
                if self.progress:
                    from dask.diagnostics import ProgressBar
                    with ProgressBar():
                        dask.compute(delayed, scheduler=self._local_scheduler(delayed))
                else:
                    dask.compute(delayed, scheduler=self._local_scheduler(delayed))
        finally:
            if restore is not None:
                limit_map_cache(restore)
            self.remove_intermediates()
        return self.target

    def remove_intermediates(self) -> None:
        """Remove the intermediate arrays made by ``to_delayed()`` (``execute()`` does)."""
        if self._scratch is not None:
            scratch, self._scratch = self._scratch, None
            scratch.remove()
        if self.scratch_directory is not None:  # made for this plan: gone once empty
            with contextlib.suppress(OSError):
                os.rmdir(self.scratch_directory)

    def _thread_locks(self) -> bool:
        """Whether the tasks rely on locks that serve the threads of this process only."""
        return self.shared_units and not isinstance(self.target.synchronizer,
                                                    ProcessSynchronizer)

    def _check_scheduler(self, client: Any) -> None:
        refuse_copied(self.target.store, f"rechunk into {self.target.name!r}")
        if client is not None and self._thread_locks():
            raise PlanError(shared_units_refusal(self.target.store, self.target.path,
                                                 self.target.layout.write_shape))

    def _local_scheduler(self, delayed: Delayed) -> Any:
        """The configured scheduler, except that tasks sharing write units under thread
        locks run on this process's threads (a process pool would give each task a lock
        of its own)."""
        if not self._thread_locks():
            return None
        chosen = get_scheduler(collections=[delayed])
        return "sync" if chosen is get_sync else "threads"


def intermediate_home(store: Any, path: str, temp_store: Any) -> tuple[Any, str]:
    """Where the intermediate arrays of a plan whose target is ``path`` of ``store`` live:
    a new scratch run directory (``group.scratch``) in ``temp_store``, else beside the
    target (in its own directory for a root array). PlanError when ``temp_store`` cannot
    hold it (its root is an array); nothing is created."""
    if temp_store is not None:
        home, _ = resolve_location(temp_store)
        try:
            where = temp_run_path(home)
        except ContainsArrayError as e:
            raise PlanError(f"temp_store {home!r} cannot hold this rechunk's intermediate "
                            f"array: {e}") from None
        return home, where
    return store, run_path(path, in_temp_store=False)


def shared_units_refusal(store: Any, path: str, unit: Any) -> str:
    """Why a plan whose tasks share the target's write units cannot run on a cluster."""
    return (f"the target {store!r} path {path or '/'!r} cannot commit conditionally, and "
            f"its shards {tuple(unit)} do not fit in max_mem, so tasks would assemble each "
            "shard by read-modify-writes that only a lock of this process keeps apart: not "
            "on a distributed cluster. Use a target store with conditional writes (a local "
            "directory or S3), or a max_mem large enough for whole shards, or pass "
            "synchronizer=ProcessSynchronizer(dir) shared by the workers")
