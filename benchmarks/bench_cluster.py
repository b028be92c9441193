"""The seed's job at cluster scale, planned, simulated and its graph built (never run).

    python -m benchmarks.bench_cluster                 # 370 GB and 100 TB
    python -m benchmarks.bench_cluster --tiny          # seconds, for CI
    python -m benchmarks.bench_cluster --throughput 60MB

The seed transposes a (10000, 10000, 500) float64 array (373 GiB) made by dask (auto
chunks, 128 MiB: (255, 255, 255)) and rewrites it on 50 workers x 4 threads x 24 GiB.
This plans that transpose with chunkstore (``max_mem`` = a quarter of a worker's memory
minus its baseline, as 4 tasks run at once), prints ``describe()`` and
``simulate(workers=50, threads_per_worker=4, worker_memory="24GiB", throughput=...)``,
then builds the Dask graph for real without computing it: build time and client memory
(tracemalloc peak) of the lazy graph, and of materializing every task as the scheduler
would (dask's task conversion). ``--throughput``: decoded bytes one worker thread copies
per second, measured by ``benchmarks/bench_rechunk.py`` (its "MB/s of decoded data
copied per worker thread" line).
"""

from __future__ import annotations

import argparse
import gc
import json
import time
import tracemalloc
from pathlib import Path

OUT = Path("bench-out")
GiB = 2**30
#: measured by bench_rechunk here: transpose of 4 GiB float32 in 30.7 s on 2 worker
#: threads = 70 MB/s of decoded data per thread (2 shared cores, load average 5-6; the
#: workers used 24 s of CPU: 179 MB/s per thread that has a core to itself)
DEFAULT_THROUGHPUT = "70MB"
BUDGET_SECONDS, BUDGET_BYTES = 10.0, 10**9  # graph build at 370 GB (issue 13)


def seed_plan(shape, chunks, workers, threads, worker_memory):
    import chunkstore as cs
    import chunkstore.dask as csd
    from chunkstore.dask.memory import DEFAULT_BASELINE, Workers, codec_threads_for
    from chunkstore.sizes import parse_bytes
    src = cs.create_array(cs.MemoryStore(), shape=shape, chunks=chunks, dtype="f8")
    view = csd.TransposedSource(src, tuple(reversed(range(len(shape)))))
    facts = Workers(threads=threads, codec_threads=codec_threads_for(threads, 4 * threads),
                    baseline=DEFAULT_BASELINE, memory_limit=parse_bytes(worker_memory),
                    count=workers)
    # 4 tasks at once stay under 60% of the worker's memory (dask spills at 70%)
    max_mem = int((0.6 * parse_bytes(worker_memory) - DEFAULT_BASELINE) // threads)
    return csd.rechunk(view, view.chunks, cs.MemoryStore(), max_mem=max_mem, workers=facts)


def graph_figures(plan) -> dict:
    """Build the plan's graph (lazy), then materialize every task as the scheduler does."""
    from dask._task_spec import convert_legacy_graph
    gc.collect()
    tracemalloc.start()
    t0 = time.perf_counter()
    delayed = plan.to_delayed()
    build_s = time.perf_counter() - t0
    build_bytes = tracemalloc.get_traced_memory()[1]
    tracemalloc.reset_peak()
    t0 = time.perf_counter()
    graph = dict(delayed.__dask_graph__())
    tasks = convert_legacy_graph(graph)
    materialize_s = time.perf_counter() - t0
    materialize_bytes = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    n = len(tasks)
    del graph, tasks, delayed
    return {"graph_tasks": n, "build_s": build_s, "build_mb": build_bytes / 1e6,
            "materialize_s": materialize_s, "materialize_mb": materialize_bytes / 1e6}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--throughput", default=DEFAULT_THROUGHPUT,
                        help="decoded bytes/s one worker thread copies (e.g. 20MB)")
    parser.add_argument("--store-bandwidth", default=None,
                        help="aggregate bytes/s of the store, read + write (optional)")
    args = parser.parse_args(argv)
    jobs = {"370 GB": (10000, 10000, 500), "100 TB": (100_000, 100_000, 1250)}
    chunks = (255, 255, 255)  # dask's auto chunks for these float64 shapes (128 MiB)
    if args.tiny:
        jobs, chunks = {"tiny": (400, 300, 200)}, (50, 50, 50)
    rows = []
    for label, shape in jobs.items():
        plan = seed_plan(shape, chunks, 50, 4, "24GiB")
        desc = plan.describe()
        sim = plan.simulate(workers=50, threads_per_worker=4, worker_memory="24GiB",
                            throughput=args.throughput, store_bandwidth=args.store_bandwidth)
        print(f"== {label}: {shape} float64, chunks {chunks}")
        print(desc)
        print(sim)
        g = graph_figures(plan)
        row = {"job": label, "shape": shape, "nbytes": desc["bytes_read"] // len(desc["stages"]),
               "stages": len(desc["stages"]), "tasks": desc["ntasks"], "blocks": desc["nblocks"],
               "peak_task_gib": desc["peak_task_memory"] / GiB,
               "peak_worker_gib": sim["peak_worker_memory"] / GiB, "fits": sim["fits"],
               "wall_s": sim["wall_seconds"], "throughput": args.throughput, **g}
        print(f"   graph: {g['graph_tasks']} tasks; lazy build {g['build_s']:.3f} s, "
              f"{g['build_mb']:.1f} MB; materialized {g['materialize_s']:.2f} s, "
              f"{g['materialize_mb']:.0f} MB")
        rows.append(row)
    print("\n| job | stages | tasks (blocks) | per task GiB | per worker GiB (24) | est. wall s | "
          "graph tasks | lazy build s / MB | materialized s / MB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['job']} | {r['stages']} | {r['tasks']} ({r['blocks']}) | "
              f"{r['peak_task_gib']:.2f} | {r['peak_worker_gib']:.2f} | {r['wall_s']:.0f} | "
              f"{r['graph_tasks']} | {r['build_s']:.3f} / {r['build_mb']:.1f} | "
              f"{r['materialize_s']:.2f} / {r['materialize_mb']:.0f} |")
    first = rows[0]
    ok = first["build_s"] < BUDGET_SECONDS and first["build_mb"] * 1e6 < BUDGET_BYTES and \
        first["materialize_s"] < BUDGET_SECONDS and first["materialize_mb"] * 1e6 < BUDGET_BYTES
    print(f"\nbudget at {first['job']} (build and materialize < {BUDGET_SECONDS:.0f} s and "
          f"< 1 GB): {'met' if ok else 'MISSED'}")
    OUT.mkdir(exist_ok=True)
    (OUT / "bench_cluster.json").write_text(json.dumps(rows, indent=2, default=str))
    return rows


if __name__ == "__main__":
    main()
