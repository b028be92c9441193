"""How fast this machine copies a plan's data, measured: the figures ``describe()``
predicts a plan's wall time from and ``simulate()`` uses unless given a throughput.

:func:`copy_rates` times a small real sample of a plan's copy as a task does it (on
chunkstore's IO pool): whole source chunks read from the plan's source (fetched,
decoded, permuted for a transposed source), then written with the target's
codecs and chunks into a scratch array of the same kind of store (a temporary directory
for a local target, memory otherwise: nothing is written where the target is). A plan
with an intermediate array also times an uncompressed local array, written and read.
:func:`task_overhead` times trivial tasks on the current scheduler (a cluster's client,
else the local threads): the cost of one task to the slot that runs it.

Each figure is measured once per process: cached on the Runtime (``Calibrations``, a
part of ``runtime.current()``) by the codec chains, dtype, chunk shapes and store kinds
of the source and the target. The samples are timed in CPU seconds (what the copy
costs the cores, steady whatever else runs: one worker thread's seconds when it has a
core to itself); how much of a core each worker thread will get is measured apart
when the workers run here (:func:`cpu_share`: threads as busy as the run's for a
moment; kept a few seconds only).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import socket
import statistics
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from chunkstore.api.creation import create_array
from chunkstore.array.array import Array
from chunkstore.dask.memory import active_client
from chunkstore.dask.source import TransposedSource, read_into
from chunkstore.rechunk.planner import Stage
from chunkstore.rechunk.report import CopyRates
from chunkstore.runtime import current
from chunkstore.runtime.part import Part

#: decoded bytes of each timed sample (at least one chunk)
SAMPLE_BYTES = 8 * 2**20
#: each sample is timed this many times after a warm-up; the median is kept (once
#: only when the warm-up took ``LONG_SAMPLE_SECONDS`` or more)
REPEATS = 3
LONG_SAMPLE_SECONDS = 0.25
#: trivial tasks timed for the scheduling overhead
OVERHEAD_TASKS = 40
#: how long the share of a core left by other work is measured, and kept
SHARE_SECONDS = 0.3
SHARE_KEEP_SECONDS = 10.0


class Calibrations(Part):
    """The measured figures of this process (a Runtime part): seconds per byte by sample
    key, and the scheduling overhead per task by scheduler."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seconds_per_byte: dict[Hashable, tuple[float, float]] = {}
        self.overheads: dict[Hashable, float] = {}
        self.shares: dict[Hashable, tuple[float, float]] = {}  # -> (when, share)
        self.measurements = 0  # samples timed (tests: measured once per process)

    def get(self, table: dict, key: Hashable, measure: Callable[[], Any]) -> Any:
        """``table[key]``, measured by ``measure()`` the first time (once, under the lock)."""
        with self.lock:
            if key not in table:
                table[key] = measure()
                self.measurements += 1
            return table[key]


def calibrations() -> Calibrations:
    """This process's measured figures (``runtime.current().part``)."""
    return current().part(Calibrations)


def copy_rates(source: Array | TransposedSource, target: Array, stages: Sequence[Stage],
               slots: int = 1, codec_threads: int = 1) -> CopyRates:
    """The measured rates of copying ``source`` into ``target`` (see the module
    docstring), the scheduling overhead per task on ``slots`` worker threads of the
    current scheduler, each measured once per process; and the share of a core each
    slot gets now (``cpu_share``, from the load of the moment)."""
    cache = calibrations()
    array = source.array if isinstance(source, TransposedSource) else source
    key = ("copy", _chain(array), _chain(target), str(target.dtype), _kind(array.store),
           _kind(target.store), tuple(source.chunks), tuple(target.layout.write_shape),
           isinstance(source, TransposedSource))
    read, write = cache.get(cache.seconds_per_byte, key,
                            lambda: _time_copy(source, target))
    raw_read = raw_write = 0.0
    raw = next((s for s in stages if s.raw_target), None)
    if raw is not None:
        key = ("raw", str(target.dtype), tuple(raw.target_chunks))
        raw_read, raw_write = cache.get(
            cache.seconds_per_byte, key,
            lambda: _time_raw(target.dtype, raw.target_chunks))
    return CopyRates(read=read, write=write, raw_read=raw_read, raw_write=raw_write,
                     task_overhead=task_overhead(slots),
                     cpu_share=cpu_share(slots, codec_threads))


