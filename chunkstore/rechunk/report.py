"""What a plan reports: ``describe()``'s dict, the per-worker memory model, what the
nanny would do at that peak, and ``simulate()`` of a run on a cluster."""

from __future__ import annotations

import math
from typing import Any

import dask

from chunkstore.rechunk.planner import Stage, blocks_per_task, parse_bytes
from chunkstore.sizes import format_bytes


class PlanDescription(dict):
    """``RechunkPlan.describe()``: the plan's figures as a dict, printed as its summary."""

    def __init__(self, figures: dict[str, Any], text: str) -> None:
        super().__init__(figures)
        self._text = text

    def __str__(self) -> str:
        return self._text


def _mb(n: float) -> str:
    """A byte count in plan texts: ``format_bytes`` (``512 MB`` as given, ``488.3 MiB``)."""
    return format_bytes(n)


def stage_worker_memory(stage: Stage, threads: int, baseline: int) -> int:
    """Peak RSS of a worker running ``threads`` tasks of ``stage`` at once: the baseline,
    each task's block and stored bytes, and the codec buffers of the worker's one IO pool
    (``Stage.memory`` counts the whole pool for one task, so they count once)."""
    m = stage.memory
    codec = m["decode_scratch"] + m["encode_copy"]
    return baseline + threads * (m["total"] - codec) + codec


def nanny_thresholds() -> dict[str, float]:
    """The fractions of ``memory_limit`` at which dask's workers spill, pause and are
    restarted (``distributed.worker.memory.*``)."""
    out = {"spill": 0.7, "pause": 0.8, "terminate": 0.95}
    for name in out:
        value = dask.config.get(f"distributed.worker.memory.{name}", out[name])
        if value:
            out[name] = float(value)
    return out


def limit_notes(peak_worker: int, threads: int, memory_limit: int | None) -> list[str]:
    """What a worker's nanny would do at the modelled peak (spill, pause, restart)."""
    if not memory_limit:
        return []
    th = nanny_thresholds()
    for name, verb in (("terminate", "restarts"), ("pause", "pauses"), ("spill", "spills")):
        if peak_worker > th[name] * memory_limit:
            return [f"a worker may hold {_mb(peak_worker)} ({threads} task(s) at once): above "
                    f"the {th[name]:.0%} of its memory_limit {_mb(memory_limit)} at which "
                    f"dask {verb} it; lower max_mem or the threads per worker"]
    return []


def simulate(stages: list[Stage], max_mem: int, workers: int, threads_per_worker: int,
             worker_memory: int | str, throughput: float | str, *, baseline: int,
             store_bandwidth: float | str | None = None) -> PlanDescription:
    """See :meth:`RechunkPlan.simulate`."""
    limit = parse_bytes(worker_memory)
    rate = float(parse_bytes(throughput) if isinstance(throughput, str) else throughput)
    bandwidth = None if store_bandwidth is None else float(
        parse_bytes(store_bandwidth) if isinstance(store_bandwidth, str) else store_bandwidth)
    slots = workers * threads_per_worker
    rows, total = [], 0.0
    for i, s in enumerate(stages):
        per_task = blocks_per_task(s)
        ntasks = math.ceil(s.ntasks / per_task) if s.ntasks else 0
        task_s = per_task * s.block_bytes / rate
        waves = math.ceil(ntasks / slots) if ntasks else 0
        compute_s = waves * task_s
        io_s = 2 * s.nbytes / bandwidth if bandwidth else 0.0
        seconds = max(compute_s, io_s)
        total += seconds
        rows.append({"stage": i + 1, "source_chunks": s.source_chunks,
                     "target_chunks": s.target_chunks, "block": s.block, "ntasks": ntasks,
                     "blocks_per_task": per_task, "waves": waves, "bytes_read": s.nbytes,
                     "bytes_written": s.nbytes, "task_memory": s.task_memory,
                     "worker_memory": stage_worker_memory(s, threads_per_worker, baseline),
                     "seconds": seconds, "bound_by": "store" if io_s > compute_s else "workers"})
    peak_worker = max((r["worker_memory"] for r in rows), default=baseline)
    spill = nanny_thresholds()["spill"]
    figures = {"workers": workers, "threads_per_worker": threads_per_worker,
               "worker_memory": limit, "throughput_per_thread": rate,
               "store_bandwidth": bandwidth, "baseline": baseline, "max_mem": max_mem,
               "ntasks": sum(r["ntasks"] for r in rows), "stages": rows,
               "peak_task_memory": max((r["task_memory"] for r in rows), default=0),
               "peak_worker_memory": peak_worker, "fits": peak_worker <= spill * limit,
               "notes": limit_notes(peak_worker, threads_per_worker, limit),
               "wall_seconds": total}
    lines = [f"simulated on {workers} workers x {threads_per_worker} threads x "
             f"{_mb(limit)}, {_mb(rate)}/s per thread"
             + (f", store {_mb(bandwidth)}/s" if bandwidth else "") + ":"]
    for r in rows:
        lines.append(f"  stage {r['stage']}: {r['ntasks']} tasks in {r['waves']} waves, "
                     f"{_mb(r['bytes_read'])} read + {_mb(r['bytes_written'])} written, "
                     f"{r['seconds']:.0f} s ({r['bound_by']}), {_mb(r['worker_memory'])} "
                     "per worker")
    lines.append(f"  peak per worker {_mb(peak_worker)} of {_mb(limit)} "
                 f"({'fits under' if figures['fits'] else 'ABOVE'} the {spill:.0%} where dask "
                 f"starts spilling); estimated wall time {total:.0f} s")
    lines += [f"  note: {n}" for n in figures["notes"]]
    return PlanDescription(figures, "\n".join(lines))
