"""S3 round trips on a local endpoint: chunkstore (fsspec and obstore backends) vs
zarr-python, zarr-python with the zarrs codec pipeline, and tensorstore.

    python -m benchmarks.bench_s3            # issue size: 256 MiB float32, 1 MiB chunks
    python -m benchmarks.bench_s3 --tiny     # seconds, for CI
    python -m benchmarks.bench_s3 --latency-ms 20     # every request answered 20 ms later
    python -m benchmarks.bench_s3 --latency-ms 0,20   # both, one endpoint after the other
    python -m benchmarks.bench_s3 --rounds 3          # methods interleaved, medians kept
    python -m benchmarks.bench_s3 --server werkzeug   # a new connection per request

The endpoint is moto's S3 server running in a subprocess (so that its copy of the data
does not count in this process's memory) behind a WSGI middleware that counts every
HTTP request the server receives, by kind (GET, PUT, HEAD, LIST = GET on a bucket,
DELETE, POST), and the bytes in and out. Cases (issue 3): write and read the whole
array (blosc-lz4, shuffle, Zarr v3), open the array, read one chunk and one element
(each on a freshly opened array; median of a few repeats), create two groups of 31
arrays (one then consolidated), and open a group and load all its members with and
without consolidated metadata (tensorstore has no hierarchy API). Each library reads
what it wrote. Wall times on moto are dominated by the server's own CPU time per
request; the request counts are exact. Peak RSS is the increase of this process's RSS during the case.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path
from typing import Any

from benchmarks.s3_endpoint import (  # noqa: F401 (CountingApp, serve: re-exported)
    CountingApp,
    Endpoint,
    measure,
    serve,
    set_aws_env,
)

OUT = Path("bench-out")
MB = 1e6
METHODS = ("chunkstore", "chunkstore-obstore", "zarr-python", "zarrs", "tensorstore")
#: chunkstore's rows (one per storage backend); the others are peers
OURS = ("chunkstore", "chunkstore-obstore")


class Peer:
    """One library's way of doing each case (subclasses below)."""

    name = ""

    def __init__(self, endpoint: str, bucket: str, options: dict, group_size: int = 31) -> None:
        self.endpoint, self.bucket, self.options = endpoint, bucket, options
        self.group_size = group_size
        self.key = f"{self.name}.zarr"

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    def warm(self, data, chunks) -> None:
        """Write and read a small array first, so sessions and connections exist."""
        key, self.key = self.key, f"{self.name}-warm.zarr"
        try:
            self.create_and_write(data[tuple(slice(0, c) for c in chunks)], chunks)
            self.read_all(self.open())
        finally:
            self.key = key

    def create_and_write(self, data, chunks) -> None: ...
    def open(self) -> Any: ...
    def read_all(self, a) -> Any: return a[...]
    def read_chunk(self, a, chunks) -> Any: return a[tuple(slice(0, c) for c in chunks)]
    def read_element(self, a) -> Any: return a[1, 1]
    def make_groups(self) -> None: ...
    def open_group(self, consolidated: bool) -> int: ...


class Chunkstore(Peer):
    name = "chunkstore"

    def create_and_write(self, data, chunks) -> None:
        import numcodecs

        import chunkstore as cs
        a = cs.create_array(self.url, shape=data.shape, dtype=data.dtype, chunks=chunks,
                            compressors=numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE),
                            storage_options=self.options)
        a[...] = data

    def open(self):
        import chunkstore as cs
        return cs.open_array(self.url, mode="r", storage_options=self.options)

    def make_groups(self) -> None:
        import chunkstore as cs
        for kind in ("plain", "consolidated"):
            g = cs.group(f"s3://{self.bucket}/cs-group-{kind}.zarr",
                         storage_options=self.options)
            for i in range(self.group_size):
                g.create_array(f"a{i}", shape=(100,), dtype="f4", chunks=(10,))
        cs.consolidate_metadata(f"s3://{self.bucket}/cs-group-consolidated.zarr",
                                storage_options=self.options)

    def open_group(self, consolidated: bool) -> int:
        import chunkstore as cs
        kind = "consolidated" if consolidated else "plain"
        g = cs.open_group(f"s3://{self.bucket}/cs-group-{kind}.zarr", mode="r",
                          storage_options=self.options, use_consolidated=consolidated)
        return len(g.members())


