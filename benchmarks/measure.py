"""Extra benchmark helpers (on top of :mod:`benchmarks.common`): timed runs with an
RSS bookkeeping, directory sizes and the MB/s pivot table.

    >>> fmt(1234.5)
    '1234'
"""

from __future__ import annotations

import ctypes
import gc
import importlib.metadata
import math
import os
import platform
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psutil

MB = 1e6

#: The libraries the benchmarks compare, in the order tables and plots show them.
LIBRARIES = ("chunkstore", "zarr-python", "tensorstore", "numpy")
#: every peer a pivot table may show (zarrs: zarr-python with the zarrs codec pipeline,
#: only where a benchmark runs it)
PIVOT_LIBRARIES = ("chunkstore", "zarr-python", "zarrs", "tensorstore", "numpy",
                   "file-limit")

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


def fmt(value: Any) -> str:
    """Format a table cell: 3 significant digits for small floats, none for large ones."""
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


def throughput_pivot(rows: Sequence[dict], libraries: Sequence[str] = PIVOT_LIBRARIES,
                     ours: str = "chunkstore") -> str:
    """One line per case: MB/s and peak MB per library, and ``ours / peer`` speed ratios.

    A ratio > 1 means ``ours`` is faster than that peer on that case.
    """
    cases: dict[str, dict[str, dict]] = {}
    for r in rows:
        cases.setdefault(r["case"], {})[r["library"]] = r
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
        mine = libs.get(ours)
        for p in peers:
            if mine is not None and p in libs and mine["seconds"] > 0:
                line[f"{ours}/{p}"] = libs[p]["seconds"] / mine["seconds"]
        out.append(line)
    return markdown_table(out, cols)
