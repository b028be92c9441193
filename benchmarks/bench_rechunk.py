"""Rechunk, transpose-and-rewrite and to_store on a LocalCluster, side by side with the peers.

    python -m benchmarks.bench_rechunk            # issue sizes: 4 GiB arrays
    python -m benchmarks.bench_rechunk --tiny     # seconds, for CI
    python -m benchmarks.bench_rechunk --gib 16 --cases rechunk,to_store --methods chunkstore
    python -m benchmarks.bench_rechunk --gib 0.25 --transpose-side 400 --max-mem 64MB
    python -m benchmarks.bench_rechunk --gib 0.25 --transpose-side 400 \
        --methods chunkstore-s3,dask-tasks-s3,chunkstore-s3-20ms,dask-tasks-s3-20ms
    python -m benchmarks.bench_rechunk --beyond-memory 4,32   # 32 GiB: chunkstore only

Cases (issues 6 and 13): (1) rechunk a (32768, 32768) float32 array, blosc-lz4, from
(32768, 32) chunks to (32, 32768) with max_mem=512 MB; (2) transpose-and-rewrite a
1024^3 float32 array chunked (1024, 1024, 16); (3) ``to_store`` of a generated float64
dask array (``--gib`` scales the rechunk and to_store arrays, e.g. 16 GiB: more than the
cluster's memory). Methods: chunkstore, dask + zarr-python (rechunk method "tasks" and
"p2p"), rechunker 0.5 (zarr-python 2.18) and cubed (the newest the package registry has;
processes executor, allowed_mem = max_mem), each of these two from a virtual environment
of its own that the first full-size run creates under bench-out/ (``--tiny`` never
does: the peer is skipped while its environment does not exist; rechunker's nanny never
kills a worker, so a peak above the bound is measured and marked, not a KilledWorker);
chunkstore on a cluster started from the dask CLI with its arrays on moto's S3 server
(``chunkstore-cli-s3``: benchmarks/rechunk_cli.py); chunkstore, dask-tasks and dask-p2p
with source, intermediate and target on moto's S3 server (``<method>-s3``, and
``<method>-s3-20ms`` with 20 ms added to every request on the server's side:
benchmarks/rechunk_s3.py); and ``limit``, the machine's limit: the same bytes decoded,
encoded and written once per stage of chunkstore's plan by plain numcodecs and file
writes on the same 2 x 1 slots (benchmarks/rechunk_limit.py); the table shows each row's
fraction of it. Arrays are Zarr v2 so that every method reads the same source. ``--gib``
below 4 and ``--transpose-side`` give smaller arrays, ``--max-mem`` another memory budget.
``--beyond-memory 4,32`` runs, instead, the rechunk and transpose of arrays of those
sizes in GiB (32: more than the machine's 24 GiB), chunkstore only (dask, rechunker and
cubed would take hours at 32 GiB on 2 x 1 slots), with the time per GiB against the
smallest size (benchmarks/rechunk_beyond.py).

Each run gets a fresh LocalCluster(2 workers x 1 thread, memory_limit = max_mem + 500 MB),
or the same from the dask CLI; every worker process's RSS is sampled separately every 0.1 s from outside (psutil, the
figure dask's nanny acts on) and the worker/nanny logs are searched for pause, spill and
restart events. For chunkstore the table shows the plan's own per-worker prediction
(``describe()["peak_worker_memory"]``: baseline + threads x modelled task memory) beside
the measured peak. The machine's 1-minute load average before and after each run is
recorded beside its wall and worker CPU times (on a shared machine, wall time follows
the share of CPU a method gets; CPU seconds much less). How a run is measured and the
table printed: benchmarks/rechunk_measure.py; the peers: benchmarks/rechunk_peers.py.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import json
import math
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.rechunk_beyond import big_cases, print_scaling
from benchmarks.rechunk_cli import METHOD as CLI_METHOD
from benchmarks.rechunk_cli import CliCluster, run_cli
from benchmarks.rechunk_limit import METHOD as LIMIT_METHOD
from benchmarks.rechunk_limit import plan_stages, run_limit
from benchmarks.rechunk_measure import (
    BOUND_EXTRA,
    HEADROOM,
    MB,
    OUT,
    RssSampler,  # noqa: F401  (benchmarks.s3_endpoint and bench_cache import it from here)
    check,
    check_generated,
    dir_bytes,
    format_row,
    generated,
    in_child,
    make_source,
    print_table,
    run_on_cluster,
)
from benchmarks.rechunk_peers import dask_to_zarr, dask_zarr_rechunk, run_cubed, run_rechunker
from benchmarks.rechunk_s3 import METHODS as S3_METHODS
from benchmarks.rechunk_s3 import parse as parse_s3
from benchmarks.rechunk_s3 import run_s3

#: every row of the issue's cases: the limit, chunkstore, the peers, and the same on S3
DEFAULT_METHODS = (LIMIT_METHOD, "chunkstore", "dask-tasks", "dask-p2p", "rechunker", "cubed",
                   CLI_METHOD, *S3_METHODS)


def chunkstore_rechunk(src: Path | str, dst: Path | str, target: tuple, max_mem: int,
                       axes: tuple[int, ...] | None = None,
                       storage_options: dict | None = None) -> dict:
    """chunkstore's rechunk (a transpose with ``axes``) on the default client; the plan's
    figures (tasks, stages, per-task and per-worker memory, decoded bytes)."""
    import chunkstore as cs
    import chunkstore.dask as csd
    source = cs.open_array(str(src), mode="r", storage_options=storage_options)
    if axes is not None:
        source = csd.TransposedSource(source, axes)
    options = {"storage_options": storage_options} if storage_options else {}
    plan = csd.rechunk(source, target, str(dst), max_mem=max_mem, **options)
    desc = plan.describe()
    print(desc, flush=True)
    plan.execute()
    return {"tasks": desc["ntasks"], "stages": len(desc["stages"]),
            "planned_task_mb": desc["peak_task_memory"] / MB,
            "predicted_worker_mb": desc["peak_worker_memory"] / MB,
            "decoded_read_mb": desc["bytes_read"] / MB,
            "decoded_written_mb": desc["bytes_written"] / MB}


def chunkstore_to_store(dst: Path, shape: tuple, chunks: tuple, max_mem: int) -> dict:
    """chunkstore's ``to_store`` of a generated array; the modelled task and worker memory."""
    from distributed import default_client

    import chunkstore as cs
    import chunkstore.dask as csd
    from chunkstore.dask.io import store_task_memory
    from chunkstore.dask.memory import Workers
    x = generated(shape, chunks)
    target = cs.create_array(str(dst), shape=shape, dtype=x.dtype, chunks=chunks,
                             zarr_format=2)
    workers = Workers.of_client(default_client())
    task = store_task_memory(x, target, workers.codec_threads)
    csd.to_store(x, target, max_mem=max_mem)
    return {"tasks": x.npartitions, "planned_task_mb": task / MB,
            "predicted_worker_mb": workers.worker_memory(task) / MB}


