"""Bounded-memory rechunk and transpose-and-rewrite of stored arrays, run with Dask.

``rechunk`` returns a plan (``describe()`` shows stages, tasks, bytes and the memory one
task and one worker hold; ``simulate()`` estimates a run on a cluster) and ``execute()``
runs it on the current scheduler: the threaded one, or a ``distributed.Client`` if one
is active. Each task copies one block (or a run of blocks, one after the other),
reading whole source chunks and writing whole target chunks piece by piece (see
``planner``), so no task holds more than ``max_mem`` and no write needs a lock (except
shards assembled by several tasks on a store that cannot commit conditionally: see
``_shares_write_units``). Every refusal comes before the target is created (or an old
one deleted by ``overwrite=True``).

The graph is a lazy mapping: its tasks are made when the scheduler asks for them, so
planning a 100 TB copy costs no more than planning a small one.

This module holds the entry points (``rechunk``, ``transpose``) and the choice of stages
for a target; beside it: ``plan`` (``RechunkPlan``), ``graph`` (the lazy task mapping),
``source`` (``TransposedSource`` and the copy a task does); the pure planning (stages,
memory model, ``describe()``/``simulate()`` figures) is ``chunkstore.rechunk``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from chunkstore.api.creation import create_array
from chunkstore.api.locations import in_group, resolve_location
from chunkstore.api.opening import open_array
from chunkstore.array.array import Array
from chunkstore.array.sources import refuse_reader_of
from chunkstore.dask.local_scratch import local_temp_store
from chunkstore.dask.memory import Workers, active_client, refuse_copied
from chunkstore.dask.plan import RechunkPlan, intermediate_home, shared_units_refusal
from chunkstore.dask.source import TransposedSource, chunk_spec, planning_chunks
from chunkstore.rechunk.planner import (
    PlanError,
    Stage,
    plan_rechunk,
)
from chunkstore.runtime.sync import ProcessSynchronizer, ThreadSynchronizer
from chunkstore.sizes import looks_like_byte_size, parse_bytes


def _create_target(source: Array | TransposedSource, store: Any, path: str | None,
                   chunks: Any, create_kwargs: dict[str, Any]) -> Array:
    base = source.array if isinstance(source, TransposedSource) else source
    kwargs = {"zarr_format": base.zarr_format, "fill_value": base.fill_value,
              "overwrite": False, **create_kwargs}
    if isinstance(source, Array) and source.dimension_names is not None:
        kwargs.setdefault("dimension_names", source.dimension_names)
    return create_array(store, path or "", shape=source.shape, dtype=source.dtype,
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

    ``temp_store``: where a plan of two stages or more keeps its intermediate array;
    None: beside the target, or, for a target in an object store, on this machine's disk
    when every worker reaches it (``local_scratch``: the plan's notes say so).

    ``workers``: the workers' facts for the memory model (threads per worker, codec
    threads, baseline RSS); by default asked from the active ``distributed`` client, else
    this process with Dask's threads.

    ``target_chunks``: a shape (None or -1 in an axis = the whole axis), or a dict
    ``{axis: chunk}`` changing only those axes; an axis given as the length of every
    chunk (``((10, 10, 5), 15)``) makes a v3 rectilinear target. A rectilinear source
    or target is planned on its largest chunk length per axis (the planner's regular
    unit): source chunks are read through the grid-aware ``read_region`` (a chunk cut by
    a block edge is decoded by both blocks), and the last stage's blocks are snapped onto
    a rectilinear target's grid so each of its chunks is written whole by one task, the
    plan made small enough that the snapped blocks fit ``max_mem``.

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
        target_chunks = _chunks_from_dict(target_chunks, _spec_of(source))
    storage_options = create_kwargs.pop("storage_options", None)
    # every refusal before anything is created or deleted (``overwrite=True`` deletes the
    # old array when the target is created): the stages are planned on a probe array
    # with the target's metadata in memory (its chunks normalised as the target's)
    probe = _create_target(source, None, "", target_chunks, _probe_kwargs(create_kwargs))
    chunks = chunk_spec(probe)
    budget = parse_bytes(max_mem)
    if isinstance(path, str) and looks_like_byte_size(path):  # max_mem given 4th
        raise ValueError(f"rechunk: path {path!r} looks like a memory size, not a path in the "
                         f"store; pass max_mem={path!r} by keyword")
    store, path = resolve_location(store, path, storage_options=storage_options)
    base = source.array if isinstance(source, TransposedSource) else source
    refuse_reader_of(base, store, path, "rechunk")  # (the source array: onto itself)
    workers = workers or _workers_here()
    raw = _local_intermediate(store, temp_store)
    scratch_directory = None
    stages, notes = _plan_for(source, probe, budget, workers, raw,
                              run_writes=_writes_in_runs(store))
    if temp_store is None and len(stages) > 1 and store.capabilities.remote:
        # a remote target: the intermediate on this machine's disk, stored raw, when
        # every worker reaches it and there is room for it (``local_scratch``)
        raw_stages, raw_notes = _plan_for(source, probe, budget, workers, True,
                                          run_writes=_writes_in_runs(store))
        local = local_temp_store(_intermediate_bytes(raw_stages, probe), active_client())
        if local is not None:
            temp_store, scratch_directory = local
            stages, notes = raw_stages, raw_notes
            notes.append(f"intermediate on this machine's disk, in {scratch_directory} "
                         "(every worker reaches it): the target's store serves the source "
                         "and the target only; temp_store= puts it elsewhere")
    refuse_copied(store, f"rechunk into {path or '/'!r}")
    if len(stages) > 1:  # an intermediate array needs a place (PlanError if none)
        if temp_store is not None:
            temp_store, _ = resolve_location(temp_store)  # a bad one is refused now, too
        home, _ = intermediate_home(store, path, temp_store)
        refuse_copied(home, "rechunk's intermediate array")
    shared = _shares_write_units(store, path, stages[-1] if stages else None, probe,
                                 create_kwargs, notes)
    target = _create_target(source, store, path, chunks, create_kwargs)
    plan = RechunkPlan(source, target, stages, budget, temp_store, progress, workers,
                       shared_units=shared, scratch_directory=scratch_directory)
    plan.notes.extend(notes)
    return plan


def _probe_kwargs(create_kwargs: dict[str, Any]) -> dict[str, Any]:
    """``create_kwargs`` for a metadata-only probe of the target (no deletion, no locks)."""
    return {k: v for k, v in create_kwargs.items()
            if k not in ("overwrite", "synchronizer", "cache")}


def _shares_write_units(store: Any, path: str, stage: Stage | None, probe: Array,
                        create_kwargs: dict[str, Any], notes: list[str]) -> bool:
    """Whether tasks of the last stage write into common write units (blocks follow the
    inner chunks of shards that do not fit in max_mem) of a store that cannot commit
    conditionally (zip archives, fsspec file systems other than S3). Those tasks' partial
    writes would overwrite each other's, so they take turns under a lock per write unit:
    a ``ThreadSynchronizer`` on the target (unless one is given), honoured by the
    threaded scheduler; PlanError when a ``distributed`` client is active (the locks of
    one process cannot serve its workers) unless a ``ProcessSynchronizer`` is given."""
    unit = tuple(probe.layout.write_shape)
    if not probe.layout.write_grid.is_regular and probe.layout.shards is None:
        return False  # blocks are snapped onto the rectilinear grid: never a shared chunk
    if store.capabilities.conditional_writes or stage is None or not any(
            b < n and b % u for b, u, n in zip(stage.block, unit, stage.shape, strict=True)):
        return False
    sync = create_kwargs.get("synchronizer")
    if active_client() is not None and not isinstance(sync, ProcessSynchronizer):
        raise PlanError(shared_units_refusal(store, path, unit))
    if sync is None:
        create_kwargs["synchronizer"] = ThreadSynchronizer()
    notes.append(f"{store!r} cannot commit conditionally: tasks writing into one shard take "
                 "turns under a lock per shard (run on this process's threads)")
    return True


def _workers_here() -> Workers:
    """The workers' facts: from the active ``distributed`` client, else this process."""
    client = active_client()
    if client is not None:
        try:
            return Workers.of_client(client)
        except Exception:  # noqa: BLE001  (a plan is still possible with the defaults)
            return Workers()
    return Workers.local()


