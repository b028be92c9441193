"""Rechunk and transpose-and-rewrite on a LocalCluster, side by side with the peers.

    python -m benchmarks.bench_rechunk            # issue sizes: 4 GiB arrays
    python -m benchmarks.bench_rechunk --tiny     # seconds, for CI

Cases (issue 6): (1) rechunk a (32768, 32768) float32 array, blosc-lz4, from
(32768, 32) chunks to (32, 32768) with max_mem=512 MB; (2) transpose-and-rewrite a
1024^3 float32 array chunked (1024, 1024, 16). Methods: chunkstore, dask + zarr-python
(rechunk method "tasks" and "p2p"), and rechunker 0.5 (needs zarr-python 2.18, so it
runs from a virtual environment this script creates under bench-out/). Each run gets a
fresh LocalCluster(2 workers x 1 thread, memory_limit 4 GiB); every worker's RSS is
sampled during the run. Arrays are Zarr v2 so that every method reads the same source.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil

OUT = Path("bench-out")
MB = 1e6


class RssSampler:
    """Samples the RSS of the given pids every ``interval`` seconds, keeps the peaks."""

    def __init__(self, pids: list[int], interval: float = 0.05) -> None:
        self.procs = {pid: psutil.Process(pid) for pid in pids}
        self.peaks = dict.fromkeys(pids, 0)
        self.interval, self._stop = interval, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for pid, proc in self.procs.items():
                try:
                    self.peaks[pid] = max(self.peaks[pid], proc.memory_info().rss)
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


def run_on_cluster(fn, memory_limit: str) -> dict:
    from distributed import Client, LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      memory_limit=memory_limit, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        pids = list(client.run(os.getpid).values())
        with RssSampler(pids) as sampler:
            t0 = time.perf_counter()
            extra = fn() or {}
            wall = time.perf_counter() - t0
        return {"wall_s": wall, "peak_rss_mb": [p / MB for p in sampler.peaks.values()], **extra}


def chunkstore_rechunk(src: Path, dst: Path, target: tuple, max_mem: int, axes=None) -> dict:
    import chunkstore.dask as csd
    if axes is None:
        plan = csd.rechunk(str(src), target, str(dst), max_mem=max_mem)
    else:
        import chunkstore as cs
        view = csd.TransposedSource(cs.open_array(str(src), mode="r"), axes)
        plan = csd.rechunk(view, target, str(dst), max_mem=max_mem)
    desc = plan.describe()
    plan.execute()
    return {"tasks": desc["ntasks"], "stages": len(desc["stages"]),
            "planned_task_mb": desc["peak_task_memory"] / MB,
            "decoded_read_mb": desc["bytes_read"] / MB,
            "decoded_written_mb": desc["bytes_written"] / MB}


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
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=limit,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        pids = list(client.run(os.getpid).values())
        peaks = {p: 0 for p in pids}
        stop = threading.Event()
        def sample():
            procs = [psutil.Process(p) for p in pids]
            while not stop.is_set():
                for p in procs:
                    try: peaks[p.pid] = max(peaks[p.pid], p.memory_info().rss)
                    except psutil.Error: pass
                stop.wait(0.05)
        t = threading.Thread(target=sample, daemon=True); t.start()
        t0 = time.perf_counter()
        plan = rechunk(zarr.open(src, mode="r"), target, int(max_mem), dst, temp_store=tmp)
        plan.execute()
        wall = time.perf_counter() - t0
        stop.set(); t.join()
    print(json.dumps({"wall_s": wall, "peak_rss_mb": [v / 1e6 for v in peaks.values()]}))
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


def run_rechunker(src: Path, dst: Path, tmp: Path, target: tuple, max_mem: int,
                  limit: str) -> dict | None:
    python = rechunker_env()
    if python is None:
        return None
    done = subprocess.run([str(python), "-c", RECHUNKER_SCRIPT, str(src), str(dst), str(tmp),
                           json.dumps(list(target)), str(max_mem), limit],
                          capture_output=True, text=True)
    if done.returncode:
        print("rechunker failed:", done.stderr[-800:])
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def check(src: Path, dst: Path, axes=None) -> bool:
    """The result equals the (transposed) source, compared block by block."""
    import chunkstore as cs
    a, b = cs.open_array(str(src), mode="r"), cs.open_array(str(dst), mode="r")
    rows = max(1, a.shape[0] // 16)
    for start in range(0, a.shape[0], rows):
        part = a[start:start + rows]
        if axes is None:
            if not np.array_equal(part, b[start:start + rows]):
                return False
        else:
            region = [slice(None)] * a.ndim
            region[axes.index(0)] = slice(start, start + rows)
            if not np.array_equal(part.transpose(axes), b[tuple(region)]):
                return False
    return True


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="small arrays (CI)")
    parser.add_argument("--cases", default="rechunk,transpose")
    parser.add_argument("--methods", default="chunkstore,dask-tasks,dask-p2p,rechunker")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args(argv)
    OUT.mkdir(exist_ok=True)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-rechunk-"))
    if args.tiny:
        cases = {"rechunk": ((1024, 1024), (1024, 8), (8, 1024), None, 2_000_000),
                 "transpose": ((64, 64, 64), (64, 64, 4), (4, 64, 64), (2, 1, 0), 2_000_000)}
        limit = "1GiB"
    else:
        cases = {"rechunk": ((32768, 32768), (32768, 32), (32, 32768), None, 512_000_000),
                 "transpose": ((1024, 1024, 1024), (1024, 1024, 16), (16, 1024, 1024),
                               (2, 1, 0), 512_000_000)}
        limit = "4GiB"
    results = []
    for case in args.cases.split(","):
        shape, chunks, target, axes, max_mem = cases[case]
        src = work / f"{case}-src.zarr"
        make_source(src, shape, chunks)
        nbytes = int(np.prod(shape)) * 4
        for method in args.methods.split(","):
            dst = work / f"{case}-{method}.zarr"
            shutil.rmtree(dst, ignore_errors=True)
            if method == "chunkstore":
                row = run_on_cluster(
                    functools.partial(chunkstore_rechunk, src, dst, target, max_mem, axes), limit)
            elif method.startswith("dask-"):
                row = run_on_cluster(
                    functools.partial(dask_zarr_rechunk, src, dst, target, method[5:], axes),
                    limit)
            elif method == "rechunker" and axes is None:
                row = run_rechunker(src, dst, work / "rechunker-tmp.zarr", target, max_mem,
                                    limit)
                shutil.rmtree(work / "rechunker-tmp.zarr", ignore_errors=True)
                if row is None:
                    continue
            else:
                continue
            row.update(case=case, method=method, nbytes_mb=nbytes / MB, max_mem_mb=max_mem / MB,
                       source_stored_mb=dir_bytes(src) / MB, target_stored_mb=dir_bytes(dst) / MB,
                       correct=check(src, dst, axes))
            row["bound_mb"] = 1.5 * max_mem / MB + 250
            results.append(row)
            print(format_row(row), flush=True)
            shutil.rmtree(dst, ignore_errors=True)
        shutil.rmtree(src, ignore_errors=True)
    (OUT / "bench_rechunk.json").write_text(json.dumps(results, indent=2))
    print_table(results)
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return results


def format_row(r: dict) -> str:
    peaks = "/".join(f"{p:.0f}" for p in r["peak_rss_mb"])
    return (f"{r['case']:<9} {r['method']:<11} {r['wall_s']:7.1f} s  peak RSS {peaks} MB "
            f"(bound {r['bound_mb']:.0f})  correct={r['correct']}")


def print_table(results: list[dict]) -> None:
    print("\n| case | method | wall s | peak RSS per worker MB | <= 1.5 x max_mem + 250 MB | "
          "correct |")
    print("|---|---|---|---|---|---|")
    for r in results:
        peaks = " / ".join(f"{p:.0f}" for p in r["peak_rss_mb"])
        ok = all(p <= r["bound_mb"] for p in r["peak_rss_mb"])
        print(f"| {r['case']} | {r['method']} | {r['wall_s']:.1f} | {peaks} | {ok} | "
              f"{r['correct']} |")
    for case in sorted({r["case"] for r in results}):
        rows = {r["method"]: r for r in results if r["case"] == case}
        if "chunkstore" in rows:
            cs_row = rows["chunkstore"]
            print(f"\n{case}: chunkstore planned {cs_row.get('tasks')} tasks in "
                  f"{cs_row.get('stages')} stage(s), ~{cs_row.get('planned_task_mb', 0):.0f} MB "
                  f"per task; decoded bytes read {cs_row.get('decoded_read_mb', 0):.0f} MB = "
                  f"{cs_row.get('decoded_read_mb', 0) / cs_row['nbytes_mb']:.0f}x the array")
            for m, r in rows.items():
                if m != "chunkstore":
                    print(f"  chunkstore / {m}: {r['wall_s'] / cs_row['wall_s']:.2f}x faster")


if __name__ == "__main__":
    main()