class ChunkstoreObstore(Chunkstore):
    """chunkstore with ``storage_options={"backend": "obstore"}`` (obstore's S3 client)."""

    name = "chunkstore-obstore"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        from chunkstore.storage import obstore_store
        if not obstore_store.available():
            raise ImportError("obstore is not installed")
        self.options = {**self.options, "backend": "obstore"}


class ZarrPython(Peer):
    name = "zarr-python"

    def _store(self, url: str, read_only: bool = False):
        import zarr
        return zarr.storage.FsspecStore.from_url(url, storage_options=self.options,
                                                 read_only=read_only)

    def create_and_write(self, data, chunks) -> None:
        import zarr
        from zarr.codecs import BloscCodec
        z = zarr.create_array(self._store(self.url), shape=data.shape, dtype=data.dtype,
                              chunks=chunks, compressors=BloscCodec(cname="lz4", clevel=5,
                                                                    shuffle="shuffle"))
        z[...] = data

    def open(self):
        import zarr
        return zarr.open_array(self._store(self.url, True), mode="r")

    def make_groups(self) -> None:
        import zarr
        for kind in ("plain", "consolidated"):
            store = self._store(f"s3://{self.bucket}/zarr-group-{kind}.zarr")
            g = zarr.open_group(store, mode="w")
            for i in range(self.group_size):
                g.create_array(f"a{i}", shape=(100,), dtype="f4", chunks=(10,))
            if kind == "consolidated":
                zarr.consolidate_metadata(store)

    def open_group(self, consolidated: bool) -> int:
        import zarr
        kind = "consolidated" if consolidated else "plain"
        store = self._store(f"s3://{self.bucket}/zarr-group-{kind}.zarr", True)
        g = zarr.open_group(store, mode="r", use_consolidated=consolidated)
        return len(list(g.members()))


class Zarrs(ZarrPython):
    """zarr-python with the zarrs codec pipeline (Rust). zarrs reads and writes through
    its own store adapters; for a store it has none for (fsspec's S3 here), zarr-python
    silently builds its own pipeline instead, which would only measure zarr-python
    again: the peer is then skipped, saying so."""

    name = "zarrs"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        import zarrs  # noqa: F401

    @staticmethod
    def _pipeline():
        import zarr
        return zarr.config.set({"codec_pipeline.path": "zarrs.ZarrsCodecPipeline"})

    def _check(self, z) -> Any:
        pipeline = type(z._async_array.codec_pipeline).__name__
        if pipeline != "ZarrsCodecPipeline":
            raise ImportError(f"zarrs has no adapter for this store ({type(z.store).__name__}"
                              f" on s3://): zarr-python used its own {pipeline}")
        return z

    def warm(self, data, chunks) -> None:
        super().warm(data, chunks)
        key, self.key = self.key, f"{self.name}-warm.zarr"
        try:
            self._check(self.open())
        finally:
            self.key = key

    def create_and_write(self, data, chunks) -> None:
        with self._pipeline():
            super().create_and_write(data, chunks)

    def open(self):
        with self._pipeline():
            return super().open()


class TensorStore(Peer):
    name = "tensorstore"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        import tensorstore as ts
        self.context = ts.Context()

    def _spec(self) -> dict:
        return {"driver": "zarr3", "kvstore": {
            "driver": "s3", "bucket": self.bucket, "path": f"{self.key}/",
            "endpoint": self.endpoint, "aws_region": "us-east-1"}}

    def create_and_write(self, data, chunks) -> None:
        import tensorstore as ts
        codecs = [{"name": "bytes", "configuration": {"endian": "little"}},
                  {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5,
                                                      "shuffle": "shuffle", "typesize": 4}}]
        t = ts.open(self._spec(), create=True, dtype=ts.float32, shape=data.shape,
                    chunk_layout=ts.ChunkLayout(chunk_shape=chunks),
                    codec=ts.CodecSpec({"driver": "zarr3", "codecs": codecs}),
                    context=self.context).result()
        t.write(data).result()

    def open(self):
        import tensorstore as ts
        return ts.open(self._spec(), open=True, read=True, context=self.context).result()

    def read_all(self, a):
        return a.read().result()

    def read_chunk(self, a, chunks):
        return a[tuple(slice(0, c) for c in chunks)].read().result()

    def read_element(self, a):
        return a[1, 1].read().result()


