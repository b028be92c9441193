"""How bench_rechunk measures a run: each worker process's RSS sampled by pid, worker CPU
seconds, memory events from the logs, the machine's load; creating and checking the
arrays; the rows printed as lines and as a Markdown table.

A run on a cluster (``run_on_cluster``) gets a fresh LocalCluster of 2 workers x 1 thread
with ``memory_limit = max_mem + 500 MB``, or a client of a cluster that is already running
(benchmarks/rechunk_cli.py: one started from the dask CLI); either way every worker is
sampled separately with ``chunkstore.dask.memory.WorkerMemory`` (psutil, every 0.1 s,
from outside: the figure dask's nanny acts on), and the worker and nanny logs are
searched for pause, spill and restart events.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psutil

OUT = Path("bench-out")
MB = 1e6
MiB = 2**20
INTERVAL = 0.1
HEADROOM = 500 * 10**6  # memory_limit = max_mem + HEADROOM (issue 13)
TIMEOUT = 600.0  # seconds a method may run before it counts as failed (a hung peer)
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
    """Bytes of the files under ``path``."""
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def make_source(path: Path, shape: tuple[int, ...], chunks: tuple[int, ...],
                compressible: bool = False) -> None:
    """A float32 Zarr v2 array at ``path`` (written in slabs): random numbers, or with
    ``compressible`` the small-integer ``pattern`` (about 4x smaller in blosc-lz4)."""
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
        region = tuple(slice(start, stop) if ax == axis else slice(0, n)
                       for ax, n in enumerate(shape))
        block = [stop - start if ax == axis else n for ax, n in enumerate(shape)]
        a[region] = (pattern(region, shape, chunks) if compressible
                     else rng.standard_normal(block, dtype="f4"))


def pattern(region: tuple[slice, ...], shape: tuple[int, ...],
            chunks: tuple[int, ...]) -> np.ndarray:
    """The elements at ``region`` of a float32 array of ``shape`` chunked ``chunks``:
    small integers from each element's index (0-255) plus 256 x its chunk's number (mod
    2**15): no chunk constant, no two alike (nothing is skipped), yet about 4x smaller
    in blosc-lz4 with shuffle (the big arrays of ``--beyond-memory`` fit on disk)."""
    grids = [np.arange(r.start, r.stop, dtype=np.int32).reshape(
        [-1 if d == ax else 1 for d in range(len(region))]) for ax, r in enumerate(region)]
    mix = sum(g * p for g, p in zip(grids, (31, 17, 7, 3), strict=False))
    for g, shift in zip(grids, (5, 3, 4, 2), strict=False):
        mix = mix ^ (g >> shift)
    number = 0
    for g, n, c in zip(grids, shape, chunks, strict=True):
        number = number * -(-n // c) + g // c
    return ((mix & 255) + 256 * (number % 2**15)).astype("f4")


@contextlib.contextmanager
def local_cluster(max_mem: int) -> Iterator[Any]:
    """The LocalCluster a run gets: 2 workers x 1 thread (processes), ``memory_limit =
    max_mem + 500 MB``, no dashboard."""
    from distributed import LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      memory_limit=max_mem + HEADROOM, dashboard_address=None) as cluster:
        yield cluster


def run_on_cluster(fn: Callable[[], dict | None], max_mem: int, client: Any = None,
                   scheduler: str | None = None) -> dict:
    """``fn()`` on a fresh ``local_cluster(max_mem)``, or on the cluster of ``client`` when
    given (its workers already started), or on the running cluster at the address
    ``scheduler`` (the smoke tests' one cluster for every row: its workers are warm, so
    never for a measurement), sampling each worker's RSS; memory events of the worker and
    nanny logs are listed."""
    if client is not None:
        return _measure(fn, client)
    from distributed import Client
    if scheduler is not None:
        with Client(scheduler) as shared_client:
            return _measure(fn, shared_client)
    with local_cluster(max_mem) as cluster, Client(cluster) as local_client:
        return _measure(fn, local_client)


def _measure(fn: Callable[[], dict | None], client: Any) -> dict:
    from chunkstore.dask.memory import WorkerMemory
    client.run(lambda: __import__("chunkstore.dask"))  # the same baseline for all methods
    pids = list(client.run(os.getpid).values())
    cpu0 = _cpu_seconds(pids)
    load0 = os.getloadavg()[0]
    with WorkerMemory(client, interval=INTERVAL) as mem:
        extra = _within(fn, TIMEOUT)
    return {"wall_s": mem.wall, "cpu_s": _cpu_seconds(pids) - cpu0,
            "peak_rss_mb": [p / MB for p in mem.peaks.values()],
            "baseline_mb": [b / MB for b in mem.baselines.values()],
            "memory_events": mem.events, "load_avg": [load0, os.getloadavg()[0]],
            **extra}


def _within(fn: Callable[[], dict | None], timeout: float) -> dict:
    """``fn()``'s result, or ``{"error": ...}`` when it raised or ran past ``timeout``
    seconds (dask p2p once stayed paused for 7 minutes with its workers at 81% of their
    limit: the cluster is closed after it, which ends the computation)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn() or {}
        except Exception as e:  # noqa: BLE001  (a peer that fails is a result too)
            box["value"] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout)
    return box.get("value", {"error": f"TimeoutError: still running after {timeout:.0f} s"})