def cases_for(tiny: bool, gib: float, transpose_side: int = 1024,
              max_mem: int = 512_000_000) -> dict:
    """case -> (shape, chunks, target chunks, axes, max_mem). The rechunk array is
    (side, side) float32 with ``gib`` GiB (a multiple of 32768 from 4 GiB up, of 1024
    below), the transpose array ``transpose_side``^3 float32."""
    if tiny:  # the full size's chunking, (side, 32) -> (32, side), in 2 stages: few objects
        return {"rechunk": ((1024, 1024), (1024, 32), (32, 1024), None, 2_000_000),
                "transpose": ((64, 64, 64), (64, 64, 4), (4, 64, 64), (2, 1, 0), 2_000_000),
                "to_store": ((512, 512), (64, 512), None, None, 2_000_000)}
    exact = math.sqrt(gib * 2**30 / 4)
    side = (int(round(exact / 32768)) * 32768 if gib >= 4
            else max(1024, int(round(exact / 1024)) * 1024))
    rows64 = max(2048, int(gib * 2**30 / 8 / 8192))
    n = transpose_side
    return {"rechunk": ((side, side), (side, 32), (32, side), None, max_mem),
            "transpose": ((n, n, n), (n, n, 16), (16, n, n), (2, 1, 0), max_mem),
            # float64 blocks of 2048 x 8192 (128 MiB), chunks of the same shape
            "to_store": ((rows64, 8192), (2048, 8192), None, None, max_mem)}


