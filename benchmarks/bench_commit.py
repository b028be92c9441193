"""The cost of never losing an update: writes through the conditional commit.

    python -m benchmarks.bench_commit            # 256 MiB, 1 MiB chunks
    python -m benchmarks.bench_commit --tiny     # seconds, for CI

Cases (local directory, float32, blosc-lz4; chunkstore beside zarr-python, zarr-python
with the zarrs codec pipeline and tensorstore, each writing the same data):
* ``aligned``: the whole array, chunk-aligned — the lock-free fast path (nothing read,
  one batched commit).
* ``unaligned``: the array shifted by half a chunk: every chunk a read-modify-write with
  a generation check at commit.
* ``one-shard-4-writers``: chunkstore only — 4 threads each writing its own inner chunks
  of one shard at the same time, without and with a ThreadSynchronizer; ``correct``
  says whether the result equals the data (zarr-python and tensorstore give no such
  guarantee without transactions, so they are not timed here).
Peak RSS beside every row.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
from pathlib import Path

import numpy as np

import chunkstore as cs
from benchmarks.common import best_of, peak_rss_during, pivot_table, print_table, row

CHUNK = 512 * 512  # float32 elements: 1 MiB


def _peers() -> dict:
    peers = {}
    try:
        import zarr
        peers["zarr-python"] = zarr
    except ImportError:
        pass
    try:
        import tensorstore
        peers["tensorstore"] = tensorstore
    except ImportError:
        pass
    return peers


def _zarr_writer(zarr, path: str, shape, chunks, pipeline: str | None):
    from zarr.codecs import BloscCodec

    blosc = BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")
    settings = {"codec_pipeline.path": pipeline} if pipeline else {}

    zarr.create_array(path, shape=shape, chunks=chunks, dtype="f4", compressors=[blosc],
                      overwrite=True)

    def write(region, data) -> None:
        with zarr.config.set(settings):
            zarr.open_array(path, mode="r+")[region] = data
    return write


def _ts_writer(ts, path: str, shape, chunks):
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": path},
            "metadata": {"shape": list(shape), "data_type": "float32",
                         "chunk_grid": {"name": "regular",
                                        "configuration": {"chunk_shape": list(chunks)}},
                         "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                                    {"name": "blosc", "configuration": {
                                        "cname": "lz4", "clevel": 5, "shuffle": "shuffle",
                                        "typesize": 4, "blocksize": 0}}]},
            "create": True, "open": True}

    def write(region, data) -> None:
        arr = ts.open(spec).result()
        arr[region].write(data).result()
    return write


def _cs_writer(path: str, shape, chunks):
    cs.create_array(path, shape=shape, chunks=chunks, dtype="f4", overwrite=True)

    def write(region, data) -> None:  # blosc-lz4 is chunkstore's default
        cs.open_array(path, mode="r+")[region] = data
    return write


def bench_rows(nbytes: int, repeat: int) -> list[dict]:
    rows: list[dict] = []
    n = nbytes // 4
    side = int(np.sqrt(n)) // 512 * 512 or 512
    shape, chunks = (side, side), (512, 512)
    data = np.random.default_rng(0).standard_normal(shape).astype("f4").cumsum(axis=1)
    half = chunks[0] // 2
    cases = {"aligned": ((slice(0, side), slice(0, side)), data),
             "unaligned": ((slice(half, side), slice(0, side)), data[half:])}
    peers = _peers()
    tmp = Path(tempfile.mkdtemp(prefix="bench-commit-"))
    try:
        for case, (region, values) in cases.items():
            writers = {"chunkstore": lambda p: _cs_writer(p, shape, chunks)}
            if "zarr-python" in peers:
                z = peers["zarr-python"]
                writers["zarr-python"] = lambda p, z=z: _zarr_writer(z, p, shape, chunks, None)
                try:
                    import zarrs  # noqa: F401
                    writers["zarrs"] = lambda p, z=z: _zarr_writer(
                        z, p, shape, chunks, "zarrs.ZarrsCodecPipeline")
                except ImportError:
                    pass
            if "tensorstore" in peers:
                writers["tensorstore"] = lambda p: _ts_writer(peers["tensorstore"], p, shape,
                                                              chunks)
            for lib, make in writers.items():
                path = str(tmp / f"{case}-{lib}.zarr")
                write = make(path)
                if case == "unaligned":  # the chunks exist: a real read-modify-write
                    write((slice(0, side), slice(0, side)), data)
                seconds = best_of(lambda w=write, r=region, v=values: w(r, v), repeat=repeat)
                _, peak = peak_rss_during(lambda w=write, r=region, v=values: w(r, v))
                rows.append(row(case, lib, seconds, nbytes=values.nbytes, peak_mb=peak))
                shutil.rmtree(path, ignore_errors=True)
        rows += _one_shard_rows(tmp, repeat)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


def _one_shard_rows(tmp: Path, repeat: int) -> list[dict]:
    inner, n_inner = 16384, 64
    data = np.arange(inner * n_inner, dtype="f4")
    rows = []
    for label, sync in (("chunkstore", None), ("chunkstore+ThreadSynchronizer",
                                               cs.ThreadSynchronizer())):
        path = str(tmp / f"shard-{label}.zarr")
        cs.create_array(path, shape=data.shape, chunks=(inner,), shards=data.shape,
                        dtype="f4", synchronizer=sync)

        def run(path=path, sync=sync) -> None:
            def writer(w: int) -> None:
                a = cs.open_array(path, mode="r+", synchronizer=sync)
                for i in range(w, n_inner, 4):
                    a[i * inner:(i + 1) * inner] = data[i * inner:(i + 1) * inner]
            threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

        seconds = best_of(run, repeat=repeat)
        correct = bool((cs.open_array(path, mode="r")[:] == data).all())
        rows.append(row("one-shard-4-writers", label, seconds, nbytes=data.nbytes,
                        correct=correct))
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a seconds-long smoke run")
    args = parser.parse_args(argv)
    nbytes, repeat = (4 * 2**20, 1) if args.tiny else (256 * 2**20, 5)
    rows = bench_rows(nbytes, repeat)
    print_table(rows, ["case", "library", "mb_per_s", "peak_mb", "correct"])
    pivot_table([r for r in rows if r["case"] != "one-shard-4-writers"],
                ["chunkstore", "zarr-python", "zarrs", "tensorstore"])
    return rows


if __name__ == "__main__":
    main()