_CHILD = ("import pickle, sys\n"
          "from benchmarks.rechunk_measure import _answer\n"
          "_answer(pickle.loads(sys.stdin.buffer.read()), sys.argv[1])\n")


def in_child(fn: Callable[[], dict | None], timeout: float = TIMEOUT + 120) -> dict | None:
    """``fn()`` (picklable) in a fresh Python process, which is killed with every process
    it started when it has not answered after ``timeout`` seconds: a method whose cluster
    hangs even while closing (dask p2p once left its client waiting on workers that were
    gone) fails alone instead of stopping the benchmark."""
    root = str(Path(__file__).resolve().parent.parent)  # where ``benchmarks`` is
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [root, *filter(None, [os.environ.get("PYTHONPATH")])])}
    with tempfile.TemporaryDirectory() as tmp:
        answer = os.path.join(tmp, "answer.pickle")
        child = subprocess.Popen([sys.executable, "-c", _CHILD, answer],
                                 stdin=subprocess.PIPE, env=env)
        try:
            assert child.stdin is not None
            child.stdin.write(pickle.dumps(fn))
            child.stdin.close()
            try:
                child.wait(timeout)
            except subprocess.TimeoutExpired:
                return {"error": f"TimeoutError: no answer after {timeout:.0f} s (killed)"}
            if not os.path.exists(answer):
                return {"error": f"the run's process died (exit code {child.returncode})"}
            with open(answer, "rb") as f:
                return pickle.load(f)
        finally:
            _kill_tree(child.pid)


def _answer(fn: Callable[[], dict | None], path: str) -> None:
    try:
        value = fn()
    except Exception as e:  # noqa: BLE001  (reported as the run's error)
        value = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
    with open(path, "wb") as f:
        pickle.dump(value, f)


def _kill_tree(pid: int) -> None:
    """Kill ``pid`` and all its descendants (a cluster's nannies and workers)."""
    try:
        root = psutil.Process(pid)
        procs = [*root.children(recursive=True), root]
    except psutil.Error:
        return
    for proc in procs:
        try:
            proc.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=10)


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


def generated(shape: tuple[int, ...], chunks: tuple[int, ...]) -> Any:
    """A float64 dask array of random numbers, made block by block (never in memory)."""
    import dask.array as da
    return da.random.default_rng(0).random(shape, chunks=chunks)


def check(src: Path | str, dst: Path | str, axes: tuple[int, ...] | None = None,
          storage_options: dict | None = None) -> bool:
    """The result equals the (transposed) source, compared in slabs of whole source chunks
    along the source's most finely chunked axis (each chunk decoded once);
    ``storage_options`` are for ``dst`` (e.g. on S3)."""
    import chunkstore as cs
    a = cs.open_array(str(src), mode="r")
    b = cs.open_array(str(dst), mode="r", storage_options=storage_options)
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


def format_row(r: dict) -> str:
    """One result as a line: wall and CPU time, load, peak RSS per worker, prediction."""
    peaks = "/".join(f"{p / MiB * MB:.0f}" for p in r["peak_rss_mb"])
    pred = (f", predicted {r['predicted_worker_mb'] / MiB * MB:.0f} MiB"
            if "predicted_worker_mb" in r else "")
    events = f", {len(r.get('memory_events', []))} memory events"
    s3 = f", S3 server {r['s3_cpu_s']:.0f} s" if "s3_cpu_s" in r else ""
    cpu = f" (cpu {r['cpu_s']:.0f} s{s3})" if "cpu_s" in r else ""
    load = f", load {r['load_avg'][0]:.1f}-{r['load_avg'][1]:.1f}" if "load_avg" in r else ""
    return (f"{_over_bound(r)}{r['case']:<9} {r['method']:<11} {r['wall_s']:7.1f} s{cpu}{load}"
            "  peak RSS per worker "
            f"{peaks} MiB{pred} (bound {r['bound_mb'] / MiB * MB:.0f} MiB){events}  "
            f"correct={r['correct']}")


def _over_bound(r: dict) -> str:
    """A mark before a row whose worker went over the bound without being killed (its
    nanny was told not to: rechunker's), so that its peak could be measured."""
    if r.get("nanny_terminate") is False and any(p > r["bound_mb"] for p in r["peak_rss_mb"]):
        return "OVER BOUND (nanny's kill off) "
    return ""


