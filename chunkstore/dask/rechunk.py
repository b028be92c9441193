"""Bounded-memory rechunk and transpose-and-rewrite of stored arrays, run with Dask.

``rechunk`` returns a plan (``describe()`` shows stages, tasks, bytes and the memory one
task holds) and ``execute()`` runs it on the current scheduler: the threaded one, or a
``distributed.Client`` if one is active. Each task copies one block, reading whole
source chunks and writing whole target chunks (see ``planner``), so no task holds more
than about ``max_mem`` and no write needs a lock.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import dask
import numpy as np
from dask.base import tokenize
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph

from ..api import create_array, open_array
from ..array import Array
from ..creation import normalize_chunks
from ..hierarchy.paths import normalize_path
from ..info import human_bytes
from ..io.overlap import refuse_onto_itself
from ..storage.resolve import resolve_store
from .io import in_group
from .planner import PlanError, Stage, parse_bytes, plan_rechunk


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

    def read_region(self, region: tuple[slice, ...]) -> np.ndarray:
        source_region = [slice(None)] * len(self.axes)
        for out_axis, src_axis in enumerate(self.axes):
            source_region[src_axis] = region[out_axis]
        return np.ascontiguousarray(self.array.read_region(tuple(source_region))
                                    .transpose(self.axes))


def _copy_block(source: Any, target: Array, region: tuple[slice, ...], *after: Any) -> None:
    target.write_region(region, source.read_region(region))
    return None


def _done(*_: Any) -> None:
    return None


class PlanDescription(dict):
    """``RechunkPlan.describe()``: the plan's figures as a dict, printed as its summary."""

    def __init__(self, figures: dict[str, Any], text: str) -> None:
        super().__init__(figures)
        self._text = text

    def __str__(self) -> str:
        return self._text


