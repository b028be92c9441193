"""xarray on one store: ``engine="chunkstore"`` beside ``engine="zarr"``.

    python -m benchmarks.bench_xarray            # a 256 MiB float32 variable
    python -m benchmarks.bench_xarray --tiny     # seconds, for CI

The dataset (a 3-d float32 ``temperature`` with 2 MiB chunks, its time/y/x coordinates
and a CF-packed int16 variable) is written once per Zarr format by xarray's own
``to_zarr`` (zarr-python), consolidated; both engines then read the same store:

* ``open``: ``xr.open_dataset`` with consolidated metadata (the default) and without
  (one metadata read per array); coordinates are loaded for the indexes, data is not.
* ``load``: ``open_dataset(...).load()`` — every chunk decoded into NumPy.
* ``load dask``: ``open_dataset(..., chunks={})`` (one dask task per stored chunk) then
  ``.load()`` on the threaded scheduler.
* ``point series``: one (y, x) point over all times (one chunk column).

Each row: best-of seconds, MB/s where data is read, and the peak RSS above the start
of one run; chunkstore's row has ``ratio_vs_zarr-python`` (zarr seconds / chunkstore
seconds: > 1 means chunkstore is faster).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np

from benchmarks.common import add_ratios, best_of, peak_rss_during, pivot_table, print_table, row

ENGINES = {"chunkstore": "chunkstore", "zarr-python": "zarr"}


def _dataset(shape: tuple[int, int, int], chunks: tuple[int, int, int]):
    import pandas as pd
    import xarray as xr

    nt, ny, nx = shape
    rng = np.random.default_rng(0)
    temp = (rng.standard_normal(shape, dtype="f4") * 5 + 280).astype("f4")
    packed = np.round(rng.random((nt, ny)) * 400) / 4
    ds = xr.Dataset(
        {"temperature": (("time", "y", "x"), temp, {"units": "K"}),
         "level": (("time", "y"), packed, {}, {"dtype": "i2", "scale_factor": 0.25,
                                               "_FillValue": -32768})},
        coords={"time": pd.date_range("2000-01-01", periods=nt, freq="h"),
                "y": np.linspace(-90, 90, ny), "x": np.linspace(0, 360, nx,
                                                                endpoint=False)},
        attrs={"title": "bench_xarray"})
    encoding = {"temperature": {"chunks": chunks}}
    return ds, encoding


def _cases(path: str, engine: str, fmt: int, shape: tuple[int, int, int], nbytes: int
           ) -> dict:
    """case -> (function, bytes of data it reads or None) for one engine on one store."""
    import xarray as xr

    y, x = shape[1] // 2, shape[2] // 2

    def open_(consolidated: bool, chunks=None):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return xr.open_dataset(path, engine=engine, chunks=chunks,
                                   consolidated=consolidated)

    return {
        f"v{fmt} open": (lambda: open_(True), None),
        f"v{fmt} open not consolidated": (lambda: open_(False), None),
        f"v{fmt} load": (lambda: open_(True).load(), nbytes),
        f"v{fmt} load dask": (lambda: open_(True, chunks={}).load(), nbytes),
        f"v{fmt} point series": (lambda: open_(True)["temperature"].isel(y=y, x=x).values,
                                 shape[0] * 4),
    }


def bench_rows(shape: tuple[int, int, int], chunks: tuple[int, int, int], repeat: int,
               formats: tuple[int, ...] = (3, 2)) -> list[dict]:
    ds, encoding = _dataset(shape, chunks)
    nbytes = ds["temperature"].nbytes + ds["level"].nbytes
    expected = ds["temperature"].values[:, shape[1] // 2, shape[2] // 2]
    rows: list[dict] = []
    tmp = Path(tempfile.mkdtemp(prefix="bench-xarray-"))
    try:
        for fmt in formats:
            path = str(tmp / f"v{fmt}.zarr")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ds.to_zarr(path, zarr_format=fmt, encoding=encoding, consolidated=True)
            for lib, engine in ENGINES.items():
                for case, (fn, size) in _cases(path, engine, fmt, shape, nbytes).items():
                    seconds = best_of(fn, repeat=repeat)
                    result, peak = peak_rss_during(fn)
                    rows.append(row(case, lib, seconds, nbytes=size, peak_mb=peak,
                                    correct=_check(result, ds, expected)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return add_ratios(rows)


def _check(result, ds, expected) -> bool:
    """The read gives the data written (opens: the coordinates and sizes)."""
    if isinstance(result, np.ndarray):
        return bool(np.array_equal(result, expected))
    if dict(result.sizes) != dict(ds.sizes):
        return False
    if result["temperature"].variable._in_memory:
        return bool(result.identical(ds))
    return bool(result["time"].equals(ds["time"]) and result["y"].equals(ds["y"]))


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a seconds-long smoke run")
    args = parser.parse_args(argv)
    if args.tiny:
        shape, chunks, repeat = (8, 64, 64), (4, 32, 32), 1
    else:  # 64 x 1024 x 1024 float32 = 256 MiB in 2 MiB chunks
        shape, chunks, repeat = (64, 1024, 1024), (8, 256, 256), 3
    rows = bench_rows(shape, chunks, repeat)
    print_table(rows, ["case", "library", "ms", "mb_per_s", "peak_mb",
                       "ratio_vs_zarr-python", "correct"])
    pivot_table(rows, list(ENGINES))
    return rows


if __name__ == "__main__":
    main()
