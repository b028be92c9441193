"""What a plan reports: ``describe()``'s figures and text, the per-worker memory model,
what a worker's nanny would do at that peak, and ``simulate()`` of a run on a cluster.

Pure: the facts about the workers and the nanny's thresholds are given by the caller
(the Dask layer asks the cluster and ``dask.config`` for them).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from chunkstore.io.buffers import POOL_THREAD_BYTES
from chunkstore.rechunk.planner import Stage, blocks_per_task
from chunkstore.sizes import format_bytes, parse_bytes

#: the fractions of ``memory_limit`` at which dask's workers spill, pause and are
#: restarted, as dask sets them by default (``distributed.worker.memory.*``)
NANNY_THRESHOLDS = {"spill": 0.7, "pause": 0.8, "terminate": 0.95}


class WorkerFacts(Protocol):
    """What the memory model needs about the workers (``chunkstore.dask.Workers``)."""

    threads: int
    codec_threads: int
    baseline: int
    memory_limit: int | None
    count: int
    measured: bool


@dataclass(frozen=True)
class CopyRates:
    """What one worker thread's copy costs, measured (``chunkstore.dask.calibrate``):
    seconds per decoded byte of each part of a task, and seconds per task of scheduling.

    ``read``: reading the plan's source (stored bytes fetched, decoded, permuted for a
    transposed source, copied into the block); ``write``: writing into the target
    (encoded with its codecs, stored); ``raw_read``/``raw_write``: the same for an
    uncompressed intermediate array in a local directory (``Stage.raw_source`` /
    ``raw_target``); ``task_overhead``: the scheduler's cost of one task, per slot.
    """

    read: float
    write: float
    raw_read: float
    raw_write: float
    task_overhead: float = 0.0
    cpu_share: float = 1.0

    def seconds_per_byte(self, stage: Stage) -> float:
        """Seconds one worker thread takes per decoded byte of ``stage``."""
        return ((self.raw_read if stage.raw_source else self.read)
                + (self.raw_write if stage.raw_target else self.write)) / max(
                    self.cpu_share, 1e-3)

    def throughput(self, stage: Stage) -> float:
        """Decoded bytes per second one worker thread copies in ``stage``."""
        return 1.0 / max(self.seconds_per_byte(stage), 1e-15)


def stage_seconds(stage: Stage, slots: int, seconds_per_byte: float,
                  task_overhead: float = 0.0) -> tuple[int, int, float]:
    """``(tasks, waves, seconds)`` of ``stage`` on ``slots`` worker threads: its tasks
    run in waves of ``slots``, each taking its blocks' bytes at ``seconds_per_byte``
    plus ``task_overhead``."""
    per_task = blocks_per_task(stage)
    tasks = math.ceil(stage.ntasks / per_task) if stage.ntasks else 0
    waves = math.ceil(tasks / max(1, slots)) if tasks else 0
    return tasks, waves, waves * (per_task * stage.block_bytes * seconds_per_byte
                                  + task_overhead)


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
    each task's block and stored bytes, and the codec buffers and threads of the
    worker's one IO pool (``Stage.memory`` counts the whole pool for one task, so they
    count once; ``buffers.POOL_THREAD_BYTES`` per pool thread)."""
    m = stage.memory
    codec = m["decode_scratch"] + m["encode_copy"]
    pool = stage.codec_threads * POOL_THREAD_BYTES if stage.shape else 0
    return baseline + threads * (m["total"] - codec) + codec + pool


def ntasks(stages: Sequence[Stage]) -> int:
    """Copy tasks of a plan's graph (a task may copy a run of blocks)."""
    return sum(math.ceil(s.ntasks / blocks_per_task(s)) for s in stages)


def nblocks(stages: Sequence[Stage]) -> int:
    """Blocks a plan copies, over its stages."""
    return sum(s.ntasks for s in stages)


def peak_task_memory(stages: Sequence[Stage]) -> int:
    """The largest modelled memory of one task, over the stages (bytes)."""
    return max((s.task_memory for s in stages), default=0)


def peak_worker_memory(stages: Sequence[Stage], threads: int, baseline: int) -> int:
    """Modelled peak RSS of one worker: its baseline plus ``threads`` tasks at once."""
    return max((stage_worker_memory(s, threads, baseline) for s in stages), default=baseline)