def cpu_share(slots: int, codec_threads: int, local: bool | None = None) -> float:
    """The fraction of a core each of ``slots`` worker threads gets when the workers run
    on this machine (``local``; default: no cluster, or a cluster whose workers are all
    on this host), measured: as many threads as the run would keep busy (each slot's
    task decodes and encodes on up to ``codec_threads`` pool threads, a core's worth at
    most) compress a buffer for ``SHARE_SECONDS`` (zlib releases the GIL, as the codecs
    do) and the CPU seconds they got are shared among the slots. Kept for
    ``SHARE_KEEP_SECONDS`` (the load changes). 1.0 on workers elsewhere."""
    if local is None:
        local = _workers_here()
    if not local:
        return 1.0
    cores = os.cpu_count() or 1
    threads = min(4 * cores, max(1, slots) * max(1, min(codec_threads, cores)))
    cache = calibrations()
    with cache.lock:
        kept = cache.shares.get((slots, threads))
        if kept is not None and time.monotonic() - kept[0] < SHARE_KEEP_SECONDS:
            return kept[1]
    share = _measure_share(threads) / max(1, slots)
    share = min(1.0, max(share, 1e-3))
    with cache.lock:
        cache.shares[(slots, threads)] = (time.monotonic(), share)
    return share


def _measure_share(threads: int) -> float:
    """Cores' worth of CPU ``threads`` threads busy with GIL-free work get now."""
    data = np.random.default_rng(0).integers(0, 64, 2**18, dtype=np.uint8).tobytes()
    got = [0.0] * threads
    start = threading.Barrier(threads + 1)

    def spin(i: int) -> None:
        start.wait()
        t0, c0 = time.perf_counter(), time.thread_time()
        while time.perf_counter() - t0 < SHARE_SECONDS:
            zlib.compress(data, 1)
        got[i] = time.thread_time() - c0

    workers = [threading.Thread(target=spin, args=(i,), daemon=True) for i in range(threads)]
    for w in workers:
        w.start()
    start.wait()
    t0 = time.perf_counter()
    for w in workers:
        w.join()
    return sum(got) / max(time.perf_counter() - t0, 1e-9)


def _workers_here() -> bool:
    client = active_client()
    if client is None:
        return True
    here = {"127.0.0.1", "localhost", socket.gethostname()}
    try:
        addresses = client.scheduler_info()["workers"]
    except Exception:  # noqa: BLE001  (not knowing: assume elsewhere)
        return False
    return all(a.startswith("inproc://") or a.split("://")[-1].rsplit(":", 1)[0] in here
               for a in addresses)


def task_overhead(slots: int = 1) -> float:
    """Seconds one trivial task costs the slot running it on the current scheduler (the
    active ``distributed`` client's cluster, else dask's local threads), measured once
    per process and scheduler: ``OVERHEAD_TASKS`` no-op tasks' wall time x ``slots`` /
    their number."""
    client = active_client()
    key = ("distributed", client.scheduler.address) if client is not None else ("local",)
    cache = calibrations()
    per_task = cache.get(cache.overheads, key, lambda: _time_noops(client))
    return per_task * max(1, slots)


# -- samples --------------------------------------------------------------------------------
def _chain(array: Array) -> str:
    """The codec chain of ``array``'s metadata (v3 codecs, or v2 filters + compressor)."""
    doc = array.metadata.to_json()
    return json.dumps({k: doc.get(k) for k in ("codecs", "filters", "compressor")},
                      sort_keys=True, default=str)


def _kind(store: Any) -> str:
    return type(store).__name__


def _region(shape: Sequence[int], unit: Sequence[int], nbytes: int, itemsize: int
            ) -> tuple[slice, ...]:
    """A region from the origin of whole ``unit`` multiples (last axes grown first) of
    about ``nbytes`` (at least one unit), clipped to ``shape``."""
    size = [max(1, min(u, n)) for u, n in zip(unit, shape, strict=True)]
    for d in reversed(range(len(size))):
        while size[d] < shape[d] and math.prod(size) * itemsize < nbytes:
            size[d] = min(shape[d], size[d] + max(1, unit[d]))
    return tuple(slice(0, n) for n in size)


def _median_seconds(fn: Callable[[], None]) -> float:
    """The median CPU seconds of ``fn()`` over this process's threads (the engine's
    work spread over its IO pool, as in a task, with what the threads cost each other):
    what it costs the cores, whatever share of them other work on the machine leaves at
    the moment (``cpu_share`` accounts for that)."""
    c0 = time.process_time()
    fn()  # warm-up: code paths, first touch of the buffers, never counted (a warm-up
    # of one 64 MiB chunk took 0.24 s where each later read took 0.09-0.13)
    first = time.process_time() - c0
    # a sample of large chunks (at least one is read) takes long enough once
    times = []
    for _ in range(REPEATS if first < LONG_SAMPLE_SECONDS else 1):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return statistics.median(times)


