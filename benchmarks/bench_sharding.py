"""Sharded reads and synchronized writes, side by side with zarr-python.

    python -m benchmarks.bench_sharding            # 64-chunk shards of 1 MiB
    python -m benchmarks.bench_sharding --tiny     # seconds, for CI
    python -m benchmarks.bench_sharding --no-s3    # skip the moto S3 endpoint

Cases:
* ``read-inner-cold``: open the array and read one inner chunk of a 64-chunk shard
  (index + one range); ``read-inner-warm``: the same read again on the open array.
  Per library: time, store requests (one per key or byte range) and round trips
  (batched calls: chunkstore sends every range of a stage in one call), and bytes
  fetched, counting shard keys only (not metadata). On a local directory and, when
  moto is installed, on S3 (moto's server mode on 127.0.0.1: real HTTP, no network).
* ``write-aligned`` / ``write-unaligned``: write the whole array as concurrent region
  writes (one thread each), shard-aligned or shifted by half an inner chunk (the
  boundary shards are then updated partially by two writers), with and without a
  ``ThreadSynchronizer``: the cost of the locks. Unaligned writes lose nothing either
  way (conditional commits); ``correct`` checks it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import best_of, print_table, row

OUT = Path("bench-out")
_local = threading.local()


# -- request counting (real stores underneath) ----------------------------------------------
class Counter:
    """Requests, round trips and bytes of reads of shard keys (``c/...``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.requests = self.round_trips = self.nbytes = 0

    def add(self, keys: list[str], values: list[Any]) -> None:
        pairs = [(k, v) for k, v in zip(keys, values, strict=True)
                 if k.rsplit("/", 1)[-1] != "zarr.json" and "/c/" in f"/{k}"]
        if not pairs:
            return
        with self.lock:
            self.requests += len(pairs)
            self.round_trips += 1
            self.nbytes += sum(len(v) for _, v in pairs if v is not None)


def counting_store(base: type, counter: Counter) -> type:
    """A subclass of a chunkstore Store class that reports its reads to ``counter``."""

    class Counting(base):  # type: ignore[misc, valid-type]
        def _outer(self, fn, keys):
            if getattr(_local, "depth", 0):
                return fn()
            _local.depth = 1
            try:
                values = fn()
            finally:
                _local.depth = 0
            counter.add(keys, values)
            return values

        def get(self, key, byte_range=None):
            return self._outer(lambda: [super(Counting, self).get(key, byte_range)], [key])[0]

        def get_many(self, keys):
            return self._outer(lambda: super(Counting, self).get_many(keys), list(keys))

        def get_ranges(self, requests):
            return self._outer(lambda: super(Counting, self).get_ranges(requests),
                               [k for k, _ in requests])

    Counting.__name__ = f"Counting{base.__name__}"
    return Counting


def counting_zarr_store(base: type, counter: Counter) -> type:
    """The same for a zarr-python store class (each ``get`` is one request)."""

    class Counting(base):  # type: ignore[misc, valid-type]
        async def get(self, key, prototype=None, byte_range=None):
            value = await super().get(key, prototype, byte_range)
            counter.add([key], [None if value is None else value.to_bytes()])
            return value

    return Counting


# -- cases ---------------------------------------------------------------------------------
def make_data(shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(0)
    return (rng.standard_normal(shape) * 100).astype("f4").round(1)


def bench_read(where: str, url: str, options: dict | None, shape, chunks, shards,
               repeat: int) -> list[dict]:
    """Cold and warm single-inner-chunk reads, chunkstore vs zarr-python."""
    import zarr

    import chunkstore as cs
    from chunkstore.storage import FsspecStore, LocalStore
    data = make_data(shape)
    cs.array(data, store=url, chunks=chunks, shards=shards, overwrite=True,
             storage_options=options)
    inner = tuple(slice(c, 2 * c) for c in chunks)  # inner chunk (1, 1): a middle one
    expected = data[inner]
    rows = []

    counter = Counter()
    cls = counting_store(FsspecStore if "://" in url else LocalStore, counter)
    store = cls(url, options) if "://" in url else cls(url)
    opened = {}

    def cs_cold():
        opened["a"] = cs.open_array(store, mode="r+")
        return opened["a"][inner]

    def cs_warm():
        return opened["a"][inner]

    zcounter = Counter()
    if "://" in url:
        zstore = counting_zarr_store(zarr.storage.FsspecStore, zcounter).from_url(
            url, storage_options=options, read_only=True)
    else:
        zstore = counting_zarr_store(zarr.storage.LocalStore, zcounter)(url, read_only=True)

    def z_cold():
        opened["z"] = zarr.open_array(zstore, mode="r")
        return opened["z"][inner]

    def z_warm():
        return opened["z"][inner]

    for library, cold, warm, cnt in (("chunkstore", cs_cold, cs_warm, counter),
                                     ("zarr-python", z_cold, z_warm, zcounter)):
        for case, fn in (("read-inner-cold", cold), ("read-inner-warm", warm)):
            if case.endswith("warm"):
                cold()
            cnt.reset()
            correct = bool(np.array_equal(fn(), expected))
            requests, trips, nbytes = cnt.requests, cnt.round_trips, cnt.nbytes
            seconds = best_of(fn, repeat=repeat, warmup=0)
            rows.append(row(f"{case}-{where}", library, seconds, requests=requests,
                            round_trips=trips, fetched_bytes=nbytes, correct=correct,
                            shard_bytes=int(np.prod(shards)) * 4))
    return rows


def bench_sync_writes(root: Path, shape, chunks, shards, repeat: int) -> list[dict]:
    """Region writes with and without a ThreadSynchronizer, aligned and unaligned."""
    import chunkstore as cs
    data = make_data(shape)
    rows = []
    for case, shift in (("write-aligned", 0), ("write-unaligned", chunks[0] // 2)):
        starts = list(range(shift, shape[0], shards[0]))
        regions = ([(slice(0, shift),)] if shift else []) + [
            (slice(s, min(shape[0], s + shards[0])),) for s in starts]
        for label, sync in (("no-sync", None), ("ThreadSynchronizer", cs.ThreadSynchronizer())):
            path = str(root / f"{case}-{label}.zarr")
            a = cs.create_array(path, shape=shape, chunks=chunks, shards=shards, dtype="f4",
                                overwrite=True, synchronizer=sync)

            def write(a=a, regions=regions):
                threads = [threading.Thread(target=a.write_region, args=(r, data[r]))
                           for r in regions]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()

            seconds = best_of(write, repeat=repeat, warmup=1)
            correct = bool(np.array_equal(cs.open_array(path, mode="r")[...], data))
            rows.append(row(case, f"chunkstore+{label}", seconds, nbytes=data.nbytes,
                            correct=correct, writers=len(regions)))
    return rows


# -- moto S3 ------------------------------------------------------------------------------
class MotoS3:
    """moto's S3 server in a thread of this process, with a fresh bucket."""

    def __enter__(self) -> MotoS3:
        import logging

        import s3fs
        from moto.server import ThreadedMotoServer
        for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                            "AWS_DEFAULT_REGION": "us-east-1"}.items():
            os.environ.setdefault(name, value)
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no access log lines
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        self.server.start()
        self.options = {"anon": False, "key": "testing", "secret": "testing",
                        "client_kwargs": {"endpoint_url": f"http://127.0.0.1:{port}"}}
        s3fs.S3FileSystem.clear_instance_cache()
        self.bucket = f"bench-{uuid.uuid4().hex[:12]}"
        s3fs.S3FileSystem(**self.options).mkdir(self.bucket)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()


# -- main ---------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="small arrays (CI)")
    parser.add_argument("--no-s3", action="store_true", help="skip the moto S3 case")
    args = parser.parse_args(argv)
    OUT.mkdir(exist_ok=True)
    if args.tiny:
        shape, chunks, shards, repeat = (256, 256), (16, 16), (128, 128), 2
    else:
        shape, chunks, shards, repeat = (2048, 2048), (64, 64), (512, 512), 5
    work = Path(tempfile.mkdtemp(prefix="bench-sharding-"))
    results: list[dict] = []
    try:
        results += bench_read("local", str(work / "read.zarr"), None, shape, chunks, shards,
                              repeat)
        if not args.no_s3:
            try:
                moto = MotoS3().__enter__()
            except ImportError as e:
                print(f"skipping S3: {e}")
            else:
                try:
                    results += bench_read("s3", f"s3://{moto.bucket}/read.zarr", moto.options,
                                          shape, chunks, shards, repeat)
                finally:
                    moto.__exit__()
        results += bench_sync_writes(work, shape, chunks, shards, repeat)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    (OUT / "bench_sharding.json").write_text(json.dumps(results, indent=2))
    print_table(results, ["case", "library", "ms", "requests", "round_trips", "fetched_bytes",
                          "shard_bytes", "mb_per_s", "correct"])
    return results


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"done in {time.perf_counter() - t0:.1f} s")
