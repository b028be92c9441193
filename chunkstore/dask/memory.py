"""What a Dask worker holds, measured as its nanny sees it, and the settings that bound it.

Three parts:

* :class:`Workers`: the facts the memory model of a plan needs about the workers that
  will run it (tasks in flight per worker = threads per worker, codec threads per task,
  the RSS of an idle worker process). ``Workers.of_client(client)`` asks the workers.
* ``WorkerSettings`` (a ``distributed`` worker plugin; ``configure_workers``
  registers it): in each worker, turn the process-wide cache of memory maps of
  ``LocalStore`` down to nothing. A worker's RSS counts the resident pages of every
  file it has mapped, and that cache keeps up to 1 GiB of maps per process: measured,
  it was 1,051 MiB of a rechunk worker's 1,395 MiB peak.
* :class:`WorkerMemory`: samples each worker process's RSS every 0.1 s (psutil; from
  this process when the workers run on this host, else by a thread in each worker)
  and collects the pause/spill/restart events of the worker and nanny logs.

>>> Workers(threads=4, baseline=150_000_000).worker_memory(100_000_000)
550000000
"""

from __future__ import annotations

import functools
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from chunkstore.rechunk.planner import CODEC_THREADS, PlanError
from chunkstore.rechunk.report import NANNY_THRESHOLDS
from chunkstore.runtime import current, set_map_bytes
from chunkstore.runtime.part import Part

#: RSS of an idle worker process with numpy, dask, distributed and chunkstore imported,
#: measured here (113-125 MiB); used when the workers cannot be asked
DEFAULT_BASELINE = 130 * 10**6
#: what WorkerSettings leaves to the LocalStore map cache in a worker (bytes of maps)
WORKER_MAP_BYTES = 0
#: substrings of worker/nanny log lines that mean the memory limits were hit
MEMORY_EVENTS = ("pausing worker", "paused", "spill", "restarting", "exceeded 95%",
                 "memory budget", "unmanaged memory use is high",
                 "no data to store to disk", "worker is at")


def codec_threads_for(cores: int, pool: int | None = None) -> int:
    """Threads of chunkstore's pool that may decode or encode for one call: the whole
    pool (local writes fan out on every pool thread; measured: a rechunk's second stage
    held 95 MiB more than a model of one codec thread per core predicted)."""
    pool = current().budgets.max_workers if pool is None else pool
    return max(2, pool)


@dataclass(frozen=True)
class Workers:
    """The workers a plan runs on, as its memory model needs them.

    ``threads``: tasks in flight per worker (dask threads per worker); ``codec_threads``:
    chunkstore pool threads that decode/encode for one task; ``baseline``: RSS of an idle
    worker process; ``memory_limit``: the nanny's limit per worker (None: unknown);
    ``count``: how many workers.
    """

    threads: int = 1
    codec_threads: int = CODEC_THREADS
    baseline: int = DEFAULT_BASELINE
    memory_limit: int | None = None
    count: int = 1
    measured: bool = False

    @property
    def min_tasks(self) -> int:
        """Blocks a stage keeps at least: two per thread of the cluster, so that every
        thread has work (1 when the number of workers is not known)."""
        return 2 * self.count * self.threads if self.measured or self.count > 1 else 1

    def worker_memory(self, task_memory: int) -> int:
        """Peak RSS of one worker running ``threads`` tasks of ``task_memory`` at once."""
        return self.baseline + self.threads * task_memory

    @classmethod
    def local(cls) -> Workers:
        """This process as the worker of the threaded scheduler (dask's thread count)."""
        import dask
        cores = os.cpu_count() or 1
        threads = dask.config.get("num_workers", None) or cores
        return cls(threads=int(threads), codec_threads=codec_threads_for(cores),
                   baseline=_rss(), count=1, measured=True)

    @classmethod
    def of_client(cls, client: Any) -> Workers:
        """Ask the workers of ``client``: threads, cores, pool size and idle RSS (the
        largest of each over the workers)."""
        facts = list(client.run(_worker_facts).values())
        if not facts:
            return cls()
        info = client.scheduler_info(n_workers=-1)["workers"] \
            if _takes_n_workers(client) else client.scheduler_info()["workers"]
        threads = max((w.get("nthreads", 1) for w in info.values()), default=1)
        limits = [w.get("memory_limit") for w in info.values() if w.get("memory_limit")]
        return cls(threads=int(threads),
                   codec_threads=max(codec_threads_for(f["cores"], f["pool"]) for f in facts),
                   baseline=max(f["rss"] for f in facts),
                   memory_limit=min(limits) if limits else None,
                   count=len(facts), measured=True)


def _takes_n_workers(client: Any) -> bool:
    import inspect
    try:
        return "n_workers" in inspect.signature(client.scheduler_info).parameters
    except (TypeError, ValueError):
        return False


def _rss() -> int:
    import psutil
    return int(psutil.Process().memory_info().rss)