def _intermediate_bytes(stages: list[Stage], target: Array) -> int:
    """Bytes of a plan's intermediate arrays (every stage's but the last) stored raw:
    their chunks whole (an edge chunk is stored at the full chunk shape)."""
    return sum(int(np.prod([-(-n // c) * c for n, c in zip(stage.shape, stage.target_chunks,
                                                           strict=True)], dtype=np.int64))
               for stage in stages[:-1]) * target.dtype.itemsize


def _local_intermediate(target_store: Any, temp_store: Any) -> bool:
    """Whether an intermediate array would live in a local directory (the temp store, or
    beside the target): then it is stored uncompressed (``Stage.raw_target``)."""
    try:
        store = resolve_location(temp_store)[0] if temp_store is not None else target_store
    except Exception:  # noqa: BLE001  (the plan reports a bad temp store when it is used)
        return False
    # files: raw chunks are written from the block's rows and read from their maps (in
    # memory they would only cost RAM)
    caps = store.capabilities
    return bool(caps.writes_arrays and caps.reads_arrays and not caps.process_local)


def _plan_for(source: Array | TransposedSource, target: Array, budget: int,
              workers: Workers | None = None, raw_intermediate: bool = False, *,
              onto_grid: bool = True, run_writes: bool = False
              ) -> tuple[list[Stage], list[str]]:
    """Stages whose blocks cover whole write units of the target (its shards, if sharded),
    so no two tasks write into one object. When one shard does not fit in ``max_mem``,
    blocks follow the inner chunks and each shard is assembled by conditional
    read-modify-writes (correct, but each shard is rewritten several times; on a store
    without conditional commits they take turns under a lock: ``_shares_write_units``).
    ``target`` may be a probe with the target's metadata (nothing is written). A
    rectilinear target: ``_plan_onto_grid`` (``onto_grid`` False: its largest unit as
    a regular one). ``run_writes``: the target's store commits chunks in runs
    (``Stage.run_writes``; ``target`` may be a probe in memory)."""
    if onto_grid and not target.layout.write_grid.is_regular:
        return _plan_onto_grid(source, target, budget, workers, raw_intermediate,
                               run_writes=run_writes)
    unit = tuple(target.layout.write_shape)
    itemsize = source.dtype.itemsize
    workers = workers or Workers()
    model = {"transposed": isinstance(source, TransposedSource),
             "codec_threads": workers.codec_threads, "min_tasks": workers.min_tasks,
             "raw_intermediate": raw_intermediate,
             "streamed_reads": _reads_in_place(source), "run_writes": run_writes}
    source_chunks = _planning_chunks(source)
    try:
        return plan_rechunk(source.shape, source_chunks, unit, itemsize, budget,
                            write_chunks=tuple(target.layout.chunks), **model), []
    except PlanError:
        if unit == tuple(target.layout.chunks):
            raise
    stages = plan_rechunk(source.shape, source_chunks, target.layout.chunks, itemsize, budget,
                          **model)
    return stages, [f"a target shard {unit} does not fit in max_mem={budget} bytes: blocks "
                    f"follow the chunks {tuple(target.layout.chunks)}, and each shard is assembled "
                    "by read-modify-writes (raise max_mem to write whole shards)"]