def _scratch_like(target: Array, shape: tuple[int, ...], where: str | None) -> Array:
    """An array with ``target``'s metadata (codecs, chunks) but ``shape``, in memory or in
    the directory ``where``."""
    probe = create_array(where, shape=shape, dtype=target.dtype, chunks=shape,
                         zarr_format=3)
    return Array(probe.store, probe.path, target.metadata.replace(shape=shape))


def _time_copy(source: Array | TransposedSource, target: Array) -> tuple[float, float]:
    """Seconds per decoded byte reading ``source``'s chunks and writing ``target``'s."""
    itemsize = np.dtype(target.dtype).itemsize
    region = _region(source.shape, source.chunks, SAMPLE_BYTES, itemsize)
    block = np.empty(tuple(s.stop for s in region), dtype=source.dtype)
    read = _median_seconds(lambda: read_into(source, region, block)) / max(1, block.nbytes)
    unit = tuple(target.layout.write_shape)
    out = _region(target.shape, unit, SAMPLE_BYTES, itemsize)
    shape = tuple(s.stop for s in out)
    values = np.resize(block.reshape(-1), math.prod(shape)).reshape(shape).astype(
        target.dtype, copy=False)
    where = tempfile.mkdtemp(prefix="chunkstore-calibrate-") \
        if _kind(target.store) == "LocalStore" else None
    try:
        scratch = _scratch_like(target, (shape[0] * (REPEATS + 1), *shape[1:]), where)
        write = _median_seconds(_fresh_writes(scratch, out, values))
    finally:
        if where is not None:
            shutil.rmtree(where, ignore_errors=True)
    return read, write / max(1, values.nbytes)


def _time_raw(dtype: Any, chunks: Sequence[int]) -> tuple[float, float]:
    """Seconds per byte reading and writing an uncompressed local array with ``chunks``
    (a plan's intermediate, ``Stage.raw_target``)."""
    itemsize = np.dtype(dtype).itemsize
    region = _region([2**62] * len(chunks), chunks, SAMPLE_BYTES, itemsize)
    shape = tuple(s.stop for s in region)
    values = np.random.default_rng(0).random(shape).astype(dtype)
    out = np.empty_like(values)
    where = tempfile.mkdtemp(prefix="chunkstore-calibrate-")
    try:
        raw = create_array(where, shape=(shape[0] * (REPEATS + 1), *shape[1:]), dtype=dtype,
                           chunks=tuple(chunks), zarr_format=3, compressors=None)
        write = _median_seconds(_fresh_writes(raw, region, values))
        read = _median_seconds(lambda: raw.get_basic_selection(region, out=out))
    finally:
        shutil.rmtree(where, ignore_errors=True)
    return read / values.nbytes, write / values.nbytes


def _fresh_writes(array: Array, region: tuple[slice, ...], values: np.ndarray
                  ) -> Callable[[], None]:
    """A function writing ``values`` at ``region`` moved down by its own height at each
    call (``array`` is ``REPEATS + 1`` times as tall): every timed write stores new
    objects, as a plan's tasks do. Rewriting the same ones would take the pages the
    file system just freed, where new files take fresh ones, which on some machines
    (a VM whose free memory went back to the host) cost the kernel 3-5x as much."""
    height = region[0].stop - region[0].start
    calls = iter(range(REPEATS + 1))

    def write() -> None:
        down = next(calls) * height
        array.write_region((slice(region[0].start + down, region[0].stop + down),
                            *region[1:]), values)
    return write


def _noop(i: int) -> int:
    return i


def _time_noops(client: Any) -> float:
    """Wall seconds per trivial task over ``OVERHEAD_TASKS`` of them (after a warm-up)."""
    if client is not None:
        client.gather(client.map(_noop, range(4), pure=False))
        t0 = time.perf_counter()
        client.gather(client.map(_noop, range(OVERHEAD_TASKS), pure=False))
    else:
        import dask
        tasks = [dask.delayed(_noop, pure=False)(i) for i in range(OVERHEAD_TASKS)]
        dask.compute(tasks[:4], scheduler="threads")
        t0 = time.perf_counter()
        dask.compute(tasks, scheduler="threads")
    return (time.perf_counter() - t0) / OVERHEAD_TASKS
