"""Rechunk, transpose-and-rewrite and to_store on a LocalCluster, side by side with the peers.

    python -m benchmarks.bench_rechunk            # issue sizes: 4 GiB arrays
    python -m benchmarks.bench_rechunk --tiny     # seconds, for CI
    python -m benchmarks.bench_rechunk --gib 16 --cases rechunk,to_store --methods chunkstore

Cases (issues 6 and 13): (1) rechunk a (32768, 32768) float32 array, blosc-lz4, from
(32768, 32) chunks to (32, 32768) with max_mem=512 MB; (2) transpose-and-rewrite a
1024^3 float32 array chunked (1024, 1024, 16); (3) ``to_store`` of a generated float64
dask array (``--gib`` scales the rechunk and to_store arrays, e.g. 16 GiB: more than the
cluster's memory). Methods: chunkstore, dask + zarr-python (rechunk method "tasks" and
"p2p"), rechunker 0.5 (needs zarr-python 2.18: it runs from a virtual environment this
script creates under bench-out/) and cubed (if installed; processes executor,
allowed_mem = max_mem). Arrays are Zarr v2 so that every method reads the same source.

Each run gets a fresh LocalCluster(2 workers x 1 thread, memory_limit = max_mem + 500 MB);
every worker process's RSS is sampled separately every 0.1 s from outside (psutil, the
figure dask's nanny acts on) and the worker/nanny logs are searched for pause, spill and
restart events. For chunkstore the table shows the plan's own per-worker prediction
(``describe()["peak_worker_memory"]``: baseline + threads x modelled task memory) beside
the measured peak. The machine's 1-minute load average before and after each run is
recorded beside its wall and worker CPU times (on a shared machine, wall time follows
the share of CPU a method gets; CPU seconds much less).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np
import psutil

OUT = Path("bench-out")
MB = 1e6
MiB = 2**20
INTERVAL = 0.1
HEADROOM = 500 * 10**6  # memory_limit = max_mem + HEADROOM (issue 13)
BOUND_EXTRA = 200 * 10**6  # per-worker peak must stay <= max_mem + BOUND_EXTRA


class RssSampler:
    """Samples the RSS of each pid every ``interval`` seconds (each process separately);
    with ``children_of``, also every child process of that pid (cubed's pool)."""

    def __init__(self, pids: list[int], interval: float = INTERVAL,
                 children_of: int | None = None) -> None:
        self.procs = {pid: psutil.Process(pid) for pid in pids}
        self.peaks = dict.fromkeys(pids, 0)
        self.cpu = dict.fromkeys(pids, 0.0)  # user + system seconds, last seen
        self.children_of = children_of
        self.interval, self._stop = interval, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.children_of is not None:
                try:
                    for child in psutil.Process(self.children_of).children(recursive=True):
                        if child.pid not in self.procs:
                            self.procs[child.pid] = child
                            self.peaks[child.pid] = 0
                            self.cpu[child.pid] = 0.0
                except psutil.Error:
                    pass
            for pid, proc in list(self.procs.items()):
                try:
                    self.peaks[pid] = max(self.peaks[pid], proc.memory_info().rss)
                    times = proc.cpu_times()
                    self.cpu[pid] = times.user + times.system
                except psutil.Error:
                    pass
            self._stop.wait(self.interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def make_source(path: Path, shape: tuple[int, ...], chunks: tuple[int, ...]) -> None:
    import chunkstore as cs
    a = cs.create_array(str(path), shape=shape, chunks=chunks, dtype="f4", zarr_format=2,
                        overwrite=True)
    rng = np.random.default_rng(0)
    # chunk-aligned slabs of <= 256 MiB along the axis with the most chunks
    axis = max(range(len(shape)), key=lambda ax: -(-shape[ax] // chunks[ax]))
    slab_bytes = int(np.prod(shape)) * 4 // shape[axis]  # one index along ``axis``
    step = max(chunks[axis], (256 * 2**20) // slab_bytes // chunks[axis] * chunks[axis])
    for start in range(0, shape[axis], step):
        stop = min(shape[axis], start + step)
        region = tuple(slice(start, stop) if ax == axis else slice(None)
                       for ax in range(len(shape)))
        block = [stop - start if ax == axis else n for ax, n in enumerate(shape)]
        a[region] = rng.standard_normal(block, dtype="f4")


def run_on_cluster(fn, max_mem: int) -> dict:
    """``fn()`` on a fresh LocalCluster(2 x 1 thread, memory_limit = max_mem + 500 MB),
    sampling each worker's RSS; memory events of the worker and nanny logs are listed."""
    from distributed import Client, LocalCluster

    from chunkstore.dask.memory import WorkerMemory
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      memory_limit=max_mem + HEADROOM, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        client.run(lambda: __import__("chunkstore.dask"))  # the same baseline for all methods
        pids = list(client.run(os.getpid).values())
        cpu0 = _cpu_seconds(pids)
        load0 = os.getloadavg()[0]
        with WorkerMemory(client, interval=INTERVAL) as mem:
            try:
                extra = fn() or {}
            except Exception as e:  # noqa: BLE001  (a peer that fails is a result too)
                extra = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
        return {"wall_s": mem.wall, "cpu_s": _cpu_seconds(pids) - cpu0,
                "peak_rss_mb": [p / MB for p in mem.peaks.values()],
                "baseline_mb": [b / MB for b in mem.baselines.values()],
                "memory_events": mem.events, "load_avg": [load0, os.getloadavg()[0]],
                **extra}


def _cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of the processes, summed (a figure less sensitive than
    wall time to other work on a shared machine)."""
    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def chunkstore_rechunk(src: Path, dst: Path, target: tuple, max_mem: int, axes=None) -> dict:
    import chunkstore as cs
    import chunkstore.dask as csd
    source = cs.open_array(str(src), mode="r")
    if axes is not None:
        source = csd.TransposedSource(source, axes)
    plan = csd.rechunk(source, target, str(dst), max_mem=max_mem)
    desc = plan.describe()
    print(desc, flush=True)
    plan.execute()
    return {"tasks": desc["ntasks"], "stages": len(desc["stages"]),
            "planned_task_mb": desc["peak_task_memory"] / MB,
            "predicted_worker_mb": desc["peak_worker_memory"] / MB,
            "decoded_read_mb": desc["bytes_read"] / MB,
            "decoded_written_mb": desc["bytes_written"] / MB}


def generated(shape: tuple[int, ...], chunks: tuple[int, ...]):
    """A float64 dask array of random numbers, made block by block (never in memory)."""
    import dask.array as da
    return da.random.default_rng(0).random(shape, chunks=chunks)


def chunkstore_to_store(dst: Path, shape: tuple, chunks: tuple, max_mem: int) -> dict:
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


def dask_to_zarr(dst: Path, shape: tuple, chunks: tuple) -> dict:
    generated(shape, chunks).to_zarr(str(dst), overwrite=True, zarr_format=2)
    return {}


def dask_zarr_rechunk(src: Path, dst: Path, target: tuple, method: str, axes=None) -> dict:
    import dask
    import dask.array as da
    with dask.config.set({"array.rechunk.method": method}):
        x = da.from_zarr(str(src))
        if axes is not None:
            x = x.transpose(axes)
        x.rechunk(target).to_zarr(str(dst), overwrite=True, zarr_format=2)
    return {}


RECHUNKER_SCRIPT = r'''
import json, os, sys, threading, time, psutil, zarr
from distributed import Client, LocalCluster
from rechunker import rechunk
src, dst, tmp, target, max_mem, limit = sys.argv[1:7]
target = tuple(json.loads(target))
if __name__ == "__main__":
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=int(limit),
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        pids = list(client.run(os.getpid).values())
        peaks = {p: 0 for p in pids}
        stop = threading.Event()
        def sample():
            procs = [psutil.Process(p) for p in pids]
            while not stop.is_set():
                for p in procs:
                    try: peaks[p.pid] = max(peaks[p.pid], p.memory_info().rss)
                    except psutil.Error: pass
                stop.wait(0.1)
        t = threading.Thread(target=sample, daemon=True); t.start()
        t0 = time.perf_counter()
        plan = rechunk(zarr.open(src, mode="r"), target, int(max_mem), dst, temp_store=tmp)
        plan.execute()
        wall = time.perf_counter() - t0
        stop.set(); t.join()
        events = [m for lines in client.get_worker_logs().values() for _, m in lines
                  if any(w in m.lower() for w in ("pausing", "spill", "restarting"))]
    print(json.dumps({"wall_s": wall, "peak_rss_mb": [v / 1e6 for v in peaks.values()],
                      "memory_events": events}))
'''


def rechunker_env() -> Path | None:
    """A virtual environment with rechunker 0.5 and zarr 2.18 (created once)."""
    env = OUT / "rechunker-venv"
    python = env / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
        pins = ["rechunker==0.5.*", "zarr==2.18.*", "numcodecs<0.16", "dask[array]",
                "distributed", "psutil"]
        done = subprocess.run([str(python), "-m", "pip", "install", "-q", *pins],
                              capture_output=True, text=True)
        if done.returncode:
            print("rechunker environment could not be built:", done.stderr[-500:])
            shutil.rmtree(env, ignore_errors=True)
            return None
    return python


def run_rechunker(src: Path, dst: Path, tmp: Path, target: tuple, max_mem: int) -> dict | None:
    python = rechunker_env()
    if python is None:
        return None
    done = subprocess.run([str(python), "-c", RECHUNKER_SCRIPT, str(src), str(dst), str(tmp),
                           json.dumps(list(target)), str(max_mem), str(max_mem + HEADROOM)],
                          capture_output=True, text=True)
    if done.returncode:
        print("rechunker failed:", done.stderr[-800:])
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


CUBED_SCRIPT = r'''
import json, sys, time
import cubed, cubed.array_api as xp
src, dst, work, target, axes, max_mem = sys.argv[1:7]
target, axes = tuple(json.loads(target)), json.loads(axes)
if __name__ == "__main__":
    spec = cubed.Spec(work_dir=work, allowed_mem=int(max_mem), executor_name="processes",
                      executor_options={"max_workers": 2})
    t0 = time.perf_counter()
    a = cubed.from_zarr(src, spec=spec)
    b = xp.permute_dims(a, tuple(axes)).rechunk(target) if axes else a.rechunk(target)
    cubed.to_zarr(b, dst)
    print(json.dumps({"wall_s": time.perf_counter() - t0}))
'''


def run_cubed(src: Path, dst: Path, work: Path, target: tuple, max_mem: int, axes) -> dict | None:
    """cubed in a child process (processes executor, 2 workers, allowed_mem = max_mem);
    each of its worker processes is sampled separately."""
    try:
        import cubed  # noqa: F401
    except ImportError:
        return None
    proc = subprocess.Popen([sys.executable, "-c", CUBED_SCRIPT, str(src), str(dst), str(work),
                             json.dumps(list(target)), json.dumps(list(axes or [])),
                             str(max_mem)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    load0 = os.getloadavg()[0]
    with RssSampler([], children_of=proc.pid) as sampler:
        out, err = proc.communicate()
    if proc.returncode:
        print("cubed failed:", err[-800:])
        return None
    row = json.loads(out.strip().splitlines()[-1])
    # the executor's pool processes (the largest two: 2 workers); the driver is the client
    peaks = sorted(sampler.peaks.values(), reverse=True)[:2]
    row["peak_rss_mb"] = [p / MB for p in peaks]
    row["cpu_s"] = sum(sampler.cpu.values())  # the driver and its pool processes
    row["memory_events"] = []
    row["load_avg"] = [load0, os.getloadavg()[0]]
    return row


def check(src: Path, dst: Path, axes=None) -> bool:
    """The result equals the (transposed) source, compared in slabs of whole source chunks
    along the source's most finely chunked axis (each chunk decoded once)."""
    import chunkstore as cs
    a, b = cs.open_array(str(src), mode="r"), cs.open_array(str(dst), mode="r")
    axis = min(range(a.ndim), key=lambda d: a.chunks[d] / a.shape[d])
    step = a.chunks[axis] * max(1, (256 * 2**20) // max(1, a.nbytes // a.shape[axis]
                                                         * a.chunks[axis]))
    perm = axes if axes is not None else tuple(range(a.ndim))
    for start in range(0, a.shape[axis], step):
        region = [slice(None)] * a.ndim
        region[axis] = slice(start, start + step)
        part = a[tuple(region)]
        out_region = [slice(None)] * a.ndim
        out_region[perm.index(axis)] = slice(start, start + step)
        if not np.array_equal(part.transpose(perm), b[tuple(out_region)]):
            return False
    return True


def check_generated(dst: Path, shape: tuple, chunks: tuple) -> bool:
    """Spot-check a written generated array against the generator (first and last block)."""
    import chunkstore as cs
    b = cs.open_array(str(dst), mode="r")
    x = generated(shape, chunks)
    for idx in ((0,) * len(shape), tuple(n - 1 for n in x.numblocks)):
        region = tuple(slice(sum(c[:i]), sum(c[:i + 1])) for c, i in zip(x.chunks, idx,
                                                                          strict=True))
        if not np.array_equal(x.blocks[idx].compute(scheduler="sync"), b[region]):
            return False
    return True


def cases_for(tiny: bool, gib: float) -> dict:
    if tiny:
        return {"rechunk": ((1024, 1024), (1024, 8), (8, 1024), None, 2_000_000),
                "transpose": ((64, 64, 64), (64, 64, 4), (4, 64, 64), (2, 1, 0), 2_000_000),
                "to_store": ((512, 512), (64, 512), None, None, 2_000_000)}
    side = int(round(math.sqrt(gib * 2**30 / 4) / 32768)) * 32768 or 32768
    rows64 = int(gib * 2**30 / 8 / 8192)
    return {"rechunk": ((side, side), (side, 32), (32, side), None, 512_000_000),
            "transpose": ((1024, 1024, 1024), (1024, 1024, 16), (16, 1024, 1024), (2, 1, 0),
                          512_000_000),
            # float64 blocks of 2048 x 8192 (128 MiB), chunks of the same shape
            "to_store": ((rows64, 8192), (2048, 8192), None, None, 512_000_000)}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="small arrays (CI)")
    parser.add_argument("--gib", type=float, default=4.0,
                        help="size of the rechunk and to_store arrays (GiB)")
    parser.add_argument("--cases", default="rechunk,transpose")
    parser.add_argument("--methods", default="chunkstore,dask-tasks,dask-p2p,rechunker,cubed")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args(argv)
    OUT.mkdir(exist_ok=True)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-rechunk-"))
    work.mkdir(parents=True, exist_ok=True)
    cases = cases_for(args.tiny, args.gib)
    results = []
    for case in args.cases.split(","):
        shape, chunks, target, axes, max_mem = cases[case]
        src = work / f"{case}-src.zarr"
        if case != "to_store" and not (src / ".zarray").exists():
            make_source(src, shape, chunks)
        nbytes = int(np.prod(shape)) * (8 if case == "to_store" else 4)
        for method in args.methods.split(","):
            dst = work / f"{case}-{method}.zarr"
            shutil.rmtree(dst, ignore_errors=True)
            row = run_method(case, method, src, dst, work, shape, chunks, target, axes,
                             max_mem)
            if row is None:
                continue
            if "error" in row:
                print(f"{case} {method} failed: {row['error']}", flush=True)
                correct = False
            elif case == "to_store":
                correct = check_generated(dst, shape, chunks)
            else:
                correct = check(src, dst, axes)
            row.update(case=case, method=method, nbytes_mb=nbytes / MB, max_mem_mb=max_mem / MB,
                       target_stored_mb=dir_bytes(dst) / MB, correct=correct)
            if case != "to_store":
                row["source_stored_mb"] = dir_bytes(src) / MB
            row["bound_mb"] = (max_mem + BOUND_EXTRA) / MB
            results.append(row)
            print(format_row(row), flush=True)
            shutil.rmtree(dst, ignore_errors=True)
            (OUT / "bench_rechunk.json").write_text(json.dumps(results, indent=2))
        if not args.workdir:
            shutil.rmtree(src, ignore_errors=True)
    (OUT / "bench_rechunk.json").write_text(json.dumps(results, indent=2))
    print_table(results)
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return results


def run_method(case, method, src, dst, work, shape, chunks, target, axes, max_mem) -> dict | None:
    if case == "to_store":
        if method == "chunkstore":
            return run_on_cluster(functools.partial(chunkstore_to_store, dst, shape, chunks,
                                                    max_mem), max_mem)
        if method == "dask-tasks":  # dask's own to_zarr (no rechunk involved)
            return run_on_cluster(functools.partial(dask_to_zarr, dst, shape, chunks), max_mem)
        return None
    if method == "chunkstore":
        return run_on_cluster(
            functools.partial(chunkstore_rechunk, src, dst, target, max_mem, axes), max_mem)
    if method.startswith("dask-"):
        return run_on_cluster(
            functools.partial(dask_zarr_rechunk, src, dst, target, method[5:], axes), max_mem)
    if method == "rechunker" and axes is None:
        row = run_rechunker(src, dst, work / "rechunker-tmp.zarr", target, max_mem)
        shutil.rmtree(work / "rechunker-tmp.zarr", ignore_errors=True)
        return row
    if method == "cubed":
        cubed_work = work / "cubed-work"
        row = run_cubed(src, dst, cubed_work, target, max_mem, axes)
        shutil.rmtree(cubed_work, ignore_errors=True)
        return row
    return None


def format_row(r: dict) -> str:
    peaks = "/".join(f"{p / MiB * MB:.0f}" for p in r["peak_rss_mb"])
    pred = (f", predicted {r['predicted_worker_mb'] / MiB * MB:.0f} MiB"
            if "predicted_worker_mb" in r else "")
    events = f", {len(r.get('memory_events', []))} memory events"
    cpu = f" (cpu {r['cpu_s']:.0f} s)" if "cpu_s" in r else ""
    load = f", load {r['load_avg'][0]:.1f}-{r['load_avg'][1]:.1f}" if "load_avg" in r else ""
    return (f"{r['case']:<9} {r['method']:<11} {r['wall_s']:7.1f} s{cpu}{load}  peak RSS per "
            "worker "
            f"{peaks} MiB{pred} (bound {r['bound_mb'] / MiB * MB:.0f} MiB){events}  "
            f"correct={r['correct']}")


def print_table(results: list[dict]) -> None:
    print("\n| case | method | wall s | worker CPU s | load avg | peak RSS per worker MiB | "
          "plan's prediction MiB | measured / predicted | <= max_mem + 200 MB | memory events "
          "| correct |")
    # correct=False with an error: the method failed (e.g. dask killed its workers)
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        peaks = " / ".join(f"{p * MB / MiB:.0f}" for p in r["peak_rss_mb"])
        ok = all(p <= r["bound_mb"] for p in r["peak_rss_mb"])
        pred = r.get("predicted_worker_mb")
        ratio = f"{max(r['peak_rss_mb']) / pred:.2f}" if pred else "-"
        pred_s = f"{pred * MB / MiB:.0f}" if pred else "-"
        cpu = f"{r['cpu_s']:.0f}" if "cpu_s" in r else "-"
        load = "-".join(f"{v:.1f}" for v in r.get("load_avg", [])) or "-"
        print(f"| {r['case']} | {r['method']} | {r['wall_s']:.1f} | {cpu} | {load} | {peaks} | "
              f"{pred_s} | "
              f"{ratio} | {ok} | {len(r.get('memory_events', []))} | {r['correct']} |")
    for case in sorted({r["case"] for r in results}):
        rows = {r["method"]: r for r in results if r["case"] == case}
        if "chunkstore" in rows:
            cs_row = rows["chunkstore"]
            print(f"\n{case}:")
            if "decoded_read_mb" in cs_row:
                print(f"  chunkstore planned {cs_row.get('tasks')} tasks in "
                      f"{cs_row.get('stages')} stage(s), ~{cs_row['planned_task_mb']:.0f} MB per "
                      f"task; decoded bytes read {cs_row['decoded_read_mb']:.0f} MB = "
                      f"{cs_row['decoded_read_mb'] / cs_row['nbytes_mb']:.0f}x the array; "
                      f"{cs_row['decoded_read_mb'] / cs_row['wall_s'] / 2:.0f} MB/s of decoded "
                      "data copied per worker thread")
            for m, r in rows.items():
                if m != "chunkstore":
                    print(f"  chunkstore / {m}: {r['wall_s'] / cs_row['wall_s']:.2f}x faster")


if __name__ == "__main__":
    main()
