"""Extra benchmark helpers (on top of :mod:`benchmarks.common`): timed runs with an
RSS bookkeeping, directory sizes, the MB/s pivot table and the end of a run
(:func:`report`: ratios, tables, ``bench-out/<name>.json``).

    >>> canonical_library("ts")
    'tensorstore'
"""

from __future__ import annotations

import ctypes
import gc
import importlib.metadata
import json
import os
import platform
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from benchmarks.common import add_ratios, by_case, markdown_table, speed_ratio

MB = 1e6
#: where benchmarks write their rows (relative to the working directory)
OUT = Path("bench-out")

#: The libraries the benchmarks compare, in the order tables and plots show them.
LIBRARIES = ("chunkstore", "zarr-python", "tensorstore", "numpy")
#: every peer a pivot table may show (zarrs: zarr-python with the zarrs codec pipeline,
#: only where a benchmark runs it)
PIVOT_LIBRARIES = ("chunkstore", "zarr-python", "zarrs", "tensorstore", "numpy",
                   "file-limit", "numcodecs-alone")

_ALIASES = {"zarr": "zarr-python", "zarr_python": "zarr-python", "zarr-python": "zarr-python",
            "zarr3": "zarr-python", "ts": "tensorstore", "np": "numpy",
            "cs": "chunkstore"}


def canonical_library(name: str) -> str:
    """Map spellings such as ``zarr`` or ``ts`` onto the names in :data:`LIBRARIES`.

    >>> canonical_library("zarr")
    'zarr-python'
    """
    key = str(name).strip()
    return _ALIASES.get(key.lower(), key)


def release_memory() -> None:
    """Collect garbage and hand freed heap pages back to the OS (glibc), so that an RSS
    baseline taken right after is not inflated by the previous case."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def settle_memory(nbytes: int) -> None:
    """Make ``nbytes`` of free memory now, untimed: pages are touched and freed again.

    On a machine whose RAM the page cache has filled (after gigabytes of benchmark
    files), the first operation that allocates a large output pays for reclaiming the
    cache (1 GiB: about a second of system time); the operations after it get the pages
    it freed. Without this, whichever library runs first after a phase of writes is
    charged for it."""
    if nbytes > 0:
        block = np.ones(nbytes, np.uint8)
        del block


def dir_bytes(path: str | os.PathLike) -> int:
    """Total size of the regular files under ``path`` (0 if it does not exist)."""
    p = Path(path)
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def version_of(dist: str) -> str:
    """Installed version of a distribution, or ``"-"`` when it is not installed."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "-"


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo, or ``platform.processor()``."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_description() -> dict[str, str]:
    """CPU, RAM, OS, Python and the versions of the benchmarked libraries."""
    info = {
        "CPU": f"{cpu_model()} ({os.cpu_count()} logical CPUs visible)",
        "RAM": f"{psutil.virtual_memory().total / 2**30:.1f} GiB",
        "OS": f"{platform.system()} {platform.release()}",
        "Python": sys.version.split()[0],
    }
    for dist in ("chunkstore", "zarr", "tensorstore", "numpy", "numcodecs", "dask",
                 "distributed", "fsspec", "s3fs", "matplotlib"):
        info[dist] = version_of(dist)
    return info


def throughput_pivot(rows: Sequence[dict], libraries: Sequence[str] = PIVOT_LIBRARIES,
                     ours: str = "chunkstore") -> str:
    """One line per case: MB/s and peak MB per library, and ``ours / peer`` speed ratios.

    A ratio > 1 means ``ours`` is faster than that peer on that case.
    """
    cases = by_case(rows)
    present = [lib for lib in libraries if any(lib in libs for libs in cases.values())]
    peers = [lib for lib in present if lib != ours]
    cols = (["case"] + [f"{lib} MB/s" for lib in present]
            + [f"{ours}/{p}" for p in peers] + [f"{lib} peak MB" for lib in present])
    out = []
    for case, libs in cases.items():
        line: dict[str, Any] = {"case": case}
        for lib in present:
            if lib in libs:
                line[f"{lib} MB/s"] = libs[lib].get("mb_per_s")
                line[f"{lib} peak MB"] = libs[lib].get("peak_mb")
        for p in peers:
            line[f"{ours}/{p}"] = speed_ratio(libs, ours, p)
        out.append(line)
    return markdown_table(out, cols)


def report(rows: Iterable[dict], name: str,
           *tables: Callable[[list[dict]], str]) -> list[dict]:
    """The end of a benchmark run: add chunkstore's ratios to ``rows``
    (:func:`~benchmarks.common.add_ratios`), print each of ``tables`` made of them (by
    default :func:`throughput_pivot`) and write them to ``bench-out/<name>.json``;
    returns the rows."""
    rows = add_ratios(rows)
    for table in tables or (throughput_pivot,):
        print()
        print(table(rows), flush=True)
    OUT.mkdir(exist_ok=True)
    (OUT / f"{name}.json").write_text(json.dumps(rows, indent=2))
    return rows
