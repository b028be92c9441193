"""The Dask layer: lazy reads, chunk-aligned writes, bounded-memory rechunk and transpose.

>>> import chunkstore as cs
>>> x = cs.dask.from_store(cs.array(np.ones((4, 4)), chunks=(2, 2)))
"""

import numpy as np  # noqa: F401  (used by the doctest above)

from chunkstore.dask.io import from_store, to_store
from chunkstore.dask.memory import WorkerMemory, Workers, configure_workers
from chunkstore.dask.rechunk import RechunkPlan, TransposedSource, rechunk, transpose
from chunkstore.rechunk.planner import PlanError, Stage, plan_rechunk
from chunkstore.sizes import parse_bytes

__all__ = ["PlanError", "RechunkPlan", "Stage", "TransposedSource", "WorkerMemory", "Workers",
           "configure_workers", "from_store", "parse_bytes", "plan_rechunk", "rechunk",
           "to_store", "transpose"]
