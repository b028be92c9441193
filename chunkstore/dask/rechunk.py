"""Bounded-memory rechunk and transpose-and-rewrite of stored arrays, run with Dask.

``rechunk`` returns a plan (``describe()`` shows stages, tasks, bytes and the memory one
task and one worker hold; ``simulate()`` estimates a run on a cluster) and ``execute()``
runs it on the current scheduler: the threaded one, or a ``distributed.Client`` if one
is active. Each task copies one block (or a run of blocks, one after the other),
reading whole source chunks and writing whole target chunks piece by piece (see
``planner``), so no task holds more than ``max_mem`` and no write needs a lock.

The graph is a lazy mapping: its tasks are made when the scheduler asks for them, so
planning a 100 TB copy costs no more than planning a small one.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import dask
import numpy as np
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph

from ..api import create_array, open_array
from ..array import Array
from ..creation import normalize_chunks
from ..hierarchy.paths import normalize_path
from ..info import human_bytes
from ..io.overlap import refuse_onto_itself
from ..storage.resolve import looks_like_byte_size, resolve_store
from .io import in_group
from .memory import Workers, configure_workers, limit_map_cache
from .permute import copy_permuted
from .planner import PlanError, Stage, parse_bytes, pieces_of, plan_rechunk

try:  # dask's task objects (dask >= 2024.12); legacy tuples otherwise
    from dask import _task_spec as _spec
except ImportError:  # pragma: no cover
    _spec = None

#: copy tasks per stage at most: beyond it a task copies a run of blocks one after the
#: other (same memory per task, a graph that stays small at any array size)
MAX_TASKS_PER_STAGE = 10_000


@dataclass(frozen=True)
class TransposedSource:
    """A read-only view of an Array with permuted axes (``np.transpose`` semantics)."""

    array: Array
    axes: tuple[int, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape[a] for a in self.axes)

    @property
    def chunks(self) -> tuple[int, ...]:
        return tuple(self.array.chunks[a] for a in self.axes)

    @property
    def dtype(self) -> np.dtype:
        return self.array.dtype

    def _source_region(self, region: tuple[slice, ...]) -> tuple[slice, ...]:
        source_region = [slice(None)] * len(self.axes)
        for out_axis, src_axis in enumerate(self.axes):
            source_region[src_axis] = region[out_axis]
        return tuple(source_region)

    def read_into(self, region: tuple[slice, ...], out: np.ndarray) -> None:
        """Fill ``out`` (shaped like ``region`` of the view) with the view's values: the
        region is decoded in the source's order (chunks straight into place), then
        copied into ``out`` transposed, tile by tile (``permute.copy_permuted``: 4x
        faster than NumPy's strided copy of a large transposed array)."""
        source_region = self._source_region(region)
        buf = np.empty(tuple(s.stop - s.start for s in source_region), dtype=self.dtype)
        self.array.get_basic_selection(source_region, out=buf)
        copy_permuted(out, buf.transpose(self.axes))
        del buf

    def read_region(self, region: tuple[slice, ...]) -> np.ndarray:
        out = np.empty(tuple(s.stop - s.start for s in region), dtype=self.dtype)
        self.read_into(region, out)
        return out


def read_into(source: Array | TransposedSource, region: tuple[slice, ...],
              out: np.ndarray) -> None:
    """``out[...] = source[region]`` without an intermediate array."""
    if isinstance(source, TransposedSource):
        source.read_into(region, out)
    else:
        source.get_basic_selection(region, out=out)


def copy_block(source: Any, target: Array, region: tuple[slice, ...],
               read_piece: tuple[int, ...], write_piece: tuple[int, ...]) -> None:
    """Copy ``region``: one decoded block, filled ``read_piece`` by ``read_piece`` (whole
    source chunks) and written ``write_piece`` by ``write_piece`` (whole target units),
    so only one piece's stored bytes are in flight at a time."""
    shape = tuple(s.stop - s.start for s in region)
    block = np.empty(shape, dtype=target.dtype)

    def local(piece: tuple[slice, ...]) -> tuple[Any, ...]:
        # Ellipsis keeps a view even of a 0-d block (block[()] would be a scalar copy)
        return (*(slice(p.start - r.start, p.stop - r.start)
                  for p, r in zip(piece, region, strict=True)), Ellipsis)

    for piece in pieces_of(region, read_piece):
        read_into(source, piece, block[local(piece)])
    for piece in pieces_of(region, write_piece):
        target.write_region(piece, block[local(piece)])
    del block


def _copy_blocks(source: Any, target: Array, stage: Stage, first: int, count: int,
                 *after: Any) -> None:
    """A copy task: blocks ``first .. first + count - 1`` of ``stage``, one at a time."""
    read_piece, write_piece = stage.read_piece, stage.write_piece
    for j in range(first, min(first + count, stage.ntasks)):
        copy_block(source, target, stage.block_region(j), read_piece, write_piece)
    return None


def _done(*_: Any) -> None:
    return None


def blocks_per_task(stage: Stage, max_tasks: int = MAX_TASKS_PER_STAGE) -> int:
    """Blocks one copy task of ``stage`` copies (1 unless the stage has more blocks than
    ``max_tasks``)."""
    return max(1, math.ceil(stage.ntasks / max(1, max_tasks)))


class PlanGraph(Mapping):
    """The tasks of a plan, made on demand (a read-only mapping key -> task).

    Per stage ``i``: the source and target handles, copy tasks
    ``("rechunk-copy-<i>-<token>", j)`` and a barrier the next stage waits for.
    """

    def __init__(self, token: str, stages: list[Stage], handles: list[tuple[Any, Any]],
                 max_tasks: int = MAX_TASKS_PER_STAGE) -> None:
        self.token, self.stages, self.handles = token, stages, handles
        self.per_task = [blocks_per_task(s, max_tasks) for s in stages]
        self.ntasks = [math.ceil(s.ntasks / g) if s.ntasks else 0
                       for s, g in zip(stages, self.per_task, strict=True)]

    def copy_name(self, i: int) -> str:
        return f"rechunk-copy-{i}-{self.token}"

    def barrier(self, i: int) -> str:
        return f"rechunk-stage-{i}-done-{self.token}"

    def _handles(self, i: int) -> tuple[str, str]:
        return f"rechunk-src-{i}-{self.token}", f"rechunk-dst-{i}-{self.token}"

    def __len__(self) -> int:
        return sum(self.ntasks) + 3 * len(self.stages)

    def __iter__(self) -> Iterator[Any]:
        for i in range(len(self.stages)):
            yield from self._handles(i)
            name = self.copy_name(i)
            for j in range(self.ntasks[i]):
                yield (name, j)
            yield self.barrier(i)

    def __contains__(self, key: object) -> bool:
        try:
            self[key]
        except KeyError:
            return False
        return True

    def __getitem__(self, key: Any) -> Any:
        for i, stage in enumerate(self.stages):
            src_key, dst_key = self._handles(i)
            if key == src_key or key == dst_key:
                value = self.handles[i][0 if key == src_key else 1]
                return _spec.DataNode(key, value) if _spec else value
            if key == self.barrier(i):
                keys = [(self.copy_name(i), j) for j in range(self.ntasks[i])]
                if _spec:
                    return _spec.Task(key, _done, *[_spec.TaskRef(k) for k in keys])
                return (_done, *keys)
            if isinstance(key, tuple) and len(key) == 2 and key[0] == self.copy_name(i) \
                    and isinstance(key[1], int) and 0 <= key[1] < self.ntasks[i]:
                g = self.per_task[i]
                after = (self.barrier(i - 1),) if i else ()
                if _spec:  # dask's task objects: no conversion of a legacy graph needed
                    return _spec.Task(key, _copy_blocks, _spec.TaskRef(src_key),
                                      _spec.TaskRef(dst_key), stage, key[1] * g, g,
                                      *[_spec.TaskRef(a) for a in after])
                return (_copy_blocks, src_key, dst_key, stage, key[1] * g, g, *after)
        raise KeyError(key)


class PlanDescription(dict):
    """``RechunkPlan.describe()``: the plan's figures as a dict, printed as its summary."""

    def __init__(self, figures: dict[str, Any], text: str) -> None:
        super().__init__(figures)
        self._text = text

    def __str__(self) -> str:
        return self._text


def _mb(n: float) -> str:
    return f"{human_bytes(n)}B"


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
        temp = create_array(store, path, shape=stage.shape, dtype=self.target.dtype,
                            chunks=stage.target_chunks, zarr_format=3)
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
            client = _active_client()
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


def _active_client() -> Any:
    try:
        from distributed import default_client
        return default_client()
    except (ImportError, ValueError):
        return None


def _create_target(source: Array | TransposedSource, store: Any, path: str | None,
                   chunks: tuple[int, ...], create_kwargs: dict[str, Any]) -> Array:
    base = source.array if isinstance(source, TransposedSource) else source
    kwargs = {"zarr_format": base.zarr_format, "fill_value": base.fill_value,
              "overwrite": False, **create_kwargs}
    if isinstance(source, Array) and source.dimension_names is not None:
        kwargs.setdefault("dimension_names", source.dimension_names)
    return create_array(store, normalize_path(path), shape=source.shape, dtype=source.dtype,
                        chunks=chunks, **kwargs)


def _chunks_from_dict(chunks: dict[int, Any], source_chunks: tuple[int, ...]) -> tuple[Any, ...]:
    """``{axis: chunk}`` (negative axes allowed) -> a full chunk tuple; other axes keep
    the source chunks."""
    ndim = len(source_chunks)
    out: list[Any] = list(source_chunks)
    for axis, chunk in chunks.items():
        if not -ndim <= int(axis) < ndim:
            raise ValueError(f"rechunk: axis {axis} is out of range for {ndim} dimensions")
        out[int(axis) % ndim] = chunk
    return tuple(out)


def rechunk(src: Any, target_chunks: Any, store: Any, path: str | None = None,
            max_mem: int | str = "1GiB", temp_store: Any = None, progress: bool = False,
            *, source_path: str | None = None, workers: Workers | None = None,
            **create_kwargs: Any) -> RechunkPlan:
    """Plan copying ``src`` (an Array, or a store with ``source_path``) into a new array
    with ``target_chunks`` at ``store``/``path``, never holding more than ``max_mem`` per
    task. Call ``.execute()`` on the result.

    ``workers``: the workers' facts for the memory model (threads per worker, codec
    threads, baseline RSS); by default asked from the active ``distributed`` client, else
    this process with Dask's threads.

    ``target_chunks``: a shape (None or -1 in an axis = the whole axis), or a dict
    ``{axis: chunk}`` changing only those axes.

    >>> import chunkstore as cs
    >>> a = cs.array(np.arange(64.0).reshape(8, 8), chunks=(8, 1))
    >>> plan = rechunk(a, (1, 8), cs.MemoryStore(), max_mem="1MiB")
    >>> plan.execute().chunks
    (1, 8)
    """
    if not isinstance(src, Array | TransposedSource):
        src_store, src_path = in_group(src, source_path)
        src = open_array(src_store, mode="r", path=src_path)
    source = src
    if isinstance(target_chunks, dict):  # dask's spelling: {axis: chunk}, others kept
        target_chunks = _chunks_from_dict(target_chunks, tuple(source.chunks))
    chunks = normalize_chunks(target_chunks, tuple(source.shape), source.dtype.itemsize)
    budget = parse_bytes(max_mem)
    if isinstance(path, str) and looks_like_byte_size(path):  # max_mem given 4th
        raise ValueError(f"rechunk: path {path!r} looks like a memory size, not a path in the "
                         f"store; pass max_mem={path!r} by keyword")
    store, path = in_group(store, path)
    store = resolve_store(store, storage_options=create_kwargs.pop("storage_options", None))
    path = normalize_path(path)
    base = source.array if isinstance(source, TransposedSource) else source
    refuse_onto_itself(base, store, path, "rechunk")
    workers = workers or _workers_here()
    # refuse an impossible plan before creating anything
    plan_rechunk(source.shape, source.chunks, chunks, source.dtype.itemsize, budget,
                 transposed=isinstance(source, TransposedSource),
                 codec_threads=workers.codec_threads, min_tasks=workers.min_tasks)
    target = _create_target(source, store, path, chunks, create_kwargs)
    stages, notes = _plan_for(source, target, budget, workers)
    plan = RechunkPlan(source, target, stages, budget, temp_store, progress, workers)
    plan.notes.extend(notes)
    return plan


def _workers_here() -> Workers:
    """The workers' facts: from the active ``distributed`` client, else this process."""
    client = _active_client()
    if client is not None:
        try:
            return Workers.of_client(client)
        except Exception:  # noqa: BLE001  (a plan is still possible with the defaults)
            return Workers()
    return Workers.local()


def _plan_for(source: Array | TransposedSource, target: Array, budget: int,
              workers: Workers | None = None) -> tuple[list[Stage], list[str]]:
    """Stages whose blocks cover whole write units of the target (its shards, if sharded),
    so no two tasks write into one object. When one shard does not fit in ``max_mem``,
    blocks follow the inner chunks and each shard is assembled by conditional
    read-modify-writes (correct, but each shard is rewritten several times)."""
    unit = tuple(target.layout.write_shape)
    itemsize = source.dtype.itemsize
    workers = workers or Workers()
    model = {"transposed": isinstance(source, TransposedSource),
             "codec_threads": workers.codec_threads, "min_tasks": workers.min_tasks}
    try:
        return plan_rechunk(source.shape, source.chunks, unit, itemsize, budget,
                            write_chunks=tuple(target.chunks), **model), []
    except PlanError:
        if unit == tuple(target.chunks):
            raise
    stages = plan_rechunk(source.shape, source.chunks, target.chunks, itemsize, budget,
                          **model)
    return stages, [f"a target shard {unit} does not fit in max_mem={budget} bytes: blocks "
                    f"follow the chunks {tuple(target.chunks)}, and each shard is assembled "
                    "by read-modify-writes (raise max_mem to write whole shards)"]


def transpose(src: Any, axes: Any, store: Any, path: str | None = None, chunks: Any = None,
              max_mem: int | str = "1GiB", progress: bool = False, *,
              temp_store: Any = None, source_path: str | None = None,
              workers: Workers | None = None, **create_kwargs: Any) -> Array:
    """Transpose-and-rewrite: a new array equal to ``np.transpose(src, axes)``.

    Target chunks default to the source chunks permuted, which needs one pass reading
    and writing each chunk once; other chunks are reached within ``max_mem`` too.

    >>> import chunkstore as cs
    >>> a = cs.array(np.arange(24).reshape(2, 3, 4), chunks=(1, 3, 2))
    >>> transpose(a, (2, 0, 1), cs.MemoryStore()).shape
    (4, 2, 3)
    """
    if not isinstance(src, Array):
        src_store, src_path = in_group(src, source_path)
        src = open_array(src_store, mode="r", path=src_path)
    array = src
    if axes is not None and (isinstance(axes, str | bytes) or not _int_sequence(axes)):
        raise TypeError(f"transpose: axes must be a permutation of the axes (ints) or None, "
                        f"got {axes!r}; the call is transpose(src, axes, store, ...)")
    axes = tuple(range(array.ndim))[::-1] if axes is None else tuple(int(a) for a in axes)
    if all(-array.ndim <= a < array.ndim for a in axes):  # negative axes, as np.transpose
        axes = tuple(a % array.ndim for a in axes)
    if sorted(axes) != list(range(array.ndim)):
        raise ValueError(f"array {array.name!r}: axes {axes} are not a permutation of "
                         f"{array.ndim} axes")
    view = TransposedSource(array, axes)
    target_chunks = view.chunks if chunks is None else chunks
    plan = rechunk(view, target_chunks, store, path, max_mem, temp_store, progress,
                   workers=workers, **create_kwargs)
    return plan.execute()


def _int_sequence(value: Any) -> bool:
    try:
        items = list(value)
    except TypeError:
        return False
    return all(isinstance(a, int | np.integer) for a in items)
