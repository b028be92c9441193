"""The Dask graph of a plan: a lazy mapping whose tasks are made when the scheduler asks.

Planning a 100 TB copy costs no more than planning a small one: per stage, two handle
keys, the copy tasks (a task copies a run of blocks when a stage has more than
``MAX_TASKS_PER_STAGE`` blocks) and a barrier the next stage waits for.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

from chunkstore.array.array import Array
from chunkstore.dask.source import copy_block, snapped
from chunkstore.rechunk.planner import MAX_TASKS_PER_STAGE, Stage, blocks_per_task
from chunkstore.runtime import current

try:  # dask's task objects (dask >= 2024.12); legacy tuples otherwise
    from dask import _task_spec as _spec
except ImportError:  # pragma: no cover
    _spec = None

#: copy tasks per stage at most: beyond it a task copies a run of blocks one after the
#: other (same memory per task, a graph that stays small at any array size)


def _copy_blocks(source: Any, target: Array, stage: Stage, first: int, count: int,
                 *after: Any) -> None:
    """A copy task: blocks ``first .. first + count - 1`` of ``stage``, one at a time."""
    read_piece, write_piece = stage.read_piece, stage.write_piece
    with current().buffers.retaining(stage.task_memory):  # the next task reuses the blocks
        for j in range(first, min(first + count, stage.ntasks)):
            copy_block(source, target, snapped(stage.block_region(j), target), read_piece,
                       write_piece)
    return None


def _done(*_: Any) -> None:
    return None


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
