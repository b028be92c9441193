"""``chunkstore demo``: the main job, end to end on a local store and a local Dask cluster.

Builds a synthetic array (4 GiB by default, 16 MiB with ``--small``), shows its info and
the hierarchy, transposes and rechunks it within a memory bound on a
``distributed.LocalCluster``, checks the results against the source, verifies every
chunk and prints timings. The data goes to a temporary directory that is removed at the
end, unless ``--keep`` or ``--dir DIR`` is given; either way the last lines say where it is.
The full demo needs about 7.6 GB of free disk (its three arrays, compressed) and takes 3-4
minutes on 2 cores; it checks the free space first. The cluster's dashboard link is
printed while it runs (with bokeh installed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from chunkstore.api.creation import create_array
from chunkstore.api.opening import open_array, open_group
from chunkstore.api.verify import verify
from chunkstore.cli.args import bytes_arg
from chunkstore.cli.errors import CLIError
from chunkstore.cli.nodes import array_table
from chunkstore.cli.rechunk import run_plan
from chunkstore.progress import TerminalProgress
from chunkstore.sizes import format_bytes

#: the workers' scratch directory inside the demo directory (always removed)
SCRATCH = "dask-scratch"
#: side of the square float32 array: 4 GiB, or 16 MiB with --small
SIDE, SMALL_SIDE = 32768, 2048
#: free disk the demo needs: its three arrays (source, transposed, rechunked) as stored
#: (blosc-lz4 keeps 0.58 of the field's bytes at full size: 3 x 4 GiB -> 7.46 GB; 36 MB
#: with --small), rounded up
DISK_NEEDED = {SIDE: 7_600_000_000, SMALL_SIDE: 40_000_000}


def disk_needed(small: bool) -> int:
    """Bytes of free disk the demo needs (``DISK_NEEDED``)."""
    return DISK_NEEDED[SMALL_SIDE if small else SIDE]


def check_free_space(directory: str, small: bool) -> None:
    """A CLIError when the file system that will hold ``directory`` has less free space
    than the demo needs (checked before anything is written)."""
    existing = os.path.abspath(directory)
    while not os.path.isdir(existing) and os.path.dirname(existing) != existing:
        existing = os.path.dirname(existing)
    free = shutil.disk_usage(existing).free
    needed = disk_needed(small)
    if free < needed:
        hint = ("" if small else f", or run the small demo: chunkstore demo --small (about "
                f"{format_bytes(disk_needed(True))})")
        raise CLIError(f"not enough free disk in {existing}: {format_bytes(free)} free, the "
                       f"demo needs about {format_bytes(needed)}; free some space or pass "
                       f"--dir DIR on a larger disk{hint}")


def _timed(label: str, timings: dict[str, float], fn: Callable[[], Any]) -> Any:
    t0 = time.perf_counter()
    result = fn()
    timings[label] = time.perf_counter() - t0
    return result


def _fill(a: Any, rows: int, progress: TerminalProgress) -> None:
    """Write a smooth synthetic field in bands of chunk rows (bounded memory)."""
    bar = progress.step("write", "rows")
    n, m = a.shape
    x = np.arange(m, dtype="f4")
    for start in range(0, n, rows):
        y = np.arange(start, min(n, start + rows), dtype="f4")[:, None]
        a[start:start + len(y)] = np.sin(y / 97.0) * np.cos(x / 53.0) + y * 1e-4
        bar(start + len(y), n, (start + len(y)) * m * 4)


def _same(a: Any, b: Any, transpose: bool, rows: int) -> bool:
    for start in range(0, a.shape[0], rows):
        part = a[start:start + rows]
        other = b[:, start:start + rows].T if transpose else b[start:start + rows]
        if not np.array_equal(part, other):
            return False
    return True


def _directory_size(root: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(root)
               for f in files)


def _run(root: str, small: bool, workers: int, max_mem: int | str,
         progress: TerminalProgress) -> bool:
    import dask

    from chunkstore.cli.cluster import local_cluster
    from chunkstore.dask import TransposedSource, parse_bytes, rechunk

    side = SMALL_SIDE if small else SIDE  # 16 MiB or 4 GiB of float32
    chunks = (256, 256) if small else (1024, 1024)
    rows = chunks[0] * 4
    store_path = os.path.join(root, "demo.zarr")
    gib = side * side * 4 / 2**30
    print(f"chunkstore demo: a {side}x{side} float32 array ({gib:.2f} GiB) in {store_path}, "
          f"chunks {chunks}, on a LocalCluster of {workers} workers\n")
    timings: dict[str, float] = {}
    source = create_array(store_path, "field", shape=(side, side), chunks=chunks, dtype="f4",
                          dimension_names=["y", "x"], overwrite=True,
                          attributes={"description": "smooth synthetic field"})
    _timed("write", timings, lambda: _fill(source, rows, progress))
    print(array_table(source, store_path), "\n")
    scratch = {"temporary-directory": os.path.join(root, SCRATCH)}
    with dask.config.set(scratch), local_cluster(workers, sys.stdout) as client:
        plan_t = rechunk(TransposedSource(source, (1, 0)), chunks[::-1], store=store_path,
                         path="field_T", max_mem=max_mem, overwrite=True)
        transposed = _timed("transpose", timings,
                            lambda: run_plan(plan_t, progress, client, "transpose "))
        plan_c = rechunk(source, (side, max(1, chunks[1] // 16)), store=store_path,
                         path="field_columns", max_mem=max_mem, overwrite=True)
        columns = _timed("rechunk", timings,
                         lambda: run_plan(plan_c, progress, client, "rechunk "))
    print(open_group(store_path, mode="r").tree())
    ok_t = _timed("check", timings, lambda: _same(
        source, open_array(store_path, mode="r", path="field_T"), True, rows))
    ok_c = _same(source, columns, False, rows)
    field = open_array(store_path, mode="r", path="field")
    report = _timed("verify", timings, lambda: verify(field,
                                                      progress=progress.step("verify", "keys")))
    print("\nsummary")
    for label, seconds in timings.items():
        rate = (f"  ({gib * 1024 / seconds:.0f} MiB/s)"
                if label in ("write", "transpose", "rechunk") else "")
        print(f"  {label:<10} {seconds:7.2f} s{rate}")
    print(f"  transpose matches: {ok_t}; rechunk matches: {ok_c}; verify: "
          f"{report.summary()}")
    print(f"  transposed chunks {transposed.chunks}, rechunked chunks {columns.chunks}, "
          f"max_mem {format_bytes(parse_bytes(max_mem))} per task")
    return ok_t and ok_c and report.ok


def run_demo(directory: str | None = None, small: bool = False, workers: int = 2,
             max_mem: int | str = "256MiB", keep: bool = False) -> int:
    """Run the demo; returns the exit status. The data is removed at the end unless
    ``keep`` or a ``directory`` is given."""
    progress = TerminalProgress("demo")
    keep = keep or directory is not None
    check_free_space(directory or tempfile.gettempdir(), small)
    root = directory or tempfile.mkdtemp(prefix="chunkstore-demo-")
    ok = False
    try:
        ok = _run(root, small, workers, max_mem, progress)
    finally:
        shutil.rmtree(os.path.join(root, SCRATCH), ignore_errors=True)
        if keep:
            print(f"\nthe demo data is in {root} ({format_bytes(_directory_size(root))}); "
                  f"remove it with: rm -rf {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
            print(f"\nremoved the demo data ({root}); pass --keep or --dir DIR to keep it")
    progress.summary("all checks passed" if ok else "a check FAILED")
    return 0 if ok else 1


def cmd_demo(args: argparse.Namespace) -> int:
    """Run the demo with the command's options."""
    return run_demo(args.dir, small=args.small, workers=args.workers, max_mem=args.max_mem,
                    keep=args.keep)


def register(sub: Any) -> None:
    """Add ``demo`` to the subcommands ``sub``."""
    p = sub.add_parser("demo", help="the main job: write, transpose, rechunk and verify a large "
                       "array on a local store and a local Dask cluster",
                       description=__doc__.split("\n\n", 1)[1])
    p.add_argument("--small", action="store_true",
                   help="a 16 MiB array instead of 4 GiB, runs in seconds and needs about 40 MB "
                   "of disk (default: off: about 7.6 GB of disk, 3-4 minutes)")
    p.add_argument("--dir", default=None, metavar="DIR",
                   help="put the data in DIR and keep it (default: a temporary directory, "
                   "removed at the end)")
    p.add_argument("--keep", action="store_true",
                   help="keep the data of the temporary directory (default: remove it)")
    p.add_argument("--workers", type=int, default=2, metavar="N",
                   help="worker processes of the local cluster (default: %(default)s)")
    p.add_argument("--max-mem", type=bytes_arg, default="256MiB", metavar="BYTES",
                   help="memory bound per transpose/rechunk task (default: %(default)s)")
    p.set_defaults(func=cmd_demo)