def _case_summary(rows: dict[str, dict], limits: dict) -> None:
    """chunkstore's plan for a case, its fraction of the limit where its arrays were, and
    how much faster it was than each peer with the arrays in the same place."""
    cs_row = rows.get("chunkstore")
    if cs_row is not None and "decoded_read_mb" in cs_row:
        print(f"  chunkstore planned {cs_row.get('tasks')} tasks in "
              f"{cs_row.get('stages')} stage(s), ~{cs_row['planned_task_mb']:.0f} MB per "
              f"task; decoded bytes read {cs_row['decoded_read_mb']:.0f} MB = "
              f"{cs_row['decoded_read_mb'] / cs_row['nbytes_mb']:.0f}x the array; "
              f"{cs_row['decoded_read_mb'] / cs_row['wall_s'] / 2:.0f} MB/s of decoded "
              "data copied per worker thread")
    if cs_row is not None and "limit" in rows:
        print(f"  chunkstore: {rows['limit']['wall_s'] / cs_row['wall_s']:.2f} of the "
              f"limit ({rows['limit']['wall_s']:.1f} s: {rows['limit']['stages']} "
              "stage(s) of plain decode + encode + write on 2 x 1 slots)")
    for m, r in rows.items():
        if _is_limit(r) or m == "chunkstore":
            continue
        if m.startswith("chunkstore-"):  # the same library elsewhere (e.g. on S3)
            limit = limits.get(_place(r)) if "s3_latency_ms" in r else None
            said = [f"{r['wall_s'] / cs_row['wall_s']:.2f}x the wall time of chunkstore on "
                    "the LocalCluster with local files"] if cs_row is not None else []
            if limit:
                said.append(f"{limit / r['wall_s']:.2f} of the limit on S3 ({limit:.1f} s: "
                            "the bytes alone through the same server)")
            if said:
                print(f"  {m}: {'; '.join(said)}")
            continue
        ref = _same_place(rows, r) or cs_row
        if ref is not None:
            print(f"  {ref['method']} / {m}: {r['wall_s'] / ref['wall_s']:.2f}x faster")


def _is_limit(r: dict) -> bool:
    """Whether ``r`` is a limit row (``limit``, or ``limit-s3...`` on S3)."""
    return r["method"] == "limit" or r["method"].startswith("limit-s3")


def _place(r: dict) -> tuple[str, float | None]:
    """Where ``r``'s arrays were: its case and, on S3, the latency per request."""
    return r["case"], r.get("s3_latency_ms")


def _same_place(rows: dict[str, dict], r: dict) -> dict | None:
    """chunkstore's row on the LocalCluster with the arrays where ``r``'s are: on S3 with
    the same latency per request (``s3_latency_ms``), or on local disk."""
    for m, other in rows.items():
        if (m.startswith("chunkstore") and "scheduler" not in other
                and other.get("s3_latency_ms") == r.get("s3_latency_ms")):
            return other
    return None


def print_table(results: list[dict]) -> None:
    """The results as a Markdown table, then per case chunkstore's plan and speed-ups."""
    print("\n| case | method | wall s | limit / wall | worker CPU s | load avg | peak RSS per "
          "worker MiB | plan's prediction MiB | measured / predicted | <= max_mem + 200 MB | "
          "memory events | correct |")
    # correct=False with an error: the method failed (e.g. dask killed its workers)
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    # the machine's limit per case (benchmarks/rechunk_limit.py), on local disk and on S3
    # with each latency per request: a row's fraction of the one where its arrays are
    limits = {_place(r): r["wall_s"] for r in results if _is_limit(r)}
    for r in results:
        peaks = " / ".join(f"{p * MB / MiB:.0f}" for p in r["peak_rss_mb"])
        ok = (f"{all(p <= r['bound_mb'] for p in r['peak_rss_mb'])}"
              f"{' (nanny kill off)' if r.get('nanny_terminate') is False else ''}"
              if not _is_limit(r) else "-")
        pred = r.get("predicted_worker_mb")
        ratio = f"{max(r['peak_rss_mb']) / pred:.2f}" if pred else "-"
        pred_s = f"{pred * MB / MiB:.0f}" if pred else "-"
        cpu = f"{r['cpu_s']:.0f}" if "cpu_s" in r else "-"
        load = "-".join(f"{v:.1f}" for v in r.get("load_avg", [])) or "-"
        frac = f"{limits[_place(r)] / r['wall_s']:.2f}" if _place(r) in limits else "-"
        print(f"| {r['case']} | {r['method']} | {r['wall_s']:.1f} | {frac} | {cpu} | {load} | "
              f"{peaks or '-'} | "
              f"{pred_s} | "
              f"{ratio} | {ok} | {len(r.get('memory_events', []))} | {r['correct']} |")
    for case in sorted({r["case"] for r in results}):
        rows = {r["method"]: r for r in results if r["case"] == case}
        if any(m.startswith("chunkstore") for m in rows):
            print(f"\n{case}:")
            _case_summary(rows, limits)
    for r in results:
        for event in r.get("memory_events", [])[:10]:
            print(f"  memory event ({r['case']} {r['method']}): {event}")
