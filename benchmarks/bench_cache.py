"""Repeated reads of one region, with and without a cache of decoded chunks.

    python -m benchmarks.bench_cache                  # 256 MiB f4, 1 MiB chunks, blosc-lz4
    python -m benchmarks.bench_cache --tiny           # seconds, for CI
    python -m benchmarks.bench_cache --latency-ms 20  # S3 requests answered 20 ms later
    python -m benchmarks.bench_cache --sources local-sharded  # the sharded array only

One array (Zarr v3, written once by chunkstore) is read by every method, from a local
directory and from moto's S3 server (``bench_s3.Endpoint``, which counts requests);
source ``local-sharded`` is the same array with its chunks (the inner chunks) grouped
in shards of 4 x 4, in a local directory.
The region (a quarter of the array, 64 chunks) is read ``--repeats`` times on one open
array; the first read fills the caches and is reported apart ("first"), the median of
the others is the "repeat" row. Methods: chunkstore without cache and with
``cache.chunk_bytes`` = 512 MiB; tensorstore with a ``cache_pool`` of 0 and of
512 MiB; zarr-python 3 (which has no LRU store cache: zarr-python 2's
``LRUStoreCache`` was not carried over), with the zarrs codec pipeline when installed.
Peak RSS: the increase of this process's RSS during the repeated reads.

A local array is read once its files are older than the window of a read-only store
(``chunk_cache.DEFAULT_WINDOW_NS``, 3 s): files changed more recently may be changed
again with the same stat, so chunkstore reads them without keeping them (the plain way,
as fast as no cache) — the benchmark measures what the cache is for, arrays written a
while ago.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

MB = 1e6
CACHE_BYTES = 512 * 2**20
OUT = Path("bench-out")


def _peak_during(fn: Callable[[], Any]) -> tuple[Any, float]:
    from benchmarks.bench_rechunk import RssSampler
    pid = os.getpid()
    base = RssSampler([pid]).procs[pid].memory_info().rss
    with RssSampler([pid], interval=0.01) as sampler:
        out = fn()
    return out, max(0.0, (max(sampler.peaks.values()) - base) / MB)


class Method:
    name = ""

    def open(self, where: dict) -> Any: ...
    def read(self, a: Any, region: tuple[slice, ...]) -> np.ndarray: return a[region]
    def close(self) -> None: ...


class Chunkstore(Method):
    def __init__(self, cache: int) -> None:
        self.cache = cache
        self.name = "chunkstore" + (" +cache" if cache else "")

    def open(self, where: dict) -> Any:
        import chunkstore as cs
        from chunkstore.io.cache import chunk_cache
        chunk_cache.clear()
        self._restore = cs.config.set({"cache.chunk_bytes": self.cache})
        return cs.open_array(where["url"], mode="r",
                             storage_options=where.get("options"))

    def close(self) -> None:
        from chunkstore.io.cache import chunk_cache
        self._restore.__exit__()
        chunk_cache.clear()


class TensorStore(Method):
    def __init__(self, cache: int) -> None:
        self.cache = cache
        self.name = "tensorstore" + (" +cache" if cache else "")

    def open(self, where: dict) -> Any:
        import tensorstore as ts
        ctx = ts.Context({"cache_pool": {"total_bytes_limit": self.cache}})
        return ts.open({"driver": "zarr3", "kvstore": where["ts_kvstore"]}, open=True,
                       read=True, context=ctx).result()

    def read(self, a: Any, region: tuple[slice, ...]) -> np.ndarray:
        return a[region].read().result()


class ZarrPython(Method):
    def __init__(self, zarrs: bool) -> None:
        self.zarrs = zarrs
        self.name = "zarrs" if zarrs else "zarr-python"

    def open(self, where: dict) -> Any:
        import zarr
        if self.zarrs:
            import zarrs  # noqa: F401
            self._restore = zarr.config.set({"codec_pipeline.path": "zarrs.ZarrsCodecPipeline"})
        if "options" in where:
            store = zarr.storage.FsspecStore.from_url(where["url"], read_only=True,
                                                      storage_options=where["options"])
        else:
            store = zarr.storage.LocalStore(where["url"], read_only=True)
        return zarr.open_array(store, mode="r")

    def close(self) -> None:
        if self.zarrs:
            self._restore.__exit__(None, None, None)


def methods(names: list[str]) -> list[Method]:
    every = {"chunkstore": Chunkstore(0), "chunkstore+cache": Chunkstore(CACHE_BYTES),
             "tensorstore": TensorStore(0), "tensorstore+cache": TensorStore(CACHE_BYTES),
             "zarr-python": ZarrPython(False), "zarrs": ZarrPython(True)}
    return [every[n] for n in names]


def run(method: Method, source: str, where: dict, region: tuple[slice, ...],
        expected: np.ndarray, repeats: int, counts: Callable[[], dict] | None) -> list[dict]:
    a = method.open(where)
    try:
        nbytes = expected.nbytes
        t0 = time.perf_counter()
        first = method.read(a, region)
        t_first = time.perf_counter() - t0
        assert np.array_equal(np.asarray(first), expected), method.name
        if counts:
            counts()

        def again() -> list[float]:
            times = []
            for _ in range(repeats - 1):
                t = time.perf_counter()
                method.read(a, region)
                times.append(time.perf_counter() - t)
            return times

        c0 = time.process_time()
        times, peak = _peak_during(again)
        cpu = (time.process_time() - c0) / max(1, len(times))
        requests = sum(counts()["counts"].values()) / max(1, len(times)) if counts else None
    finally:
        method.close()
    wall = statistics.median(times)
    base = {"method": method.name, "nbytes": nbytes}
    rows = [dict(base, case=f"{source} region, first read", wall_s=t_first,
                 mb_per_s=nbytes / MB / t_first),
            dict(base, case=f"{source} region, repeated read", wall_s=wall,
                 mb_per_s=nbytes / MB / wall, cpu_s=cpu, peak_rss_mb=peak,
                 requests_per_read=requests)]
    for r in rows:
        print(f"{r['case']:<36} {r['method']:<18} {r['wall_s'] * 1e3:9.1f} ms "
              f"{r['mb_per_s']:8.0f} MB/s", flush=True)
    return rows


def _close_s3_sessions() -> None:
    """Close the sessions of the s3fs filesystems made so far (the bench's own, and
    zarr-python's asynchronous ones on zarr's loop): dropped unclosed, they end the run
    with aiohttp's "Unclosed client session" warnings."""
    import sys

    from benchmarks.s3_endpoint import close_s3fs
    run_async = sys.modules["zarr.core.sync"].sync if "zarr.core.sync" in sys.modules else None
    close_s3fs(run_async)


