"""Run every benchmark and write a Markdown report with a throughput plot.

    python -m benchmarks.run_all                      # full sizes; also updates docs/benchmarks/
    python -m benchmarks.run_all --tiny --out /tmp/r  # seconds, for CI
    python -m benchmarks.run_all --only core,rechunk  # a subset

Each ``benchmarks/bench_<name>.py`` that exists is imported and its ``main(argv)`` run
(``--tiny`` passed on); a missing module is noted, a failing one is reported with its
error and the others still run. Writes ``<out>/REPORT.md`` (machine description, one
table per benchmark), ``<out>/throughput.png`` (MB/s per case, chunkstore vs
zarr-python vs tensorstore vs numpy) and ``<out>/results.json``.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import math
import shutil
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import markdown_table
from benchmarks.measure import (
    LIBRARIES,
    MB,
    canonical_library,
    machine_description,
    throughput_pivot,
)

MODULES = ("bench_core", "bench_matrix", "bench_indexing", "bench_s3", "bench_cache",
           "bench_sharding", "bench_shard_tiny", "bench_commit", "bench_rechunk")
REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs" / "benchmarks"

_SECONDS_KEYS = ("seconds", "wall_s", "time_s", "elapsed_s", "elapsed")
_LIBRARY_KEYS = ("library", "method", "lib", "impl")


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def normalize(raw: dict, benchmark: str) -> dict:
    """A row with the common keys ``benchmark, case, library, seconds, mb_per_s, peak_mb``.

    Rows from different modules spell things differently (``method`` for ``library``,
    ``wall_s`` for ``seconds``, lists of per-worker peaks); missing values become None.

    >>> normalize({"case": "a", "method": "zarr", "wall_s": 2, "nbytes_mb": 10}, "x")["mb_per_s"]
    5.0
    """
    lib = next((raw[k] for k in _LIBRARY_KEYS if raw.get(k) is not None), "?")
    case = str(raw.get("case", "?"))
    op = raw.get("op") or raw.get("operation")
    if op and str(op) not in case:
        case = f"{case} {op}"
    seconds = next((s for k in _SECONDS_KEYS if (s := _number(raw.get(k))) is not None), None)
    mbps = _number(raw.get("mb_per_s"))
    if mbps is None and seconds:
        size = _number(raw.get("nbytes"))
        size = size / MB if size is not None else _number(raw.get("nbytes_mb"))
        if size is not None:
            mbps = size / seconds
    peak = raw.get("peak_mb", raw.get("peak_rss_mb"))
    if isinstance(peak, (list, tuple)):
        peak = max((p for p in map(_number, peak) if p is not None), default=None)
    return {"benchmark": benchmark, "case": case, "library": canonical_library(str(lib)),
            "seconds": seconds, "mb_per_s": mbps, "peak_mb": _number(peak)}


def run_module(name: str, argv: list[str]) -> tuple[str, list[dict] | None, str]:
    """Import ``benchmarks.<name>`` and run its ``main``: (status, rows, message)."""
    try:
        module = importlib.import_module(f"benchmarks.{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"benchmarks.{name}":
            return "missing", None, f"benchmarks/{name}.py does not exist (yet)"
        return "failed", None, traceback.format_exc(limit=3)
    except Exception:
        return "failed", None, traceback.format_exc(limit=3)
    t0 = time.perf_counter()
    try:
        rows = module.main(list(argv))
    except KeyboardInterrupt:
        raise
    except BaseException:  # SystemExit from argparse included: report, keep going
        return "failed", None, traceback.format_exc(limit=5)
    rows = [dict(r) for r in (rows or []) if isinstance(r, dict)]
    return "ok", rows, f"{len(rows)} rows in {time.perf_counter() - t0:.1f} s"


def raw_table(rows: Sequence[dict]) -> str:
    """Every field of a module's own rows, in order of first appearance."""
    cols: list[str] = []
    for r in rows:
        cols += [k for k in r if k not in cols]
    front = [c for c in ("case", "op", "library", "method") if c in cols]
    return markdown_table(rows, front + [c for c in cols if c not in front])


