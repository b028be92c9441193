"""``RechunkPlan``: what a rechunk/transpose will do (``describe()``, ``simulate()``), and
``execute()`` to do it on the current scheduler."""

from __future__ import annotations

import math
import uuid
from typing import Any

import dask
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph

from ..api import create_array
from ..array import Array
from ..storage.resolve import resolve_store
from .graph import MAX_TASKS_PER_STAGE, PlanGraph, blocks_per_task
from .memory import Workers, active_client, configure_workers, limit_map_cache
from .planner import PlanError, Stage
from .report import PlanDescription, _mb, limit_notes, simulate, stage_worker_memory
from .source import TransposedSource


class RechunkPlan:
    """What a rechunk/transpose will do; ``execute()`` does it."""

    def __init__(self, source: Array | TransposedSource, target: Array, stages: list[Stage],
                 max_mem: int, temp_store: Any, progress: bool,
                 workers: Workers | None = None) -> None:
        self.source, self.target, self.stages = source, target, stages
        self.max_mem, self.temp_store, self.progress = max_mem, temp_store, progress
        self.workers = workers or Workers()
        self._temp_arrays: list[Array] = []
        self.notes: list[str] = []

    # -- inspection ---------------------------------------------------------------------------
    @property
    def ntasks(self) -> int:
        """Copy tasks of the graph (a task may copy a run of blocks)."""
        return sum(math.ceil(s.ntasks / blocks_per_task(s)) for s in self.stages)

    @property
    def nblocks(self) -> int:
        return sum(s.ntasks for s in self.stages)

    @property
    def peak_task_memory(self) -> int:
        """The largest modelled memory of one task, over the stages (bytes)."""
        return max((s.task_memory for s in self.stages), default=0)

    @property
    def peak_worker_memory(self) -> int:
        """Modelled peak RSS of one worker: its baseline plus ``threads`` tasks at once
        (their codec buffers counted once: the tasks of a worker share one IO pool)."""
        return max((stage_worker_memory(s, self.workers.threads, self.workers.baseline)
                    for s in self.stages), default=self.workers.baseline)

    def describe(self) -> PlanDescription:
        """Stages, tasks, bytes read and written, and the expected peak memory per task
        and per worker: a dict that prints as the plan's summary."""
        w = self.workers
        figures = {
            "shape": tuple(self.target.shape),
            "dtype": str(self.target.dtype),
            "max_mem": self.max_mem,
            "ntasks": self.ntasks,
            "nblocks": self.nblocks,
            "peak_task_memory": self.peak_task_memory,
            "peak_worker_memory": self.peak_worker_memory,
            "workers": {"threads_per_worker": w.threads, "codec_threads": w.codec_threads,
                        "baseline": w.baseline, "memory_limit": w.memory_limit,
                        "count": w.count, "measured": w.measured},
            "bytes_read": sum(s.nbytes for s in self.stages),
            "bytes_written": sum(s.nbytes for s in self.stages),
            "stages": [
                {"source_chunks": s.source_chunks, "target_chunks": s.target_chunks,
                 "block": s.block, "ntasks": math.ceil(s.ntasks / blocks_per_task(s)),
                 "nblocks": s.ntasks, "blocks_per_task": blocks_per_task(s),
                 "block_bytes": s.block_bytes, "read_piece": s.read_piece,
                 "write_piece": s.write_piece, "task_memory": s.task_memory,
                 "task_memory_terms": dict(s.memory),
                 "worker_memory": stage_worker_memory(s, w.threads, w.baseline),
                 "bytes_read": s.nbytes, "bytes_written": s.nbytes,
                 "intermediate": i < len(self.stages) - 1}
                for i, s in enumerate(self.stages)
            ],
            "write_unit": tuple(self.target.layout.write_shape),
            "notes": list(self.notes) + self._limit_notes(),
        }
        return PlanDescription(figures, self._text(figures))

    def _limit_notes(self) -> list[str]:
        return limit_notes(self.peak_worker_memory, self.workers.threads,
                           self.workers.memory_limit)

    def _text(self, d: dict[str, Any]) -> str:
        w = self.workers
        lines = [f"RechunkPlan {d['shape']} {d['dtype']}: {len(self.stages)} stage(s), "
                 f"{d['ntasks']} tasks, peak ~{_mb(d['peak_task_memory'])} per task "
                 f"(max_mem {_mb(self.max_mem)}), ~{_mb(d['peak_worker_memory'])} per worker "
                 f"({w.threads} task(s) at once + {_mb(w.baseline)} baseline)"]
        for i, s in enumerate(d["stages"], 1):
            t = s["task_memory_terms"]
            runs = f" ({s['blocks_per_task']} blocks each)" if s["blocks_per_task"] > 1 else ""
            lines.append(
                f"  stage {i}: {s['source_chunks']} -> {s['target_chunks']} in blocks "
                f"{s['block']}: {s['ntasks']} tasks{runs}, {_mb(s['bytes_read'])} read and "
                f"written; per task {_mb(t['total'])} = block {_mb(t['block'])} + stored "
                f"bytes in flight {_mb(t['compressed'])} + codec buffers "
                f"{_mb(t['decode_scratch'] + t['encode_copy'])}")
        lines += [f"  note: {n}" for n in d["notes"]]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self.describe())

    def simulate(self, workers: int, threads_per_worker: int, worker_memory: int | str,
                 throughput: float | str, *, baseline: int | None = None,
                 store_bandwidth: float | str | None = None) -> PlanDescription:
        """Estimate a run on ``workers`` x ``threads_per_worker`` with ``worker_memory``
        each: tasks, stages, bytes per stage, per-worker peak memory and wall time.

        ``throughput``: decoded bytes one worker thread copies per second (read, decode,
        encode, write; measure it with ``benchmarks/bench_rechunk.py``);
        ``store_bandwidth``: optional aggregate bytes/s the store sustains (read + write).
        """
        return simulate(self.stages, self.max_mem, workers, threads_per_worker, worker_memory,
                        throughput, baseline=baseline if baseline is not None
                        else self.workers.baseline, store_bandwidth=store_bandwidth)

    # -- execution ----------------------------------------------------------------------------
    def _intermediate(self, stage: Stage) -> Array:
        name = f"rechunk-tmp-{uuid.uuid4().hex[:12]}"
        if self.temp_store is not None:
            store, path = resolve_store(self.temp_store), name
        elif self.target.path:
            store, path = self.target.store, f"{self.target.path}.{name}"
        else:
            # An array at the root of a store cannot have children: use a neighbour.
            sibling = self.target.store.sibling(f".{name}")
            if sibling is None:
                raise PlanError(f"the target of this rechunk is the root array of "
                                f"{self.target.store!r}, which has no place for intermediate "
                                "data: pass temp_store=")
            store, path = sibling, ""
        # a local intermediate is stored raw (``Stage.raw_target``): no encode, no
        # decode, chunks read straight from the mapped file (the 4 GiB rechunk: 15% less
        # CPU); elsewhere compressed as by default (fewer bytes over the network)
        temp = create_array(store, path, shape=stage.shape, dtype=self.target.dtype,
                            chunks=stage.target_chunks, zarr_format=3,
                            compressors=None if stage.raw_target else "auto")
        self._temp_arrays.append(temp)
        return temp

    def to_delayed(self, max_tasks: int = MAX_TASKS_PER_STAGE) -> Delayed:
        """The whole plan as one Delayed over a lazy graph (intermediate arrays are
        created now)."""
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
                        dask.compute(delayed)
                else:
                    dask.compute(delayed)
        finally:
            if restore is not None:
                limit_map_cache(restore)
            for temp in self._temp_arrays:
                temp.store.delete_prefix(temp.path)
                if not temp.path:
                    temp.store.remove_root()
            self._temp_arrays.clear()
        return self.target