def _reads_in_place(source: Array | TransposedSource) -> bool:
    """Whether the source's chunks are read in place, one per pool thread at a time
    (a local directory; the memory model's ``Stage.streamed_reads``)."""
    array = source.array if isinstance(source, TransposedSource) else source
    caps = array.store.capabilities
    return bool(caps.zero_copy_views and caps.reads_arrays)


def _writes_in_runs(store: Any) -> bool:
    """Whether chunks written into ``store`` are committed in runs by blocking local
    writes (a local directory; ``Stage.run_writes``)."""
    caps = store.capabilities
    return bool(caps.blocking_commits and not caps.remote)


def _planning_chunks(source: Array | TransposedSource) -> tuple[int, ...]:
    """The source's chunk shape as the planner takes it (``source.planning_chunks``)."""
    return source.chunks if isinstance(source, TransposedSource) else planning_chunks(source)


def _spec_of(source: Array | TransposedSource) -> tuple[Any, ...]:
    return source.chunk_spec if isinstance(source, TransposedSource) else chunk_spec(source)


#: attempts at a smaller budget for the blocks of a rectilinear target, each this much less
GRID_ATTEMPTS, GRID_STEP = 16, 0.8
#: blocks along an axis up to which ``_grown`` snaps each one
MAX_EXACT = 100_000


