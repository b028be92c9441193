"""The peers bench_rechunk runs beside chunkstore: dask + zarr-python (rechunk methods
"tasks" and "p2p", and dask's own ``to_zarr``), rechunker 0.5 (in a virtual environment
with zarr-python 2.18, created once under bench-out/) and cubed (processes executor,
``allowed_mem = max_mem``; each of its pool processes sampled separately).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from benchmarks.rechunk_measure import HEADROOM, MB, OUT, RssSampler, generated


def dask_to_zarr(dst: Path, shape: tuple, chunks: tuple) -> dict:
    generated(shape, chunks).to_zarr(str(dst), overwrite=True, zarr_format=2)
    return {}


def dask_zarr_rechunk(src: Path | str, dst: Path | str, target: tuple, method: str, axes=None,
                      storage_options: dict | None = None) -> dict:
    """dask's rechunk (``method``: "tasks" or "p2p") with zarr-python reading and writing
    (over s3fs with ``storage_options``, for URLs on S3)."""
    import dask
    import dask.array as da
    options = {"storage_options": storage_options} if storage_options else {}
    with dask.config.set({"array.rechunk.method": method}):
        x = da.from_zarr(str(src), **options)
        if axes is not None:
            x = x.transpose(axes)
        x.rechunk(target).to_zarr(str(dst), overwrite=True, zarr_format=2, **options)
    return {}


RECHUNKER_SCRIPT = r'''
import json, os, sys, threading, time, dask, psutil, zarr
from distributed import Client, LocalCluster
from rechunker import rechunk
from rechunker.algorithm import rechunking_plan
src, dst, tmp, target, max_mem, limit = sys.argv[1:7]
target = tuple(json.loads(target))
if __name__ == "__main__":
    source = zarr.open(src, mode="r")
    read, inter, write = rechunking_plan(source.shape, source.chunks, target,
                                         source.dtype.itemsize, int(max_mem))
    # the nanny pauses its worker as for the other methods but never kills it: a peak
    # above the limit is measured and reported instead of ending the run (KilledWorker)
    with dask.config.set({"distributed.worker.memory.terminate": False}), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                         memory_limit=int(limit), dashboard_address=None) as cluster, \
            Client(cluster) as client:
        pids = list(client.run(os.getpid).values())
        peaks = {p: 0 for p in pids}
        cpu = {p: 0.0 for p in pids}
        stop = threading.Event()
        def sample():
            procs = [psutil.Process(p) for p in pids]
            while not stop.is_set():
                for p in procs:
                    try:
                        peaks[p.pid] = max(peaks[p.pid], p.memory_info().rss)
                        t = p.cpu_times(); cpu[p.pid] = t.user + t.system
                    except psutil.Error: pass
                stop.wait(0.1)
        t = threading.Thread(target=sample, daemon=True); t.start()
        cpu0 = sum(sum(psutil.Process(p).cpu_times()[:2]) for p in pids)
        t0 = time.perf_counter()
        plan = rechunk(source, target, int(max_mem), dst, temp_store=tmp)
        plan.execute()
        wall = time.perf_counter() - t0
        stop.set(); t.join()
        events = [m for lines in client.get_worker_logs().values() for _, m in lines
                  if any(w in m.lower() for w in ("pausing", "spill", "restarting"))]
    print(json.dumps({"wall_s": wall, "cpu_s": sum(cpu.values()) - cpu0,
                      "peak_rss_mb": [v / 1e6 for v in peaks.values()],
                      "memory_events": events, "nanny_terminate": False,
                      "rechunker_chunks": {"read": read, "intermediate": inter,
                                           "write": write}}))
'''


#: each peer that runs from a virtual environment of its own (``peer_env``): what is
#: installed in it. rechunker 0.5 needs zarr-python 2.18; cubed (the newest the registry
#: has) brings the zarr-python 3 it wants, which may differ from the main environment's.
PEER_PINS = {
    "rechunker": ["rechunker==0.5.*", "zarr==2.18.*", "numcodecs<0.16", "dask[array]",
                  "distributed", "psutil"],
    "cubed": ["cubed", "zarr!=3.1.2", "psutil"],
}


def peer_env(name: str, create: bool = True) -> Path | None:
    """The Python of the virtual environment of peer ``name`` (``PEER_PINS``), made under
    bench-out/ at first use; None when it does not exist and ``create`` is false (--tiny:
    no package downloads) or when it could not be built."""
    env = OUT / f"{name}-venv"
    python = env / "bin" / "python"
    if not python.exists():
        if not create:
            print(f"{name}: no virtual environment at {env} (a full-size run makes it)")
            return None
        subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
        done = subprocess.run([str(python), "-m", "pip", "install", "-q", *PEER_PINS[name]],
                              capture_output=True, text=True)
        if done.returncode:
            print(f"{name} environment could not be built:", done.stderr[-500:])
            shutil.rmtree(env, ignore_errors=True)
            return None
    return python.absolute()


def run_rechunker(src: Path, dst: Path, tmp: Path, target: tuple, max_mem: int,
                  create_env: bool = True) -> dict | None:
    """rechunker 0.5 with dask on a LocalCluster like the others' (2 x 1 thread,
    memory_limit = max_mem + 500 MB), from its own environment (``peer_env``), with the
    same ``max_mem``; its nanny never kills a worker (the row says so: its peak is
    measured, also above the bound). None when its environment does not exist and
    ``create_env`` is false."""
    python = peer_env("rechunker", create=create_env)
    if python is None:
        return None
    load0 = os.getloadavg()[0]
    done = subprocess.run([str(python), "-c", RECHUNKER_SCRIPT, str(src), str(dst), str(tmp),
                           json.dumps(list(target)), str(max_mem), str(max_mem + HEADROOM)],
                          capture_output=True, text=True)
    if done.returncode:
        return {"error": f"rechunker failed: {done.stderr[-800:]}"}
    row = json.loads(done.stdout.strip().splitlines()[-1])
    row["load_avg"] = [load0, os.getloadavg()[0]]
    return row


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


def run_cubed(src: Path, dst: Path, work: Path, target: tuple, max_mem: int, axes,
              create_env: bool = True) -> dict | None:
    """cubed in a child process of its own environment (``peer_env``; processes
    executor, 2 workers, allowed_mem = max_mem); each of its pool processes is sampled
    separately. None when its environment does not exist and ``create_env`` is false."""
    python = peer_env("cubed", create=create_env)
    if python is None:
        return None
    proc = subprocess.Popen([str(python), "-c", CUBED_SCRIPT, str(src), str(dst), str(work),
                             json.dumps(list(target)), json.dumps(list(axes or [])),
                             str(max_mem)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    load0 = os.getloadavg()[0]
    with RssSampler([], children_of=proc.pid) as sampler:
        out, err = proc.communicate()
    if proc.returncode:
        return {"error": f"cubed failed: {err[-800:]}"}
    row = json.loads(out.strip().splitlines()[-1])
    # the executor's pool processes (the largest two: 2 workers); the driver is the client
    peaks = sorted(sampler.peaks.values(), reverse=True)[:2]
    row["peak_rss_mb"] = [p / MB for p in peaks]
    row["cpu_s"] = sum(sampler.cpu.values())  # the driver and its pool processes
    row["memory_events"] = []
    row["load_avg"] = [load0, os.getloadavg()[0]]
    return row
