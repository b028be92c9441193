"""Shared helpers for the benchmarks: timing, peak memory, result rows and tables.

A result row is a plain dict (see :func:`row`) with the keys ``case``, ``library``,
``seconds`` and optionally ``mb_per_s``, ``peak_mb`` and ratio fields named
``ratio_vs_<library>`` (peer seconds / chunkstore seconds: > 1 means chunkstore is
faster). Every benchmark module exposes ``main(argv) -> list[dict]`` and a ``--tiny``
flag for CI.

    >>> t = best_of(lambda: sum(range(1000)), repeat=3)
    >>> rows = [row("sum", "python", t)]
    >>> print_table(rows, ["case", "library", "ms"])  # doctest: +SKIP
"""

from __future__ import annotations

import atexit
import gc
import math
import os
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import psutil

MB = 1e6

#: A result row: a plain dict with at least ``case``, ``library`` and ``seconds``.
Row = dict


def row(case: str, library: str, seconds: float, *, nbytes: int | None = None,
        peak_mb: float | None = None, **extra: Any) -> Row:
    """Build a result row; ``mb_per_s`` is derived from ``nbytes`` when given.

    >>> row("read", "numpy", 0.5, nbytes=10_000_000)["mb_per_s"]
    20.0
    """
    r: Row = {"case": case, "library": library, "seconds": float(seconds)}
    if nbytes is not None and seconds > 0:
        r["mb_per_s"] = nbytes / MB / seconds
    if peak_mb is not None:
        r["peak_mb"] = float(peak_mb)
    r.update(extra)
    return r


def best_of(fn: Callable[[], object], repeat: int = 5, *, warmup: int = 1,
            number: int = 1) -> float:
    """Seconds for one call of ``fn``: the best of ``repeat`` timings (after ``warmup`` calls).

    Each timing runs ``fn`` ``number`` times and divides, which keeps very fast calls
    (microseconds) above the timer resolution.

    >>> best_of(lambda: None, repeat=3) >= 0
    True
    """
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best