def describe(stages: Sequence[Stage], *, shape: tuple[int, ...], dtype: str, max_mem: int,
             workers: WorkerFacts, write_unit: tuple[int, ...], notes: Sequence[str] = (),
             thresholds: Mapping[str, float] = NANNY_THRESHOLDS,
             rates: CopyRates | None = None) -> PlanDescription:
    """Stages, tasks, bytes read and written, the expected peak memory per task and
    per worker, and (given the measured ``rates``) the predicted wall time per stage and
    in all, of a plan copying into an array of ``shape``/``dtype`` whose write unit is
    ``write_unit`` (``RechunkPlan.describe``); ``notes`` come first in its notes, then
    what the nanny would do at ``thresholds``."""
    w = workers
    peak_worker = peak_worker_memory(stages, w.threads, w.baseline)
    slots = max(1, w.count * w.threads)
    timing = [stage_seconds(s, slots, rates.seconds_per_byte(s), rates.task_overhead)
              if rates else None for s in stages]
    figures = {
        "shape": tuple(shape),
        "dtype": str(dtype),
        "max_mem": max_mem,
        "ntasks": ntasks(stages),
        "nblocks": nblocks(stages),
        "peak_task_memory": peak_task_memory(stages),
        "peak_worker_memory": peak_worker,
        "workers": {"threads_per_worker": w.threads, "codec_threads": w.codec_threads,
                    "baseline": w.baseline, "memory_limit": w.memory_limit,
                    "count": w.count, "measured": w.measured},
        "bytes_read": sum(s.nbytes for s in stages),
        "bytes_written": sum(s.nbytes for s in stages),
        "stages": [
            {"source_chunks": s.source_chunks, "target_chunks": s.target_chunks,
             "block": s.block, "ntasks": math.ceil(s.ntasks / blocks_per_task(s)),
             "nblocks": s.ntasks, "blocks_per_task": blocks_per_task(s),
             "block_bytes": s.block_bytes, "read_piece": s.read_piece,
             "write_piece": s.write_piece, "task_memory": s.task_memory,
             "task_memory_terms": dict(s.memory),
             "worker_memory": stage_worker_memory(s, w.threads, w.baseline),
             "bytes_read": s.nbytes, "bytes_written": s.nbytes,
             "intermediate": i < len(stages) - 1,
             **({"waves": timing[i][1], "throughput_per_thread": rates.throughput(s),
                 "predicted_wall_seconds": timing[i][2]} if rates else {})}
            for i, s in enumerate(stages)
        ],
        "write_unit": tuple(write_unit),
        "notes": list(notes) + limit_notes(peak_worker, w.threads, w.memory_limit,
                                           thresholds),
    }
    if rates is not None:
        figures["predicted_wall_seconds"] = sum(t[2] for t in timing if t)
        figures["rates"] = {"read_seconds_per_byte": rates.read,
                            "write_seconds_per_byte": rates.write,
                            "raw_read_seconds_per_byte": rates.raw_read,
                            "raw_write_seconds_per_byte": rates.raw_write,
                            "task_overhead_seconds": rates.task_overhead,
                            "cpu_share": rates.cpu_share}
    return PlanDescription(figures, _text(figures, len(stages), w))


def _text(d: dict[str, Any], nstages: int, w: WorkerFacts) -> str:
    lines = [f"RechunkPlan {d['shape']} {d['dtype']}: {nstages} stage(s), "
             f"{d['ntasks']} tasks, peak ~{_mb(d['peak_task_memory'])} per task "
             f"(max_mem {_mb(d['max_mem'])}), ~{_mb(d['peak_worker_memory'])} per worker "
             f"({w.threads} task(s) at once + {_mb(w.baseline)} baseline + IO pool)"
             + (f"; predicted wall time {d['predicted_wall_seconds']:.1f} s on "
                f"{w.count} worker(s) x {w.threads} thread(s) at "
                f"{d['rates']['cpu_share']:.0%} of a core each"
                if "predicted_wall_seconds" in d else "")]
    for i, s in enumerate(d["stages"], 1):
        t = s["task_memory_terms"]
        runs = f" ({s['blocks_per_task']} blocks each)" if s["blocks_per_task"] > 1 else ""
        lines.append(
            f"  stage {i}: {s['source_chunks']} -> {s['target_chunks']} in blocks "
            f"{s['block']}: {s['ntasks']} tasks{runs}, {_mb(s['bytes_read'])} read and "
            f"written; per task {_mb(t['total'])} = block {_mb(t['block'])} + stored "
            f"bytes in flight {_mb(t['compressed'])} + codec buffers "
            f"{_mb(t['decode_scratch'] + t['encode_copy'])}"
            + (f"; {s['waves']} wave(s) at {_mb(s['throughput_per_thread'])}/s per thread:"
               f" ~{s['predicted_wall_seconds']:.1f} s" if "waves" in s else ""))
    lines += [f"  note: {n}" for n in d["notes"]]
    return "\n".join(lines)