def _plan_onto_grid(source: Array | TransposedSource, target: Array, budget: int,
                    workers: Workers | None, raw_intermediate: bool, *,
                    run_writes: bool = False) -> tuple[list[Stage], list[str]]:
    """Stages into a target with a rectilinear grid: planned on its largest write unit
    per axis (the planner's regular unit); the last stage's blocks are then snapped onto
    the grid (``source.snapped``), which grows a block by less than one largest unit per
    axis, so the plan is made for a smaller budget until the grown blocks fit."""
    unit = tuple(target.layout.write_shape)
    plan_budget = budget
    for _ in range(GRID_ATTEMPTS):
        try:
            stages, notes = _plan_for(source, target, plan_budget, workers, raw_intermediate,
                                      onto_grid=False, run_writes=run_writes)
        except PlanError:
            break
        last = stages[-1] if stages else None
        if last is None or _grown(last, target).task_memory <= budget:
            return stages, [*notes, "the target's chunk grid is rectilinear: planned on its "
                            f"largest chunk {unit}, each block snapped onto the grid (up to "
                            "one chunk longer per axis, within max_mem)"]
        plan_budget = int(plan_budget * GRID_STEP)
    raise PlanError(f"array {target.name!r}: no blocks aligned with its rectilinear grid "
                    f"(largest chunk {unit}) fit in max_mem={budget} bytes once snapped "
                    "onto the grid: raise max_mem")


def _grown(stage: Stage, target: Array) -> Stage:
    """``stage`` with its block as large as snapping onto ``target``'s grid makes the
    largest one (per axis the longest snapped block; beyond ``MAX_EXACT`` blocks along
    an axis, the bound of one largest unit more)."""
    grid, unit = target.layout.write_grid, target.layout.write_shape
    block = []
    for axis, (b, u, n) in enumerate(zip(stage.block, unit, stage.shape, strict=True)):
        if b >= n:
            block.append(b)
        elif -(-n // b) > MAX_EXACT:
            block.append(min(n, b + u - 1))
        else:
            edges = [0, *(grid.chunk_start(axis, grid.chunk_of(axis, e))
                          for e in range(b, n, b)), n]
            block.append(max(y - x for x, y in zip(edges[:-1], edges[1:], strict=True)))
    return replace(stage, block=tuple(block))


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
    target_chunks = view.chunk_spec if chunks is None else chunks
    plan = rechunk(view, target_chunks, store, path, max_mem, temp_store, progress,
                   workers=workers, **create_kwargs)
    return plan.execute()


def _int_sequence(value: Any) -> bool:
    try:
        items = list(value)
    except TypeError:
        return False
    return all(isinstance(a, int | np.integer) for a in items)