def auto_number(fn: Callable[[], object], target_s: float = 0.02, cap: int = 1000) -> int:
    """How many calls of ``fn`` make one timing last about ``target_s`` seconds."""
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    return int(min(cap, max(1, target_s // one)))


_SAMPLER = r"""
import os, select, sys
pid, interval = int(sys.argv[1]), float(sys.argv[2])
page, peak = os.sysconf("SC_PAGE_SIZE"), 0
while True:
    ready = select.select([sys.stdin], [], [], interval)[0]
    try:
        with open(f"/proc/{pid}/statm") as f:
            rss = int(f.read().split()[1]) * page
    except OSError:
        break
    peak = max(peak, rss)
    if ready:
        command = sys.stdin.readline()
        if not command:
            break
        if command.startswith("reset"):
            peak = rss
        sys.stdout.write(f"{peak}\n")
        sys.stdout.flush()
"""


class _RssMonitor:
    """This process's RSS sampled from another process (``/proc/<pid>/statm``): a
    sampling thread here would take turns at the GIL with the library measured, and
    slow down the libraries that run Python code (chunkstore, zarr-python) more than
    the others. Started once, on first use; gone with this process."""

    def __init__(self, interval: float) -> None:
        import subprocess
        import sys
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _SAMPLER, str(os.getpid()), str(interval)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        atexit.register(self.close)

    def close(self) -> None:
        """Stop the sampler (its input closed, it exits) and wait for it."""
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()
        try:
            self.proc.wait(timeout=5)
        except Exception:
            self.proc.kill()

    def ask(self, command: str) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())


_monitors: dict[float, _RssMonitor] = {}


def peak_rss_during(fn: Callable[[], object], interval: float = 0.01) -> tuple[object, float]:
    """Run ``fn`` while sampling this process's RSS; return ``(result, peak_mb_above_start)``.

    >>> _, mb = peak_rss_during(lambda: bytearray(10))
    >>> mb >= 0
    True
    """
    result, peak_mb, _, _ = measured(fn, interval)
    return result, peak_mb


def measured(fn: Callable[[], object], interval: float = 0.01
             ) -> tuple[object, float, float, float]:
    """``(result, peak_mb_above_start, wall_s, cpu_s)`` of one call of ``fn``: the times
    are of ``fn`` alone, not of the garbage collection and the sampler's setup around it.
    On Linux the RSS samples are taken by a separate process (``_RssMonitor``), elsewhere
    by a thread of this one."""
    proc = psutil.Process(os.getpid())
    gc.collect()
    start = proc.memory_info().rss
    if os.path.exists(f"/proc/{os.getpid()}/statm"):
        monitor = _monitors.get(interval) or _monitors.setdefault(interval,
                                                                   _RssMonitor(interval))
        monitor.ask("reset")
        c0, t0 = _cpu_seconds(), time.perf_counter()
        result = fn()
        wall, cpu = time.perf_counter() - t0, _cpu_seconds() - c0
        peak = max(monitor.ask("peak"), proc.memory_info().rss)
        return result, (peak - start) / MB, wall, cpu
    peak_box = [start]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak_box[0] = max(peak_box[0], proc.memory_info().rss)
            stop.wait(interval)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        c0, t0 = _cpu_seconds(), time.perf_counter()
        result = fn()
        wall, cpu = time.perf_counter() - t0, _cpu_seconds() - c0
    finally:
        stop.set()
        thread.join()
    peak_box[0] = max(peak_box[0], proc.memory_info().rss)
    return result, (peak_box[0] - start) / MB, wall, cpu


def _cpu_seconds() -> float:
    """CPU time (user + system) of this process so far."""
    t = os.times()
    return t.user + t.system


def peak_traced_during(fn: Callable[[], object]) -> tuple[object, float]:
    """Run ``fn`` under tracemalloc; return ``(result, peak_python_allocations_mb)``.

    Counts allocations made through Python's allocator (NumPy buffers included), not
    memory allocated by C libraries directly (e.g. tensorstore, HDF5).
    """
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    try:
        result = fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return result, max(0, peak - base) / MB


def add_ratios(rows: Iterable[Row], ours: str = "chunkstore") -> list[Row]:
    """Add ``ratio_vs_<library>`` (peer seconds / our seconds) to our row of each case.

    >>> rs = add_ratios([row("a", "chunkstore", 1.0), row("a", "numpy", 2.0)])
    >>> rs[0]["ratio_vs_numpy"]
    2.0
    """
    rows = list(rows)
    for libs in by_case(rows).values():
        mine = libs.get(ours)
        if mine is None or not mine["seconds"] > 0:
            continue
        for lib in libs:
            if lib != ours:
                mine[f"ratio_vs_{lib}"] = speed_ratio(libs, ours, lib)
    return rows


def by_case(rows: Iterable[Row]) -> dict[str, dict[str, Row]]:
    """case -> library -> its row (the last one of each pair)."""
    out: dict[str, dict[str, Row]] = {}
    for r in rows:
        out.setdefault(r["case"], {})[r["library"]] = r
    return out


def speed_ratio(libs: dict[str, Row], ours: str, peer: str) -> float | None:
    """``peer`` seconds / ``ours`` seconds among one case's rows ``libs`` (> 1: ``ours``
    is faster); None when either did not run or ours took no time."""
    mine, theirs = libs.get(ours), libs.get(peer)
    if mine is None or theirs is None or not mine["seconds"] > 0:
        return None
    return theirs["seconds"] / mine["seconds"]


def fmt(value: Any) -> str:
    """Format a table cell: 3 significant digits for small floats, none for large ones.

    >>> fmt(1234.5), fmt(0.12345), fmt(float("nan")), fmt([1, None])
    ('1234', '0.123', 'n/a', '1 / ')
    """
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return "n/a"
        return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    if isinstance(value, (list, tuple)):
        return " / ".join(fmt(v) for v in value)
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: Sequence[dict], columns: Sequence[str]) -> str:
    """A Markdown table of ``rows`` with the given columns (missing cells empty)."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(fmt(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def print_table(rows: Sequence[Row], columns: Sequence[str]) -> str:
    """Print ``rows`` as a Markdown table with the given columns; return the text.

    The pseudo-column ``ms`` shows ``seconds * 1000``. Missing values print empty.
    """
    shown = [r if "ms" in r or "seconds" not in r else {**r, "ms": r["seconds"] * 1e3}
             for r in rows]
    text = markdown_table(shown, columns)
    print(text, flush=True)
    return text


def pivot_table(rows: Sequence[Row], libraries: Sequence[str], ours: str = "chunkstore",
                ) -> str:
    """Print one line per case: ms per library and ``ours/peer`` speed ratios; return the text.

    A ratio > 1 means ``ours`` is faster than that peer.
    """
    peers = [lib for lib in libraries if lib != ours]
    cols = ["case"] + [f"{lib} ms" for lib in libraries] + [f"x vs {p}" for p in peers]
    out = []
    for case, libs in by_case(rows).items():
        line: Row = {"case": case}
        for lib in libraries:
            line[f"{lib} ms"] = libs[lib]["seconds"] * 1e3 if lib in libs else None
        for p in peers:
            line[f"x vs {p}"] = speed_ratio(libs, ours, p)
        out.append(line)
    return print_table(out, cols)