PEERS: dict[str, type[Peer]] = {"chunkstore": Chunkstore,
                                 "chunkstore-obstore": ChunkstoreObstore,
                                 "zarr-python": ZarrPython, "zarrs": Zarrs,
                                 "tensorstore": TensorStore}


def run_peer(peer: Peer, ep: Endpoint, data, chunks, repeats: int) -> list[dict]:
    import numpy as np
    rows = []

    def add(case: str, stats: dict, correct: bool, nbytes: float = 0) -> None:
        stats.update(case=case, method=peer.name, correct=bool(correct))
        if nbytes:
            stats["mb_per_s"] = nbytes / MB / stats["wall_s"]
        rows.append(stats)
        print(format_row(stats), flush=True)

    peer.warm(data, chunks)
    stats, _ = measure(ep, lambda: peer.create_and_write(data, chunks))
    add("write", stats, True, data.nbytes)
    stats, out = measure(ep, lambda a: peer.read_all(a), setup=peer.open)
    add("read", stats, np.array_equal(np.asarray(out), data), data.nbytes)
    stats, a = measure(ep, peer.open, repeats)
    add("open array", stats, tuple(a.shape) == data.shape)
    stats, out = measure(ep, lambda a: peer.read_chunk(a, chunks), repeats, setup=peer.open)
    add("read one chunk", stats,
        np.array_equal(np.asarray(out), data[tuple(slice(0, c) for c in chunks)]))
    stats, out = measure(ep, peer.read_element, repeats, setup=peer.open)
    add("read one element", stats, np.asarray(out) == data[1, 1])
    if isinstance(peer, TensorStore):
        return rows  # tensorstore has no hierarchy API
    n = peer.group_size
    stats, _ = measure(ep, peer.make_groups)
    add(f"create 2 groups of {n} arrays", stats, True)
    for consolidated in (False, True):
        stats, found = measure(ep, lambda c=consolidated: peer.open_group(c), repeats)
        case = f"open group of {n} ({'consolidated' if consolidated else 'plain'})"
        add(case, stats, found == n)
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="small array (CI)")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=1,
                        help="run every method this many times, interleaved; medians kept")
    parser.add_argument("--group-size", type=int, default=None, help="arrays per group (31)")
    parser.add_argument("--latency-ms", default="0",
                        help="delay every S3 request by this much (the endpoint's middleware); "
                             "a comma-separated list runs each in turn")
    parser.add_argument("--server", choices=("keepalive", "werkzeug"), default="keepalive",
                        help="the endpoint's HTTP server: keepalive (tornado, connections kept "
                             "open as S3 does) or werkzeug (a new connection per request)")
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve is not None:
        serve(args.serve, float(args.latency_ms), args.server)
        return []
    import numpy as np
    import s3fs

    set_aws_env()
    shape, chunks = ((256, 256), (64, 64)) if args.tiny else ((8192, 8192), (512, 512))
    repeats = args.repeats or (2 if args.tiny else 5)
    group_size = args.group_size or (4 if args.tiny else 31)
    data = np.random.default_rng(0).standard_normal(shape, dtype="f4")
    OUT.mkdir(exist_ok=True)
    results: list[dict] = []
    methods = args.methods.split(",")
    for latency in (float(x) for x in str(args.latency_ms).split(",")):
        runs: dict[tuple[str, str], list[dict]] = {}
        skipped: set[str] = set()
        with Endpoint(latency, args.server) as ep:
            options = {"key": "testing", "secret": "testing",
                       "client_kwargs": {"endpoint_url": ep.url}}
            s3fs.S3FileSystem(**options).mkdir("bench")
            for _ in range(max(1, args.rounds)):
                for method in methods:
                    if method in skipped:
                        continue
                    s3fs.S3FileSystem.clear_instance_cache()
                    try:
                        peer = PEERS[method](ep.url, "bench", options, group_size)
                        rows = run_peer(peer, ep, data, chunks, repeats)
                    except ImportError as e:
                        print(f"{method} skipped: {e}")
                        skipped.add(method)
                        rows = []
                    for r in rows:
                        if latency:
                            r["case"] = f"{r['case']} ({latency:g} ms latency)"
                        r["latency_ms"], r["server"] = latency, args.server
                        runs.setdefault((r["case"], r["method"]), []).append(r)
                    s3fs.S3FileSystem(**options).rm("s3://bench/*", recursive=True)
        results.extend(_median_row(rows, data.nbytes) for rows in runs.values())
    (OUT / "bench_s3.json").write_text(json.dumps(results, indent=2))
    print(f"\nendpoint: moto behind the {args.server} server; load average "
          f"{os.getloadavg()[0]:.1f}")
    print_table(results)
    return results