def _worker_facts() -> dict[str, int]:
    """Run in a worker: its cores, chunkstore pool size and current RSS."""
    import dask.array  # noqa: F401  (the baseline includes dask.array and chunkstore)

    return {"cores": os.cpu_count() or 1, "pool": current().budgets.max_workers, "rss": _rss(),
            "pid": os.getpid()}


def nanny_thresholds() -> dict[str, float]:
    """The fractions of ``memory_limit`` at which dask's workers spill, pause and are
    restarted (``distributed.worker.memory.*`` of ``dask.config``, else dask's
    defaults): what the plan reports compare the modelled peak with."""
    import dask
    out = dict(NANNY_THRESHOLDS)
    for name in out:
        value = dask.config.get(f"distributed.worker.memory.{name}", out[name])
        if value:
            out[name] = float(value)
    return out


def active_client() -> Any:
    """The current ``distributed`` client, or None (none active, or no distributed)."""
    try:
        from distributed import default_client
        return default_client()
    except (ImportError, ValueError):
        return None


def other_processes(collection: Any = None) -> bool:
    """Whether tasks would run on copies of their arguments: with ``collection``, under
    the scheduler dask would compute it with (a ``distributed`` client's, in-process
    workers too, or the process pool); without, whenever a client is active (plans run
    on it) or the process pool is configured."""
    import dask.multiprocessing
    from dask.base import get_scheduler
    if collection is None and active_client() is not None:
        return True
    chosen = get_scheduler(collections=[collection] if collection is not None else None)
    owner = getattr(chosen, "__self__", None)
    return chosen is dask.multiprocessing.get or (
        owner is not None and type(owner).__module__.startswith("distributed"))


def refuse_copied(store: Any, what: str, collection: Any = None) -> None:
    """``PlanError`` when ``store`` lives in this process only (``Capabilities.process_local``,
    e.g. ``MemoryStore``) and the scheduler would hand its tasks copies of it: their
    writes would be lost without an error."""
    if store.capabilities.process_local and other_processes(collection):
        raise PlanError(f"{what}: {store!r} lives in this process only, and the scheduler "
                        "runs tasks on copies of it (a distributed cluster, or processes): "
                        "what they wrote would be lost. Write to a directory or object "
                        "store, or use the threaded scheduler")


# -- settings applied in each worker ---------------------------------------------------------
def limit_map_cache(nbytes: int | str = WORKER_MAP_BYTES) -> int:
    """Bound this process's LocalStore map cache to ``nbytes`` (the runtime's
    ``map_bytes`` budget: the next reads drop the maps beyond it); returns the previous
    bound.

    Maps handed to a reader stay valid: a map lives as long as a view of it."""
    return set_map_bytes(nbytes)


class _Settings:
    """chunkstore's memory settings for one worker process (see :func:`configure_workers`)."""

    name = "chunkstore-memory"

    def __init__(self, map_bytes: int = WORKER_MAP_BYTES) -> None:
        self.map_bytes = map_bytes

    def setup(self, worker: Any = None) -> None:
        limit_map_cache(self.map_bytes)


@functools.cache
def _plugin_class() -> type:
    """``WorkerSettings``: ``_Settings`` as a distributed WorkerPlugin, made on first use so
    that importing chunkstore.dask does not import distributed (once: a pickle of a
    plugin names this one class)."""
    from distributed.diagnostics.plugin import WorkerPlugin
    return type("WorkerSettings", (_Settings, WorkerPlugin), {"__module__": __name__})


def __getattr__(name: str) -> Any:  # ``memory.WorkerSettings`` (also what unpickling asks)
    if name == "WorkerSettings":
        return _plugin_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def configure_workers(client: Any, map_bytes: int = WORKER_MAP_BYTES) -> None:
    """Apply chunkstore's memory settings in every worker of ``client``, now and in
    workers that join later (a worker plugin; registering it again under the same name
    replaces it: one round trip). Today: the LocalStore map cache of each worker is
    bounded to ``map_bytes`` (0: maps live only while a chunk is decoded from them)."""
    client.register_plugin(_plugin_class()(map_bytes), name=_Settings.name)


# -- measuring -------------------------------------------------------------------------------
@dataclass
class WorkerPeak:
    """What one worker process did during a measurement (bytes)."""

    address: str
    pid: int
    baseline: int = 0
    peak: int = 0
    samples: int = 0
    series: list[tuple[float, int]] = field(default_factory=list)


class _Sampling(Part):
    """The RSS sampler running in this worker, if any (a part of its Runtime)."""

    def __init__(self) -> None:
        self.state: dict[str, Any] | None = None