class RechunkPlan:
    """What a rechunk/transpose will do; ``execute()`` does it."""

    def __init__(self, source: Array | TransposedSource, target: Array, stages: list[Stage],
                 max_mem: int, temp_store: Any, progress: bool) -> None:
        self.source, self.target, self.stages = source, target, stages
        self.max_mem, self.temp_store, self.progress = max_mem, temp_store, progress
        self._temp_arrays: list[Array] = []
        self.notes: list[str] = []

    # -- inspection ---------------------------------------------------------------------------
    @property
    def ntasks(self) -> int:
        return sum(s.ntasks for s in self.stages)

    @property
    def peak_task_memory(self) -> int:
        return max((s.task_memory for s in self.stages), default=0)

    def describe(self) -> PlanDescription:
        """Stages, tasks, bytes read and written, and the expected peak memory per task:
        a dict that prints as the plan's summary."""
        return PlanDescription({
            "shape": tuple(self.target.shape),
            "dtype": str(self.target.dtype),
            "max_mem": self.max_mem,
            "ntasks": self.ntasks,
            "peak_task_memory": self.peak_task_memory,
            "bytes_read": sum(s.nbytes for s in self.stages),
            "bytes_written": sum(s.nbytes for s in self.stages),
            "stages": [
                {"source_chunks": s.source_chunks, "target_chunks": s.target_chunks,
                 "block": s.block, "ntasks": s.ntasks, "block_bytes": s.block_bytes,
                 "task_memory": s.task_memory, "bytes_read": s.nbytes,
                 "bytes_written": s.nbytes, "intermediate": i < len(self.stages) - 1}
                for i, s in enumerate(self.stages)
            ],
            "write_unit": tuple(self.target.layout.write_shape),
            "notes": list(self.notes),
        }, str(self))

    def __repr__(self) -> str:
        d = self._summary()
        lines = [f"RechunkPlan {d['shape']} {d['dtype']}: {len(self.stages)} stage(s), "
                 f"{d['ntasks']} tasks, peak ~{human_bytes(d['peak_task_memory'])}B per task "
                 f"(max_mem {human_bytes(self.max_mem)}B)"]
        for i, s in enumerate(d["stages"], 1):
            lines.append(f"  stage {i}: {s['source_chunks']} -> {s['target_chunks']} in blocks "
                         f"{s['block']}: {s['ntasks']} tasks, {human_bytes(s['bytes_read'])}B "
                         f"read and written")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def _summary(self) -> dict[str, Any]:
        return {"shape": tuple(self.target.shape), "dtype": str(self.target.dtype),
                "ntasks": self.ntasks, "peak_task_memory": self.peak_task_memory,
                "stages": [{"source_chunks": s.source_chunks, "target_chunks": s.target_chunks,
                            "block": s.block, "ntasks": s.ntasks, "bytes_read": s.nbytes}
                           for s in self.stages]}

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

    def to_delayed(self) -> Delayed:
        """The whole plan as one Delayed (intermediate arrays are created now)."""
        layer: dict[Any, Any] = {}
        token = tokenize(id(self), uuid.uuid4().hex)
        source: Any = self.source
        after: tuple[Any, ...] = ()
        for i, stage in enumerate(self.stages):
            last = i == len(self.stages) - 1
            target = self.target if last else self._intermediate(stage)
            src_key, dst_key = f"rechunk-src-{i}-{token}", f"rechunk-dst-{i}-{token}"
            layer[src_key], layer[dst_key] = source, target
            keys = []
            for j, region in enumerate(stage.blocks()):
                key = (f"rechunk-copy-{i}-{token}", j)
                layer[key] = (_copy_block, src_key, dst_key, region, *after)
                keys.append(key)
            barrier = f"rechunk-stage-{i}-done-{token}"
            layer[barrier] = (_done, *keys)
            after, source = (barrier,), target
        graph = HighLevelGraph.from_collections(barrier, layer, dependencies=[])
        return Delayed(barrier, graph)

    def execute(self) -> Array:
        """Run on the current scheduler; returns the target Array. Temporary arrays are
        removed afterwards, also on failure."""
        try:
            delayed = self.to_delayed()
            client = _active_client()
            if client is not None:
                future = client.compute(delayed)
                if self.progress:
                    from distributed import progress
                    progress(future)
                future.result()
            elif self.progress:
                from dask.diagnostics import ProgressBar
                with ProgressBar():
                    dask.compute(delayed)
            else:
                dask.compute(delayed)
        finally:
            for temp in self._temp_arrays:
                temp.store.delete_prefix(temp.path)
                if not temp.path:
                    temp.store.remove_root()
            self._temp_arrays.clear()
        return self.target


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
            *, source_path: str | None = None, **create_kwargs: Any) -> RechunkPlan:
    """Plan copying ``src`` (an Array, or a store with ``source_path``) into a new array
    with ``target_chunks`` at ``store``/``path``, never holding more than ``max_mem`` per
    task. Call ``.execute()`` on the result.

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
    store, path = in_group(store, path)
    store = resolve_store(store, storage_options=create_kwargs.pop("storage_options", None))
    path = normalize_path(path)
    base = source.array if isinstance(source, TransposedSource) else source
    refuse_onto_itself(base, store, path, "rechunk")
    # refuse an impossible plan before creating anything
    plan_rechunk(source.shape, source.chunks, chunks, source.dtype.itemsize, budget)
    target = _create_target(source, store, path, chunks, create_kwargs)
    stages, notes = _plan_for(source, target, budget)
    plan = RechunkPlan(source, target, stages, budget, temp_store, progress)
    plan.notes.extend(notes)
    return plan


def _plan_for(source: Array | TransposedSource, target: Array, budget: int
              ) -> tuple[list[Stage], list[str]]:
    """Stages whose blocks cover whole write units of the target (its shards, if sharded),
    so no two tasks write into one object. When one shard does not fit in ``max_mem``,
    blocks follow the inner chunks and each shard is assembled by conditional
    read-modify-writes (correct, but each shard is rewritten several times)."""
    unit = tuple(target.layout.write_shape)
    itemsize = source.dtype.itemsize
    try:
        return plan_rechunk(source.shape, source.chunks, unit, itemsize, budget), []
    except PlanError:
        if unit == tuple(target.chunks):
            raise
    stages = plan_rechunk(source.shape, source.chunks, target.chunks, itemsize, budget)
    return stages, [f"a target shard {unit} does not fit in max_mem={budget} bytes: blocks "
                    f"follow the chunks {tuple(target.chunks)}, and each shard is assembled "
                    "by read-modify-writes (raise max_mem to write whole shards)"]


def transpose(src: Any, axes: Any, store: Any, path: str | None = None, chunks: Any = None,
              max_mem: int | str = "1GiB", progress: bool = False, *,
              temp_store: Any = None, source_path: str | None = None,
              **create_kwargs: Any) -> Array:
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
    axes = tuple(range(array.ndim))[::-1] if axes is None else tuple(int(a) for a in axes)
    if all(-array.ndim <= a < array.ndim for a in axes):  # negative axes, as np.transpose
        axes = tuple(a % array.ndim for a in axes)
    if sorted(axes) != list(range(array.ndim)):
        raise ValueError(f"array {array.name!r}: axes {axes} are not a permutation of "
                         f"{array.ndim} axes")
    view = TransposedSource(array, axes)
    target_chunks = view.chunks if chunks is None else chunks
    plan = rechunk(view, target_chunks, store, path, max_mem, temp_store, progress,
                   **create_kwargs)
    return plan.execute()
