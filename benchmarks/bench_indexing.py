"""Indexing reads on a local store: chunkstore vs zarr-python, tensorstore, h5py, np.memmap.

    python -m benchmarks.bench_indexing            # issue size: 512^3 float32, 64^3 chunks
    python -m benchmarks.bench_indexing --tiny     # 64^3, 16^3 chunks, seconds (CI)

Cases (issue 4), each for a blosc-lz4 and an uncompressed array: one element, one plane
along each axis, one column along each axis, and 10,000 random points (vindex). Every
library reads the same data: chunkstore, zarr-python and tensorstore the same Zarr v3
array; h5py a chunked dataset with the same chunks (blosc-lz4 through hdf5plugin when
installed, else LZF in its place — the row says which); np.memmap the raw C-ordered
file (same for both codecs). Warm page cache, best of N: repeated reads also find
chunkstore's cached memory maps of the chunk files (validated with a stat per chunk per
read) and h5py's chunk cache (not validated). Ratios are peer time / chunkstore time:
> 1 means chunkstore is faster.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks.common import add_ratios, auto_number, best_of, pivot_table, row

OUT = Path("bench-out")
LIBRARIES = ["chunkstore", "zarr-python", "tensorstore", "h5py", "memmap"]
CODECS = ["blosc-lz4", "uncompressed"]


def cases(shape: tuple[int, ...], npoints: int, seed: int = 0) -> dict[str, tuple]:
    """Name -> selection. ``("points", (i, j, k))`` is a coordinate selection."""
    n0, n1, n2 = shape
    rng = np.random.default_rng(seed)
    pts = tuple(rng.integers(0, n, npoints) for n in shape)
    i, j, k = n0 // 2 + 3, n1 // 3 + 1, (2 * n2) // 3 + 5
    return {
        "element": (i, j, k),
        "plane axis0": (i, slice(None), slice(None)),
        "plane axis1": (slice(None), j, slice(None)),
        "plane axis2": (slice(None), slice(None), k),
        "column axis0": (slice(None), j, k),
        "column axis1": (i, slice(None), k),
        "column axis2": (i, j, slice(None)),
        f"{npoints} points": ("points", pts),
    }


def make_data(work: Path, shape: tuple[int, ...], chunks: tuple[int, ...]) -> dict[str, str]:
    """Write every copy of the data; returns the h5py filter used for 'blosc-lz4'."""
    import h5py

    import chunkstore as cs

    rng = np.random.default_rng(1)
    raw = np.memmap(work / "raw.f4", dtype="f4", mode="w+", shape=shape)
    arrays = {c: cs.create_array(str(work / f"{c}.zarr"), shape=shape, chunks=chunks,
                                 dtype="f4", compressors="auto" if c == "blosc-lz4" else None,
                                 overwrite=True) for c in CODECS}
    h5_filter = _h5_filter()
    with h5py.File(work / "data.h5", "w") as f:
        dsets = {"uncompressed": f.create_dataset("uncompressed", shape, "f4", chunks=chunks),
                 "blosc-lz4": f.create_dataset("blosc-lz4", shape, "f4", chunks=chunks,
                                               **h5_filter[1])}
        for start in range(0, shape[0], chunks[0]):
            stop = min(shape[0], start + chunks[0])
            # compressible like measured data: a smooth field plus a little noise
            slab = (np.add.outer(np.arange(start, stop), np.arange(shape[1]))[..., None]
                    + np.arange(shape[2]) + rng.integers(0, 4, (stop - start, *shape[1:]))
                    ).astype("f4")
            raw[start:stop] = slab
            for a in arrays.values():
                a[start:stop] = slab
            for d in dsets.values():
                d[start:stop] = slab
    raw.flush()
    del raw
    return {"blosc-lz4": h5_filter[0], "uncompressed": "none"}


def _h5_filter() -> tuple[str, dict]:
    try:
        import hdf5plugin
        return "blosc-lz4", dict(hdf5plugin.Blosc(cname="lz4", clevel=5,
                                                   shuffle=hdf5plugin.Blosc.SHUFFLE))
    except ImportError:
        return "lzf (hdf5plugin not installed)", {"compression": "lzf", "shuffle": True}


# -- one reader per library: (selection) -> ndarray --------------------------------------------
def readers(work: Path, codec: str) -> dict[str, Callable[[tuple], np.ndarray]]:
    import h5py
    import tensorstore as ts
    import zarr

    import chunkstore as cs

    path = str(work / f"{codec}.zarr")
    a = cs.open_array(path, mode="r")
    z = zarr.open_array(path, mode="r")
    t = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": path}},
                read=True).result()
    f = h5py.File(work / "data.h5", "r")
    d = f[codec]
    mm = np.memmap(work / "raw.f4", dtype="f4", mode="r", shape=a.shape)

    def chunkstore_read(sel):
        return a.vindex[sel[1]] if sel[0] == "points" else a[sel]

    def zarr_read(sel):
        return z.vindex[sel[1]] if sel[0] == "points" else z[sel]

    def ts_read(sel):
        view = t.vindex[sel[1]] if sel[0] == "points" else t[sel]
        return view.read().result()

    def h5_read(sel):
        if sel[0] != "points":
            return d[sel]
        coords = np.stack(sel[1], axis=1).astype(np.uint64)
        fspace = d.id.get_space()
        fspace.select_elements(coords)  # HDF5 point selection: one read call
        out = np.empty(len(coords), dtype="f4")
        d.id.read(h5py.h5s.create_simple((len(coords),)), fspace, out)
        return out

    def mm_read(sel):
        return np.array(mm[sel[1]] if sel[0] == "points" else mm[sel])

    return {"chunkstore": chunkstore_read, "zarr-python": zarr_read, "tensorstore": ts_read,
            "h5py": h5_read, "memmap": mm_read}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="64^3 with 16^3 chunks (CI)")
    parser.add_argument("--libraries", default=",".join(LIBRARIES))
    parser.add_argument("--cases", default=None, help="comma-separated case-name substrings")
    parser.add_argument("--codecs", default=",".join(CODECS))
    parser.add_argument("--repeat", type=int, default=None)
    parser.add_argument("--workdir", default=None, help="keep/reuse the data here")
    args = parser.parse_args(argv)
    shape, chunks, npoints = ((64,) * 3, (16,) * 3, 1000) if args.tiny else \
        ((512,) * 3, (64,) * 3, 10_000)
    repeat = args.repeat or (2 if args.tiny else 5)
    libraries = args.libraries.split(",")
    OUT.mkdir(exist_ok=True)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-indexing-"))
    work.mkdir(parents=True, exist_ok=True)
    stamp = work / f"done-{'x'.join(map(str, shape))}"
    if not stamp.exists():
        filters = make_data(work, shape, chunks)
        stamp.write_text(json.dumps(filters))
    filters = json.loads(stamp.read_text())
    selections = cases(shape, npoints)
    if args.cases:
        wanted = args.cases.split(",")
        selections = {k: v for k, v in selections.items() if any(w in k for w in wanted)}
    mm = np.memmap(work / "raw.f4", dtype="f4", mode="r", shape=shape)
    results: list[dict] = []
    for codec in args.codecs.split(","):
        read = readers(work, codec)
        for name, sel in selections.items():
            expected = np.array(mm[sel[1]] if sel[0] == "points" else mm[sel])
            for lib in libraries:
                fn = read[lib]
                t0 = time.perf_counter()
                got = np.asarray(fn(sel))
                first = time.perf_counter() - t0
                correct = got.shape == expected.shape and bool(np.array_equal(got, expected))
                number = auto_number(lambda fn=fn, sel=sel: fn(sel), cap=200)
                # calls of seconds (h5py decoding a chunk per point) are timed fewer times
                seconds = best_of(lambda fn=fn, sel=sel: fn(sel),
                                  repeat if first < 0.5 else 1, warmup=0, number=number)
                extra = {"h5py_filter": filters[codec]} if lib == "h5py" else {}
                results.append(row(f"{codec} {name}", lib, seconds, nbytes=expected.nbytes,
                                   codec=codec, selection=name, correct=correct, **extra))
            line = "  ".join(f"{r['library']} {r['seconds'] * 1e3:.3f}"
                             for r in results[-len(libraries):])
            print(f"{codec:>12} {name:<14} ms: {line}", flush=True)
    add_ratios(results)
    print(f"\nshape {shape} float32, chunks {chunks}; h5py 'blosc-lz4' rows use "
          f"{filters['blosc-lz4']}; memmap reads the raw file (no codec). "
          "'x vs peer' = peer ms / chunkstore ms (> 1: chunkstore faster).")
    pivot_table(results, libraries)
    bad = [f"{r['case']}/{r['library']}" for r in results if not r["correct"]]
    if bad:
        print("WRONG RESULTS:", ", ".join(bad))
    (OUT / ("bench_indexing_tiny.json" if args.tiny else "bench_indexing.json")).write_text(
        json.dumps(results, indent=2))
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return results


if __name__ == "__main__":
    main()