def _settle(root: Path) -> None:
    """Wait until every file under ``root`` last changed longer ago than the timestamp
    window of a read-only store (see the module docstring)."""
    from chunkstore.io.cache import chunk_cache
    newest = max(max(p.stat().st_mtime_ns, p.stat().st_ctime_ns)
                 for p in root.rglob("*") if p.is_file())
    wait = (newest + chunk_cache.DEFAULT_WINDOW_NS - time.time_ns()) / 1e9
    if wait > 0:
        time.sleep(wait + 0.05)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--methods", default="chunkstore,chunkstore+cache,tensorstore,"
                        "tensorstore+cache,zarr-python,zarrs")
    parser.add_argument("--sources", default="local,local-sharded,s3")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    args = parser.parse_args(argv)
    import chunkstore as cs
    n, c = (256, 64) if args.tiny else (8192, 512)
    repeats = args.repeats or (3 if args.tiny else 6)
    x = np.linspace(0, 1, n, dtype="f4")
    data = np.add.outer(np.sin(8 * x), np.cos(5 * x)).astype("f4")  # smooth: compresses
    region = (slice(n // 8, n // 8 + n // 2), slice(n // 4, n // 4 + n // 2))
    expected = data[region]
    blosc = {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5,
                                                "shuffle": "shuffle", "typesize": 4}}
    rows: list[dict] = []
    work = Path(tempfile.mkdtemp(prefix="bench-cache-"))
    try:
        for source in args.sources.split(","):
            if source in ("local", "local-sharded"):
                path = str(work / f"{source}.zarr")
                shards = {"shards": (4 * c, 4 * c)} if source == "local-sharded" else {}
                cs.create_array(path, shape=data.shape, chunks=(c, c), dtype="f4",
                                compressors=[blosc], **shards)[...] = data
                _settle(Path(path))
                where = {"url": path, "ts_kvstore": {"driver": "file", "path": path + "/"}}
                for m in methods(args.methods.split(",")):
                    rows += run(m, source, where, region, expected, repeats, None)
                continue
            from benchmarks.s3_endpoint import Endpoint, set_aws_env
            set_aws_env()
            import s3fs
            with Endpoint(args.latency_ms) as ep:
                options = {"key": "testing", "secret": "testing",
                           "client_kwargs": {"endpoint_url": ep.url}}
                s3fs.S3FileSystem(**options).mkdir("cache")
                url = "s3://cache/a.zarr"
                cs.create_array(url, shape=data.shape, chunks=(c, c), dtype="f4",
                                compressors=[blosc], storage_options=options)[...] = data
                where = {"url": url, "options": options, "ts_kvstore": {
                    "driver": "s3", "bucket": "cache", "path": "a.zarr/",
                    "endpoint": ep.url, "aws_region": "us-east-1"}}
                label = "s3" + (f" +{args.latency_ms:g} ms" if args.latency_ms else "")
                for m in methods(args.methods.split(",")):
                    _close_s3_sessions()
                    rows += run(m, label, where, region, expected, repeats,
                                lambda ep=ep: ep.counts(reset=True))
                _close_s3_sessions()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    OUT.mkdir(exist_ok=True)
    (OUT / "bench_cache.json").write_text(json.dumps(rows, indent=2))
    print("\n| case | method | ms | MB/s | CPU ms | peak RSS +MB | requests/read |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        cpu = f"{r['cpu_s'] * 1e3:.0f}" if "cpu_s" in r else ""
        peak = f"{r['peak_rss_mb']:.0f}" if "peak_rss_mb" in r else ""
        req = r.get("requests_per_read")
        print(f"| {r['case']} | {r['method']} | {r['wall_s'] * 1e3:.1f} | "
              f"{r['mb_per_s']:.0f} | {cpu} | {peak} | {'' if req is None else f'{req:.0f}'} |")
    return rows


if __name__ == "__main__":
    main()