def _start_sampler(interval: float) -> int:
    """Run in a worker: sample this process's RSS every ``interval`` s in a thread."""
    import psutil
    stop = threading.Event()
    state = {"peak": 0, "samples": 0, "series": [], "stop": stop}
    proc, t0 = psutil.Process(), time.perf_counter()

    def run() -> None:
        while not stop.is_set():
            rss = proc.memory_info().rss
            state["peak"] = max(state["peak"], rss)
            state["samples"] += 1
            state["series"].append((time.perf_counter() - t0, rss))
            stop.wait(interval)

    current().part(_Sampling).state = state
    threading.Thread(target=run, daemon=True, name="chunkstore-rss").start()
    return os.getpid()


def _stop_sampler() -> dict[str, Any]:
    sampling = current().part(_Sampling)
    state, sampling.state = sampling.state, None
    if state is None:
        return {"peak": 0, "samples": 0, "series": []}
    state["stop"].set()
    return {k: state[k] for k in ("peak", "samples", "series")}


class WorkerMemory:
    """Per-worker peak RSS during a ``with`` block, each worker separately.

    >>> # with WorkerMemory(client) as mem: plan.execute()
    >>> # mem.peaks -> {address: bytes}; mem.events -> memory log lines of the run
    """

    def __init__(self, client: Any, interval: float = 0.1, keep_series: bool = False) -> None:
        self.client, self.interval, self.keep_series = client, interval, keep_series
        self.workers: dict[str, WorkerPeak] = {}
        self.events: list[str] = []
        self._since = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._remote = False
        self.wall = 0.0

    # -- lifecycle ------------------------------------------------------------------------
    def __enter__(self) -> WorkerMemory:
        import psutil
        info = self.client.run(lambda: (os.getpid(), socket.gethostname(), _rss()))
        here = socket.gethostname()
        self._remote = any(host != here for _, host, _ in info.values())
        for addr, (pid, _, rss) in info.items():
            self.workers[addr] = WorkerPeak(addr, pid, baseline=rss, peak=rss)
        self._since = time.time() - 0.05  # log stamps: millisecond precision
        if self._remote:
            self.client.run(_start_sampler, self.interval)
        else:
            procs = {addr: psutil.Process(w.pid) for addr, w in self.workers.items()}
            self._thread = threading.Thread(target=self._sample, args=(procs,), daemon=True)
            self._thread.start()
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self._t0
        if self._remote:
            for addr, got in self.client.run(_stop_sampler).items():
                w = self.workers.get(addr)
                if w is not None:
                    w.peak, w.samples = max(w.peak, got["peak"]), got["samples"]
                    if self.keep_series:
                        w.series = got["series"]
        else:
            self._stop.set()
            if self._thread is not None:
                self._thread.join()
        self.events = self._new_events()

    def _sample(self, procs: dict[str, Any]) -> None:
        import psutil
        t0 = time.perf_counter()
        while not self._stop.is_set():
            for addr, proc in procs.items():
                try:
                    rss = proc.memory_info().rss
                except psutil.Error:
                    continue
                w = self.workers[addr]
                w.peak, w.samples = max(w.peak, rss), w.samples + 1
                if self.keep_series:
                    w.series.append((time.perf_counter() - t0, rss))
            self._stop.wait(self.interval)

    # -- logs -----------------------------------------------------------------------------
    def _logs(self) -> dict[str, list[tuple[str, str]]]:
        out: dict[str, list[tuple[str, str]]] = {}
        for nanny in (False, True):
            try:
                got = self.client.get_worker_logs(nanny=nanny)
            except Exception:  # noqa: BLE001  (logs are a diagnostic, never fatal)
                continue
            for addr, lines in got.items():
                out[f"{'nanny' if nanny else 'worker'} {addr}"] = list(lines)
        return out

    def _new_events(self) -> list[str]:
        """Memory lines logged since ``__enter__`` (by their timestamps: distributed
        returns the newest lines first and keeps a bounded number)."""
        events = []
        for name, lines in self._logs().items():
            for level, msg in lines:
                text = str(msg)
                stamp = _log_time(text)
                if stamp is not None and stamp < self._since:
                    continue
                if any(word in text.lower() for word in MEMORY_EVENTS):
                    events.append(f"{name} {level}: {text[:300]}")
        return events

    # -- results --------------------------------------------------------------------------
    @property
    def peaks(self) -> dict[str, int]:
        """Peak RSS per worker address (bytes)."""
        return {addr: w.peak for addr, w in self.workers.items()}

    @property
    def baselines(self) -> dict[str, int]:
        return {addr: w.baseline for addr, w in self.workers.items()}

    def max_peak(self) -> int:
        return max(self.peaks.values(), default=0)


def _log_time(line: str) -> float | None:
    """The time stamp that starts a distributed log line (local time), or None."""
    import datetime
    try:
        return datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
    except ValueError:
        return None


def measure(client: Any, fn: Callable[[], Any], interval: float = 0.1
            ) -> tuple[Any, WorkerMemory]:
    """``fn()`` while sampling every worker's RSS; returns (result, the WorkerMemory)."""
    with WorkerMemory(client, interval) as mem:
        result = fn()
    return result, mem