def limit_notes(peak_worker: int, threads: int, memory_limit: int | None,
                thresholds: Mapping[str, float] = NANNY_THRESHOLDS) -> list[str]:
    """What a worker's nanny would do at the modelled peak (spill, pause, restart), at
    ``thresholds`` (fractions of ``memory_limit``, as ``NANNY_THRESHOLDS``)."""
    if not memory_limit:
        return []
    th = {**NANNY_THRESHOLDS, **thresholds}
    for name, verb in (("terminate", "restarts"), ("pause", "pauses"), ("spill", "spills")):
        if peak_worker > th[name] * memory_limit:
            return [f"a worker may hold {_mb(peak_worker)} ({threads} task(s) at once): above "
                    f"the {th[name]:.0%} of its memory_limit {_mb(memory_limit)} at which "
                    f"dask {verb} it; lower max_mem or the threads per worker"]
    return []


def simulate(stages: Sequence[Stage], max_mem: int, workers: int, threads_per_worker: int,
             worker_memory: int | str, throughput: float | str | None = None, *,
             baseline: int, store_bandwidth: float | str | None = None,
             thresholds: Mapping[str, float] = NANNY_THRESHOLDS,
             rates: CopyRates | None = None) -> PlanDescription:
    """Estimate a run of ``stages`` on ``workers`` x ``threads_per_worker`` with
    ``worker_memory`` each (see ``RechunkPlan.simulate``); ``thresholds``: the nanny's
    (``NANNY_THRESHOLDS``). ``throughput``: decoded bytes per second per worker thread,
    for every stage; when None, each stage's from the measured ``rates`` (with their
    per-task overhead). One of them must be given."""
    limit = parse_bytes(worker_memory)
    if throughput is None and rates is None:
        raise ValueError("simulate() needs a throughput or measured rates")
    given = None if throughput is None else float(
        parse_bytes(throughput) if isinstance(throughput, str) else throughput)
    bandwidth = None if store_bandwidth is None else float(
        parse_bytes(store_bandwidth) if isinstance(store_bandwidth, str) else store_bandwidth)
    slots = workers * threads_per_worker
    rows, total = [], 0.0
    for i, s in enumerate(stages):
        if given is not None:
            rate, overhead = given, 0.0
        else:
            assert rates is not None
            rate, overhead = rates.throughput(s), rates.task_overhead
        ntasks, waves, compute_s = stage_seconds(s, slots, 1.0 / rate, overhead)
        io_s = 2 * s.nbytes / bandwidth if bandwidth else 0.0
        seconds = max(compute_s, io_s)
        total += seconds
        rows.append({"stage": i + 1, "source_chunks": s.source_chunks,
                     "target_chunks": s.target_chunks, "block": s.block, "ntasks": ntasks,
                     "blocks_per_task": blocks_per_task(s), "waves": waves,
                     "bytes_read": s.nbytes, "bytes_written": s.nbytes,
                     "task_memory": s.task_memory, "throughput_per_thread": rate,
                     "worker_memory": stage_worker_memory(s, threads_per_worker, baseline),
                     "seconds": seconds, "bound_by": "store" if io_s > compute_s else "workers"})
    rate = given if given is not None else (rows[0]["throughput_per_thread"] if rows else 0.0)
    peak_worker = max((r["worker_memory"] for r in rows), default=baseline)
    spill = {**NANNY_THRESHOLDS, **thresholds}["spill"]
    figures = {"workers": workers, "threads_per_worker": threads_per_worker,
               "worker_memory": limit, "throughput_per_thread": rate,
               "throughput_measured": given is None,
               "store_bandwidth": bandwidth, "baseline": baseline, "max_mem": max_mem,
               "ntasks": sum(r["ntasks"] for r in rows), "stages": rows,
               "peak_task_memory": max((r["task_memory"] for r in rows), default=0),
               "peak_worker_memory": peak_worker, "fits": peak_worker <= spill * limit,
               "notes": limit_notes(peak_worker, threads_per_worker, limit, thresholds),
               "wall_seconds": total}
    lines = [f"simulated on {workers} workers x {threads_per_worker} threads x "
             f"{_mb(limit)}, {_mb(rate)}/s per thread"
             + (" (measured here)" if given is None else "")
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
