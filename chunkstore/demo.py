"""``chunkstore demo``: the main job, end to end on a local store and a local Dask cluster.

Builds a synthetic array (multi-GiB by default, a few MiB with ``--small``), shows its
info and the hierarchy, transposes and rechunks it with a memory bound on a
``distributed.LocalCluster``, verifies the results against the source, and prints a
summary with timings.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .api import create_array, open_array
from .progress import ProgressBar


def _timed(label: str, timings: dict[str, float], fn: Callable[[], Any]) -> Any:
    t0 = time.perf_counter()
    result = fn()
    timings[label] = time.perf_counter() - t0
    return result


def _fill(a: Any, rows: int) -> None:
    """Write a smooth synthetic field in bands of chunk rows (bounded memory)."""
    bar = ProgressBar("write", unit="rows")
    n, m = a.shape
    x = np.arange(m, dtype="f4")
    for start in range(0, n, rows):
        y = np.arange(start, min(n, start + rows), dtype="f4")[:, None]
        a[start:start + len(y)] = np.sin(y / 97.0) * np.cos(x / 53.0) + y * 1e-4
        bar(min(n, start + rows), n, (start + len(y)) * m * 4)


def _same(a: Any, b: Any, transpose: bool, rows: int) -> bool:
    for start in range(0, a.shape[0], rows):
        part = a[start:start + rows]
        other = b[:, start:start + rows].T if transpose else b[start:start + rows]
        if not np.array_equal(part, other):
            return False
    return True


def run_demo(directory: str | None = None, small: bool = False, workers: int = 2,
             max_mem: str = "256MiB") -> int:
    """Run the demo; returns the process exit status."""
    from distributed import Client, LocalCluster

    from .dask import rechunk, transpose
    from .verify import verify

    root = directory or tempfile.mkdtemp(prefix="chunkstore-demo-")
    side = 2048 if small else 32768  # 16 MiB or 4 GiB of float32
    chunks = (256, 256) if small else (1024, 1024)
    store_path = f"{root}/demo.zarr"
    print(f"chunkstore demo: a {side}x{side} float32 array ({side * side * 4 / 2**30:.2f} GiB) "
          f"in {store_path}, chunks {chunks}, on a LocalCluster of {workers} workers\n")
    timings: dict[str, float] = {}
    source = create_array(store_path, "field", shape=(side, side), chunks=chunks, dtype="f4",
                          dimension_names=["y", "x"], overwrite=True,
                          attributes={"description": "smooth synthetic field"})
    _timed("write", timings, lambda: _fill(source, chunks[0] * 4))
    print(source.info, "\n")
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster):
        transposed = _timed("transpose", timings, lambda: transpose(
            source, (1, 0), store_path, "field_T", max_mem=max_mem, progress=True))
        plan = rechunk(source, (side, max(1, chunks[1] // 16)), store_path, "field_columns",
                       max_mem=max_mem, progress=True)
        print(plan)
        columns = _timed("rechunk", timings, plan.execute)
    _print_tree(store_path)
    ok_t = _timed("check", timings, lambda: _same(source, open_array(store_path, mode="r",
                                                                     path="field_T"), True,
                                                  chunks[0] * 4))
    ok_c = _same(source, columns, False, chunks[0] * 4)
    report = _timed("verify", timings, lambda: verify(
        open_array(store_path, mode="r", path="field").store))
    gib = side * side * 4 / 2**30
    print("\nsummary")
    for label, seconds in timings.items():
        rate = f"  ({gib * 1024 / seconds:.0f} MiB/s)" if label in ("write", "transpose",
                                                                  "rechunk") else ""
        print(f"  {label:<10} {seconds:7.2f} s{rate}")
    print(f"  transpose matches: {ok_t}; rechunk matches: {ok_c}; verify: {report.chunks} "
          f"chunks in {report.arrays} arrays, {len(report.bad)} bad")
    print(f"  transposed chunks {transposed.chunks}, rechunked chunks {columns.chunks}, "
          f"max_mem {max_mem} per task")
    return 0 if ok_t and ok_c and report.ok else 1


def _print_tree(store_path: str) -> None:
    try:
        from .api import open as open_node
        node = open_node(store_path, mode="r")
        if hasattr(node, "tree"):
            print(node.tree())
            return
    except Exception:  # the tree is a nicety: never fail the demo on it
        pass
    from .storage import LocalStore
    from .verify import walk_nodes
    for path, meta in walk_nodes(LocalStore(store_path)):
        shape = getattr(meta, "shape", None)
        print(f"  /{path} {shape if shape is not None else '(group)'}")