def _median_row(rows: list[dict], nbytes: int) -> dict:
    """One row from the rounds of a case: median time, largest peak RSS, all correct."""
    row = dict(rows[0])
    row["wall_s"] = statistics.median(r["wall_s"] for r in rows)
    row["rounds"] = len(rows)
    row["peak_rss_mb"] = max(r["peak_rss_mb"] for r in rows)
    row["correct"] = all(r["correct"] for r in rows)
    if "mb_per_s" in row:
        row["mb_per_s"] = nbytes / MB / row["wall_s"]
    return row


def format_row(r: dict) -> str:
    rate = f"{r['mb_per_s']:7.1f} MB/s" if "mb_per_s" in r else " " * 12
    return (f"{r['case']:<36} {r['method']:<18} {r['wall_s'] * 1e3:9.1f} ms {rate} "
            f"{r['requests']:5d} req {json.dumps(r['by_kind'])}  correct={r['correct']}")


def print_table(results: list[dict]) -> None:
    print("\n| case | method | ms | MB/s | HTTP requests | of which LIST | MB sent / received "
          "| peak RSS +MB | correct |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        rate = f"{r['mb_per_s']:.0f}" if "mb_per_s" in r else ""
        print(f"| {r['case']} | {r['method']} | {r['wall_s'] * 1e3:.1f} | {rate} | "
              f"{r['requests']} | {r['lists']} | {r['mb_in']:.1f} / {r['mb_out']:.1f} | "
              f"{r['peak_rss_mb']:.0f} | {r['correct']} |")
    methods = list(dict.fromkeys(r["method"] for r in results))
    ours = [m for m in methods if m in OURS]
    peers = [m for m in methods if m not in OURS]
    # one line per case: every method side by side (MB/s for throughput, else ms; peak
    # RSS +MB after the slash), then each chunkstore backend's ratio to every peer
    print("\n| case | " + " | ".join(methods) + " | "
          + " | ".join(f"{o} vs {p}" for o in ours for p in peers) + " |")
    print("|---|" + "---|" * (len(methods) + len(ours) * len(peers)))
    for case in dict.fromkeys(r["case"] for r in results):
        rows = {r["method"]: r for r in results if r["case"] == case}
        cells = []
        for m in methods:
            r = rows.get(m)
            if r is None:
                cells.append("–")
            elif "mb_per_s" in r:
                cells.append(f"{r['mb_per_s']:.0f} MB/s / {r['peak_rss_mb']:.0f}")
            else:
                cells.append(f"{r['wall_s'] * 1e3:.1f} ms / {r['peak_rss_mb']:.0f}")
        ratios = []
        for o in ours:
            for p in peers:
                mine, theirs = rows.get(o), rows.get(p)
                ratios.append(f"{theirs['wall_s'] / mine['wall_s']:.2f}x"
                              if mine and theirs else "–")
        print(f"| {case} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    print("\n(ratio = peer time / chunkstore time: > 1 means chunkstore is faster; "
          "cells: MB/s or ms / peak RSS +MB)")


if __name__ == "__main__":
    main()