def plot(results: dict[str, list[dict]], path: Path) -> bool:
    """Grouped bars of MB/s per case (log scale), one panel per benchmark; False if no data."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = []
    for bench, rows in results.items():
        cases: dict[str, dict[str, float]] = {}
        for r in rows:
            if r["library"] in LIBRARIES and r["mb_per_s"]:
                cases.setdefault(r["case"], {})[r["library"]] = r["mb_per_s"]
        if cases:
            panels.append((bench, cases))
    if not panels:
        return False
    width = max(8.0, 0.9 * max(len(c) for _, c in panels) + 2)
    fig, axes = plt.subplots(len(panels), 1, figsize=(width, 4.2 * len(panels)), squeeze=False)
    colors = {"chunkstore": "#1f77b4", "zarr-python": "#ff7f0e", "tensorstore": "#2ca02c",
              "numpy": "#7f7f7f"}
    bar = 0.8 / len(LIBRARIES)
    for ax, (bench, cases) in zip(axes[:, 0], panels, strict=True):
        names = list(cases)
        for k, lib in enumerate(LIBRARIES):
            xs = [i + (k - (len(LIBRARIES) - 1) / 2) * bar for i in range(len(names))]
            ys = [cases[c].get(lib, 0.0) for c in names]
            if any(ys):
                ax.bar(xs, ys, bar, label=lib, color=colors[lib])
        ax.set_yscale("log")
        ax.set_ylabel("MB/s (log)")
        ax.set_title(bench)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=25, ha="right", fontsize=8)
        ax.grid(axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.suptitle("Throughput, higher is better (decoded MB per second)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def write_report(out: Path, results: dict[str, list[dict]], raw: dict[str, list[dict]],
                 notes: dict[str, tuple[str, str]], tiny: bool, has_plot: bool) -> Path:
    """Write ``REPORT.md`` into ``out`` and return its path."""
    machine = machine_description()
    lines = ["# chunkstore benchmark report", "",
             f"Generated {datetime.datetime.now().isoformat(timespec='seconds')} by "
             f"`python -m benchmarks.run_all{' --tiny' if tiny else ''}`"
             + (" (**tiny sizes: smoke test, not representative**)" if tiny else "") + ".", "",
             "## Machine", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in machine.items()]
    lines += ["", "How to read: MB/s is decoded (in-memory) megabytes per second of wall time; "
              "`chunkstore/<peer>` = peer seconds / chunkstore seconds (> 1: chunkstore is "
              "faster). Local-store reads right after a write come from the warm OS page "
              "cache. Peak MB is RSS growth during the operation.", ""]
    if has_plot:
        lines += ["![throughput per case](throughput.png)", ""]
    lines += ["## Modules", "", "| module | status | note |", "|---|---|---|"]
    for name, (status, msg) in notes.items():
        short = msg.strip().splitlines()[-1] if msg.strip() else ""
        lines.append(f"| {name} | {status} | {short.replace('|', '/')} |")
    for name, rows in results.items():
        lines += ["", f"## {name}", ""]
        if any(r["mb_per_s"] for r in rows):
            lines += ["Throughput per case:", "", throughput_pivot(rows), ""]
        lines += ["All measured fields:", "", raw_table(raw[name]), ""]
    failed = {n: m for n, (s, m) in notes.items() if s == "failed"}
    for name, msg in failed.items():
        lines += ["", f"## {name}: failed", "", "```", msg.strip()[-3000:], "```"]
    path = out / "REPORT.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def main(argv: list[str] | None = None) -> list[dict]:
    """Run the benchmarks, write the report; return all normalized rows."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="small sizes (CI)")
    parser.add_argument("--out", default="bench-out/report", help="report directory")
    parser.add_argument("--only", default=None,
                        help="comma-separated modules, e.g. core,rechunk (default: all)")
    parser.add_argument("--no-docs", action="store_true",
                        help="do not copy the report into docs/benchmarks/")
    args = parser.parse_args(argv)
    names = list(MODULES)
    if args.only:
        wanted = {n.strip() if n.strip().startswith("bench_") else f"bench_{n.strip()}"
                  for n in args.only.split(",") if n.strip()}
        names = [n for n in names if n in wanted] + sorted(wanted - set(MODULES))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    notes: dict[str, tuple[str, str]] = {}
    results: dict[str, list[dict]] = {}
    raw: dict[str, list[dict]] = {}
    for name in names:
        print(f"\n=== {name} ===", flush=True)
        status, rows, msg = run_module(name, ["--tiny"] if args.tiny else [])
        notes[name] = (status, msg)
        print(f"=== {name}: {status}: {msg.strip().splitlines()[-1] if msg.strip() else ''}",
              flush=True)
        if rows is not None:
            raw[name] = rows
            results[name] = [normalize(r, name) for r in rows]
    has_plot = plot(results, out / "throughput.png")
    report = write_report(out, results, raw, notes, args.tiny, has_plot)
    every = [r for rows in results.values() for r in rows]
    (out / "results.json").write_text(json.dumps(
        {"machine": machine_description(), "modules": {n: s for n, (s, _) in notes.items()},
         "rows": raw}, indent=2, default=str))
    print(f"\nreport: {report}" + (f", plot: {out / 'throughput.png'}" if has_plot else ""))
    if not args.tiny and not args.no_docs and out.resolve() != DOCS.resolve():
        DOCS.mkdir(parents=True, exist_ok=True)
        shutil.copy2(report, DOCS / "REPORT.md")
        if has_plot:
            shutil.copy2(out / "throughput.png", DOCS / "throughput.png")
        print(f"copied into {DOCS}")
    return every


if __name__ == "__main__":
    main()