def main(argv: list[str] | None = None) -> list[dict]:
    """Run the cases with the methods, print each row and the table; the rows (also
    written to bench-out/bench_rechunk.json)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="small arrays (CI)")
    parser.add_argument("--gib", type=float, default=4.0,
                        help="size of the rechunk and to_store arrays (GiB)")
    parser.add_argument("--transpose-side", type=int, default=1024,
                        help="the transpose array is side^3 float32")
    parser.add_argument("--max-mem", default="512MB", help="max_mem of every method")
    parser.add_argument("--cases", default="rechunk,transpose")
    parser.add_argument("--methods", default=None,
                        help=f"default: {','.join(DEFAULT_METHODS)} (with --tiny: without "
                        "the -s3 ones; with --beyond-memory: chunkstore)")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--in-process", action="store_true",
                        help="run each method in this process, not in a child that is "
                        "killed when it hangs (the test suite's smoke runs: one interpreter "
                        "start fewer per run)")
    parser.add_argument("--scheduler", default=None, metavar="ADDRESS",
                        help="run the LocalCluster rows (local and S3) on the running "
                        "cluster at ADDRESS instead of a fresh LocalCluster each (the test "
                        "suite's smoke runs: one cluster start for all rows; its workers are "
                        "warm, which hides memory: not for measurements)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="runs per method, the methods interleaved; the median is kept")
    parser.add_argument("--beyond-memory", default=None, metavar="GIB,GIB",
                        help="instead of the cases above: rechunk and transpose of arrays of "
                        "these sizes (4 GiB x a power of two, e.g. 4,32: more than the "
                        "machine's memory), chunkstore only by default (the peers would take "
                        "hours), with the time per GiB against the smallest size "
                        "(benchmarks/rechunk_beyond.py)")
    args = parser.parse_args(argv)
    OUT.mkdir(exist_ok=True)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-rechunk-"))
    work.mkdir(parents=True, exist_ok=True)
    from chunkstore.sizes import parse_bytes
    max_mem = parse_bytes(args.max_mem)
    names = args.cases.split(",")
    if args.beyond_memory:
        methods = (args.methods or "chunkstore").split(",")
        runs_of = [(f"{case}-{gib:g}GiB", case, big_cases(gib, max_mem)[case], gib)
                   for gib in map(float, args.beyond_memory.split(",")) for case in names
                   if case != "to_store"]
    else:
        # --tiny's default leaves out the S3 servers (each run starts one: tens of
        # seconds; their own smoke test runs them)
        methods = (args.methods.split(",") if args.methods else
                   [m for m in DEFAULT_METHODS if not (args.tiny and m in S3_METHODS)])
        cases = cases_for(args.tiny, args.gib, args.transpose_side, max_mem)
        runs_of = [(case, case, cases[case], None) for case in names]
    results = []
    budgets = {budget for _, _, (*_, budget), _ in runs_of}
    with contextlib.ExitStack() as stack:
        # --in-process (the smoke runs): one CLI cluster for the CLI rows of every case
        # (a fresh one per row otherwise), when the cases have the same budget
        cli = (stack.enter_context(CliCluster(work, memory_limit=budgets.pop() + HEADROOM))
               if args.in_process and CLI_METHOD in methods and len(budgets) == 1 else None)
        for label, case, (shape, chunks, target, axes, budget), gib in runs_of:
            src = work / f"{label}-src.zarr"
            if case != "to_store" and not (src / ".zarray").exists():
                make_source(src, shape, chunks, compressible=gib is not None)
            nbytes = int(np.prod(shape)) * (8 if case == "to_store" else 4)
            runs: dict[str, list[dict]] = {}
            for _ in range(max(1, args.repeats)):  # methods interleaved: none always runs first
                for method in methods:
                    row = one_run(case, method, src, work, shape, chunks, target, axes, budget,
                                  nbytes, args.tiny, args.in_process, args.scheduler, cli)
                    if row is not None:
                        if gib is not None:
                            row.update(case=label, base_case=case, gib=gib)
                        runs.setdefault(method, []).append(row)
                        print(format_row(row), flush=True)
            results += [median_run(rows) for rows in runs.values()]
            (OUT / "bench_rechunk.json").write_text(json.dumps(results, indent=2))
            if not args.workdir:
                shutil.rmtree(src, ignore_errors=True)
    (OUT / "bench_rechunk.json").write_text(json.dumps(results, indent=2))
    print_table(results)
    print_scaling(results)
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return results


def one_run(case, method, src, work, shape, chunks, target, axes, max_mem, nbytes,
            tiny=False, in_process=False, scheduler=None, cli=None) -> dict | None:
    """One measured run of ``method`` on ``case``, checked; its target removed after
    (``tiny``: no pause before it, and no peer environment is created; ``in_process``:
    not in a child process; ``scheduler``: the address of a running cluster for the
    LocalCluster rows, see ``run_on_cluster``; ``cli``: a running ``CliCluster`` for the
    CLI row, with ``in_process``)."""
    dst = work / f"{case}-{method}.zarr"
    shutil.rmtree(dst, ignore_errors=True)
    settle(0.0 if tiny else 3.0)
    # in a child process that is killed if it hangs: one stuck peer never stops the run
    # (by its module's name: pickled from ``python -m`` it would be ``__main__``'s)
    here = importlib.import_module("benchmarks.bench_rechunk")
    run = functools.partial(here.run_method, case, method, src, dst, work, shape, chunks,
                            target, axes, max_mem, tiny, scheduler, cli)
    row = run() if in_process else in_child(run)
    if row is None:
        return None
    if "error" in row:
        print(f"{case} {method} failed: {row['error']}", flush=True)
        correct = False
        row.setdefault("wall_s", math.nan)  # the row is printed, marked failed
        row.setdefault("peak_rss_mb", [])
    elif "correct" in row:  # checked where the result is (e.g. on S3)
        correct = row["correct"]
    elif case == "to_store":
        correct = check_generated(dst, shape, chunks)
    else:
        correct = check(src, dst, axes)
    row.setdefault("target_stored_mb", dir_bytes(dst) / MB)
    row.update(case=case, method=method, nbytes_mb=nbytes / MB, max_mem_mb=max_mem / MB,
               correct=correct, bound_mb=(max_mem + BOUND_EXTRA) / MB)
    if case != "to_store":
        row["source_stored_mb"] = dir_bytes(src) / MB
    shutil.rmtree(dst, ignore_errors=True)
    return row


def median_run(rows: list[dict]) -> dict:
    """The run of median wall time, with every run's wall (``runs_s``), the highest peak
    per worker of all runs, and correct only if every run was."""
    ordered = sorted(rows, key=lambda r: r["wall_s"])
    row = dict(ordered[(len(ordered) - 1) // 2])
    row["runs_s"] = [r["wall_s"] for r in ordered]
    peaks = [r.get("peak_rss_mb") or [] for r in rows]
    if all(len(p) == len(peaks[0]) for p in peaks):
        row["peak_rss_mb"] = [max(v) for v in zip(*peaks, strict=True)]
    row["memory_events"] = [e for r in rows for e in r.get("memory_events") or []]
    row["correct"] = all(r.get("correct") for r in rows)
    return row


def settle(seconds: float = 3.0) -> None:
    """Before a method runs: the gigabytes the previous one wrote are flushed (the
    kernel's writeback would otherwise take CPU from the next method) and the load
    it left decays a little."""
    os.sync()
    time.sleep(seconds)


def run_method(case, method, src, dst, work, shape, chunks, target, axes, max_mem,
               tiny=False, scheduler=None, cli=None) -> dict | None:
    """One run of ``method`` on ``case`` (None: the method does not do this case, or it
    is a peer whose environment does not exist and ``tiny`` forbids making it);
    ``scheduler``: see ``run_on_cluster``; ``cli``: see ``run_cli``."""
    on_cluster = functools.partial(run_on_cluster, scheduler=scheduler)
    if case == "to_store":
        if method == "chunkstore":
            return on_cluster(functools.partial(chunkstore_to_store, dst, shape, chunks,
                                                    max_mem), max_mem)
        if method == "dask-tasks":  # dask's own to_zarr (no rechunk involved)
            return on_cluster(functools.partial(dask_to_zarr, dst, shape, chunks), max_mem)
        return None
    if method == "chunkstore":
        return on_cluster(
            functools.partial(chunkstore_rechunk, src, dst, target, max_mem, axes), max_mem)
    if method == CLI_METHOD:
        return run_cli(case, src, target, axes, max_mem, work, cli)
    if parse_s3(method) is not None:
        return run_s3(case, method, src, target, axes, max_mem, work, scheduler)
    if method == LIMIT_METHOD:
        return run_limit(src, work, plan_stages(src, target, max_mem, axes))
    if method.startswith("dask-"):
        return on_cluster(
            functools.partial(dask_zarr_rechunk, src, dst, target, method[5:], axes), max_mem)
    if method == "rechunker" and axes is None:
        row = run_rechunker(src, dst, work / "rechunker-tmp.zarr", target, max_mem,
                            create_env=not tiny)
        shutil.rmtree(work / "rechunker-tmp.zarr", ignore_errors=True)
        return row
    if method == "cubed":
        cubed_work = work / "cubed-work"
        row = run_cubed(src, dst, cubed_work, target, max_mem, axes, create_env=not tiny)
        shutil.rmtree(cubed_work, ignore_errors=True)
        return row
    return None


if __name__ == "__main__":
    main()
