"""Bulk write/read matrix of issue 2: data sets x chunk sizes x codecs x stores.

    python -m benchmarks.bench_matrix                  # ~1 GiB per data set (long)
    python -m benchmarks.bench_matrix --size-mb 256    # a quicker pass
    python -m benchmarks.bench_matrix --tiny           # seconds, for CI

Data sets: float64 noise, int32 ramp, smooth float32 field, each ~``--size-mb`` MB
(2-D). Chunks of 256 KiB, 1 MiB, 4 MiB and 16 MiB; codecs none, blosc-lz4+shuffle,
blosc-zstd+shuffle, zstd (level 3); a local directory and an in-memory store.
chunkstore, zarr-python 3, zarr-python + zarrs (the Rust codec pipeline) and tensorstore
(zarr3 driver) write and read every cell
in this one process, through the same adapters as ``bench_core`` (every read is
compared with the source); np.save/np.load of the whole array is the floor, once per
data set and store. Prints MB/s per cell, chunkstore's ratio to each peer (peer seconds
/ chunkstore seconds: > 1 means chunkstore is faster) and to the best of zarrs and
tensorstore in that cell.
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.bench_core import Case, make_data, run_case
from benchmarks.common import markdown_table
from benchmarks.measure import report

DATA_DTYPES = {"noise": "float64", "ramp": "int32", "smooth": "float32"}
CHUNK_KIB = (256, 1024, 4096, 16384)
TINY_CHUNK_KIB = (64,)
MATRIX_CODECS = ("raw", "lz4", "blosc-zstd", "zstd")
PEERS = ("zarr-python", "zarrs", "tensorstore")
#: the peers issue 12 measures chunkstore against: the faster of them in each cell
BEST_OF = ("zarrs", "tensorstore")


def array_shape(size_mb: float, itemsize: int) -> tuple[int, int]:
    """A (rows, cols) shape of about ``size_mb`` MB with power-of-two sides."""
    elements = size_mb * 2**20 / itemsize
    rows = 2 ** max(1, round(math.log2(elements) / 2))
    return rows, max(1, int(elements // rows))


def chunk_shape(kib: int, itemsize: int, shape: tuple[int, int]) -> tuple[int, int]:
    """A near-square chunk of ``kib`` KiB (clipped to the array)."""
    elements = kib * 1024 // itemsize
    rows = 2 ** round(math.log2(elements) / 2)
    return min(rows, shape[0]), min(elements // rows, shape[1])


def matrix_cases(size_mb: float, chunk_kib: tuple[int, ...], stores: list[str]) -> list[Case]:
    out = []
    for data, dtype in DATA_DTYPES.items():
        itemsize = np.dtype(dtype).itemsize
        shape = array_shape(size_mb, itemsize)
        for store in stores:
            for kib in chunk_kib:
                for codec in MATRIX_CODECS:
                    out.append(Case(f"{data} {kib}KiB {codec} {store}", shape,
                                    chunk_shape(kib, itemsize, shape), dtype, codec, store,
                                    data=data))
    return out


def best_ratio(row: dict) -> float | None:
    """chunkstore's ratio to the fastest of ``BEST_OF`` that ran the cell (None: none)."""
    ratios = [row[f"ratio_vs_{p}"] for p in BEST_OF if row.get(f"ratio_vs_{p}") is not None]
    return min(ratios) if ratios else None


def summary(rows: list[dict]) -> str:
    """Per operation and peer (and the best of ``BEST_OF``): min / median / max of
    chunkstore's ratio, and the worst cell."""
    out = []
    for op in ("write", "read"):
        ours = [r for r in rows if r["library"] == "chunkstore" and r["case"].endswith(op)]
        for peer in (*PEERS, "best"):
            ratios = [(best_ratio(r) if peer == "best" else r.get(f"ratio_vs_{peer}"),
                       r["case"]) for r in ours]
            ratios = [(v, case) for v, case in ratios if v is not None]
            if not ratios:
                continue
            values = [v for v, _ in ratios]
            worst = min(ratios)
            name = f"best of {' / '.join(BEST_OF)}" if peer == "best" else peer
            out.append({"op": op, "vs": name, "min": min(values),
                        "median": statistics.median(values), "max": max(values),
                        "worst cell": worst[1]})
    return markdown_table(out, ["op", "vs", "min", "median", "max", "worst cell"])


def cell_table(rows: list[dict], libraries: list[str]) -> str:
    """One line per cell and operation: MB/s of each library and chunkstore's ratios."""
    libs = [lib for lib in libraries if lib != "numpy"]
    peers = [p for p in PEERS if p in libs]
    head = ["case"] + [f"{lib} MB/s" for lib in libs] + [f"x {p}" for p in peers] + ["x best"]
    by_case: dict[str, dict[str, dict]] = {}
    for r in rows:
        by_case.setdefault(r["case"], {})[r["library"]] = r
    out = []
    for case, per_lib in by_case.items():
        if "chunkstore" not in per_lib:
            continue
        ours = per_lib["chunkstore"]
        line = {f"{lib} MB/s": per_lib[lib]["mb_per_s"] for lib in libs if lib in per_lib}
        line.update({f"x {p}": ours.get(f"ratio_vs_{p}") for p in peers})
        out.append({"case": case, **line, "x best": best_ratio(ours)})
    return markdown_table(out, head)


def main(argv: list[str] | None = None) -> list[dict]:
    """Run the matrix; return one row per (cell + operation, library)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="2 MB arrays, small chunks (CI)")
    parser.add_argument("--size-mb", type=float, default=1024.0)
    parser.add_argument("--stores", default="local,memory")
    parser.add_argument("--libraries",
                        default="chunkstore,zarr-python,zarrs,tensorstore,numpy")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args(argv)
    size = 2.0 if args.tiny else args.size_mb
    stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    libraries = [s.strip() for s in args.libraries.split(",") if s.strip()]
    cells = matrix_cases(size, TINY_CHUNK_KIB if args.tiny else CHUNK_KIB, stores)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-matrix-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"bulk matrix: {len(cells)} cells of ~{size:g} MB, libraries {libraries}", flush=True)
    rows: list[dict] = []
    data_cache: dict[tuple, np.ndarray] = {}
    try:
        for case in cells:
            key = (case.data, case.shape, case.dtype)
            if key not in data_cache:
                data_cache.clear()
                data_cache[key] = make_data(case)
            chunked = [lib for lib in libraries if lib != "numpy"]
            rows += run_case(case, chunked, work, args.repeat, data_cache[key])
            floor = f"{case.data} numpy-floor {case.store}"
            if "numpy" in libraries and not any(r["case"].startswith(floor) for r in rows):
                rows += run_case(Case(floor, case.shape, case.chunks, case.dtype, "raw",
                                      case.store, data=case.data),
                                 ["numpy"], work, args.repeat, data_cache[key])
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    return report(rows, "bench_matrix", lambda rows: cell_table(rows, libraries), summary)


if __name__ == "__main__":
    main()
