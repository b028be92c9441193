"""What ``describe()`` predicts against what a run measures: peak RSS per worker and wall
time of bench_rechunk's rechunk and transpose cases on a LocalCluster(2 workers x 1
thread, processes), with the error in %.

    python -m benchmarks.rechunk_predict                 # 1 GiB arrays, 3 runs each
    python -m benchmarks.rechunk_predict --gib 0.25 --transpose-side 400 --repeats 1

Cases as ``bench_rechunk.cases_for``: the (side, side) float32 array chunked (side, 32)
rechunked to (32, side), and the side^3 float32 array chunked (side, side, 16)
transposed to (16, side, side) chunks, max_mem 512 MB. Each run is a fresh process and
a fresh cluster (``rechunk_measure.run_on_cluster``: each worker's RSS sampled by pid
every 0.1 s from outside, as the nanny sees it): the plan is described on the cluster
(its copy rates and per-task overhead measured in that process, so on the machine's
load of the moment), then executed; the wall time is ``execute()``'s. The medians of the
runs are printed with each run's figures. The bound must hold: a measured peak above
the prediction is flagged.

Before each run the previous output is removed and the machine left alone for
``--settle`` seconds (15). On a VM whose freed memory goes back to the host, pages freed
a moment ago are cheap to write to (0.36 ns/B of kernel time against 1.5-1.7 for other
pages, measured here): a calibration right after removing gigabytes measures that cheap
state, which the run's later gigabytes do not get (the rechunk's stage 1 predicted
2.5-2.9 s where it took about 6). After 10 s or more both see the same pages.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import math
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.bench_rechunk import cases_for, settle
from benchmarks.rechunk_measure import in_child, make_source, run_on_cluster

MiB = 2**20


def predict_and_run(src: Path, dst: Path, target: tuple, max_mem: int,
                    axes: tuple[int, ...] | None) -> dict:
    """On the default client: the plan's description, then its execution timed."""
    import chunkstore as cs
    import chunkstore.dask as csd
    source = cs.open_array(str(src), mode="r")
    if axes is not None:
        source = csd.TransposedSource(source, axes)
    plan = csd.rechunk(source, target, str(dst), max_mem=max_mem)
    t0 = time.perf_counter()
    desc = plan.describe()
    describe_s = time.perf_counter() - t0
    print(desc, flush=True)
    t0 = time.perf_counter()
    plan.execute()
    return {"execute_s": time.perf_counter() - t0, "describe_s": describe_s,
            "predicted_worker": desc["peak_worker_memory"],
            "predicted_wall": desc["predicted_wall_seconds"],
            "stage_walls": [s["predicted_wall_seconds"] for s in desc["stages"]],
            "rates": desc["rates"], "ntasks": desc["ntasks"], "stages": len(desc["stages"])}


def one(src: Path, dst: Path, target: tuple, max_mem: int, axes: tuple[int, ...] | None
        ) -> dict:
    """One measured run (in a child process: its calibration is its own)."""
    return run_on_cluster(functools.partial(predict_and_run, src, dst, target, max_mem, axes),
                          max_mem)


def _pct(predicted: float, measured: float) -> float:
    return 100.0 * (predicted - measured) / measured


def main(argv: list[str] | None = None) -> list[dict]:
    """Run each case ``--repeats`` times; print predicted vs measured and the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--transpose-side", type=int, default=0,
                        help="side of the transpose cube (default: about --gib GiB)")
    parser.add_argument("--max-mem", default="512MB")
    parser.add_argument("--cases", default="rechunk,transpose")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--settle", type=float, default=15.0,
                        help="seconds left alone before each run (see the docstring)")
    args = parser.parse_args(argv)
    from chunkstore.sizes import parse_bytes
    side = args.transpose_side or max(16, round((args.gib * 2**30 / 4) ** (1 / 3) / 16) * 16)
    cases = cases_for(False, args.gib, side, parse_bytes(args.max_mem))
    work = Path(args.workdir or tempfile.mkdtemp(prefix="rechunk-predict-"))
    here = importlib.import_module("benchmarks.rechunk_predict")
    summary = []
    try:
        for case in args.cases.split(","):
            shape, chunks, target, axes, max_mem = cases[case]
            src = work / f"{case}-src.zarr"
            if not (src / ".zarray").exists():
                make_source(src, shape, chunks)
            runs = []
            for i in range(args.repeats):
                dst = work / f"{case}-dst.zarr"
                shutil.rmtree(dst, ignore_errors=True)
                settle(args.settle)
                r = in_child(functools.partial(here.one, src, dst, target, max_mem, axes))
                shutil.rmtree(dst, ignore_errors=True)
                if not r or "error" in r:
                    print(f"{case} run {i + 1} failed: {r}", flush=True)
                    continue
                peak = max(r["peak_rss_mb"]) * 1e6
                r["peak"] = peak
                runs.append(r)
                print(f"{case} run {i + 1}: load {r['load_avg'][0]:.1f}-{r['load_avg'][1]:.1f}; "
                      f"peak per worker {'/'.join(f'{p * 1e6 / MiB:.0f}' for p in r['peak_rss_mb'])}"
                      f" MiB, predicted {r['predicted_worker'] / MiB:.0f} MiB "
                      f"({_pct(r['predicted_worker'], peak):+.1f}%); wall {r['execute_s']:.1f} s, "
                      f"predicted {r['predicted_wall']:.1f} s "
                      f"({_pct(r['predicted_wall'], r['execute_s']):+.1f}%); stages "
                      f"{[round(s, 1) for s in r['stage_walls']]} s; {r['ntasks']} tasks; worker CPU "
                      f"{r['cpu_s']:.1f} s; describe {r['describe_s']:.2f} s",
                      flush=True)
            if not runs:
                continue
            med = {k: statistics.median(r[k] for r in runs)
                   for k in ("peak", "predicted_worker", "execute_s", "predicted_wall")}
            row = {"case": case, "shape": shape, "runs": len(runs),
                   "bound_held": all(r["predicted_worker"] >= r["peak"] for r in runs),
                   "load": [r["load_avg"] for r in runs], **med,
                   "peak_error_pct": _pct(med["predicted_worker"], med["peak"]),
                   "wall_error_pct": _pct(med["predicted_wall"], med["execute_s"])}
            summary.append(row)
        print("\n| case | runs | peak per worker MiB: measured | predicted | error | "
              "wall s: measured | predicted | error | bound held | load (1-min) |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in summary:
            loads = ", ".join(f"{a:.1f}-{b:.1f}" for a, b in r["load"])
            print(f"| {r['case']} {r['shape']} | {r['runs']} | {r['peak'] / MiB:.0f} | "
                  f"{r['predicted_worker'] / MiB:.0f} | {r['peak_error_pct']:+.1f}% | "
                  f"{r['execute_s']:.1f} | {r['predicted_wall']:.1f} | "
                  f"{r['wall_error_pct']:+.1f}% | {r['bound_held']} | {loads} |")
        print(f"\n{os.cpu_count()} cores; medians of the runs "
              f"(math: {math.prod(cases['rechunk'][0]) * 4 / 2**30:.2f} GiB rechunk)")
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    return summary


if __name__ == "__main__":
    main()
