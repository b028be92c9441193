"""S3 round trips on a local endpoint: chunkstore (its default backend, obstore when
installed, and fsspec named) vs zarr-python, zarr-python with the zarrs codec pipeline,
and tensorstore. Every row says which S3 client served it (``backend``).

    python -m benchmarks.bench_s3            # issue size: 256 MiB float32, 1 MiB chunks,
                                             # on the endpoint as is, then with 20 ms latency
    python -m benchmarks.bench_s3 --tiny     # seconds, for CI
    python -m benchmarks.bench_s3 --mib 16   # a 16 MiB array (16 chunks of 1 MiB)
    python -m benchmarks.bench_s3 --latency-ms 20     # every request answered 20 ms later
    python -m benchmarks.bench_s3 --latency-ms 0,20   # both, one endpoint after the other
    python -m benchmarks.bench_s3 --rounds 5          # rounds, medians kept (3)
    python -m benchmarks.bench_s3 --server werkzeug   # a new connection per request

The endpoint is moto's S3 server running in a subprocess (so that its copy of the data
does not count in this process's memory) behind a WSGI middleware that counts every
HTTP request the server receives, by kind (GET, PUT, HEAD, LIST = GET on a bucket,
DELETE, POST), and the bytes in and out. Cases (issue 3): write and read the whole
array (blosc-lz4, shuffle, Zarr v3), open the array, read one chunk and one element
(each on a freshly opened array; median of a few repeats), create two groups of 31
arrays (one then consolidated), and open a group and load all its members with and
without consolidated metadata (tensorstore has no hierarchy API). ``obstore-alone`` is no
library but chunkstore's floor: the same objects through obstore's bare client and
numcodecs, nothing else (``s3_peers.ObstoreAlone``). Each library reads
what it wrote. In a round the methods run case by case (every method's write, then
every method's read, ...), so that a change of the load of a shared machine weighs on
all of them alike. Wall times on moto are dominated by the server's own CPU time per
request; the request counts are exact. Peak RSS is the increase of this process's RSS during the case.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from collections.abc import Iterator
from pathlib import Path

from benchmarks.s3_endpoint import (  # noqa: F401 (CountingApp, serve: re-exported)
    CountingApp,
    Endpoint,
    close_s3fs,
    measure,
    serve,
    set_aws_env,
)
from benchmarks.s3_peers import (  # noqa: F401 (the peers: re-exported)
    PEERS,
    Chunkstore,
    ChunkstoreFsspec,
    ChunkstoreObstore,
    ObstoreAlone,
    Peer,
    TensorStore,
    ZarrPython,
    Zarrs,
)

OUT = Path("bench-out")
MB = 1e6
#: what runs by default: "chunkstore" is the default backend of s3:// URLs (obstore when
#: installed), "chunkstore-fsspec" names fsspec; "chunkstore-obstore" (obstore named) runs
#: when asked for (--methods)
METHODS = ("chunkstore", "chunkstore-fsspec", "zarr-python", "zarrs", "tensorstore",
           "obstore-alone")
#: chunkstore's rows (one per storage backend); the others are peers
OURS = ("chunkstore", "chunkstore-fsspec", "chunkstore-obstore")


def run_peer(peer: Peer, ep: Endpoint, data, chunks, repeats: int) -> Iterator[dict]:
    """``peer``'s cases in order, one row at a time: ``main`` runs the methods case by
    case, each case of every method back to back, so that a change of the machine's load
    (it is shared) weighs on all of them alike."""
    import numpy as np

    def row(case: str, stats: dict, correct: bool, nbytes: float = 0) -> dict:
        stats.update(case=case, method=peer.name, backend=backend, correct=bool(correct))
        if nbytes:
            stats["mb_per_s"] = nbytes / MB / stats["wall_s"]
        print(format_row(stats), flush=True)
        return stats

    peer.warm(data, chunks)
    backend = peer.backend
    stats, _ = measure(ep, lambda: peer.create_and_write(data, chunks))
    yield row("write", stats, True, data.nbytes)
    stats, out = measure(ep, lambda a: peer.read_all(a), setup=peer.open)
    yield row("read", stats, np.array_equal(np.asarray(out), data), data.nbytes)
    del out
    stats, a = measure(ep, peer.open, repeats)
    yield row("open array", stats, tuple(a.shape) == data.shape)
    stats, out = measure(ep, lambda a: peer.read_chunk(a, chunks), repeats, setup=peer.open)
    yield row("read one chunk", stats,
              np.array_equal(np.asarray(out), data[tuple(slice(0, c) for c in chunks)]))
    stats, out = measure(ep, peer.read_element, repeats, setup=peer.open)
    yield row("read one element", stats, np.asarray(out) == data[1, 1])
    if not peer.groups:
        return  # tensorstore has no hierarchy API, obstore-alone is no library
    n = peer.group_size
    stats, _ = measure(ep, peer.make_groups)
    yield row(f"create 2 groups of {n} arrays", stats, True)
    for consolidated in (False, True):
        stats, found = measure(ep, lambda c=consolidated: peer.open_group(c), repeats)
        case = f"open group of {n} ({'consolidated' if consolidated else 'plain'})"
        yield row(case, stats, found == n)


def run_round(methods: list[str], skipped: set[str], ep: Endpoint, options: dict, data,
              chunks, repeats: int, group_size: int) -> list[dict]:
    """One round: every method's cases, interleaved case by case (``run_peer``); a method
    whose library is missing is skipped (and added to ``skipped``), saying why. The s3fs
    sessions made are closed at the end (``close_s3fs``)."""
    runs: dict[str, Iterator[dict]] = {}
    peers: list[Peer] = []
    rows: list[dict] = []
    try:
        for method in methods:
            if method in skipped:
                continue
            try:
                peer = PEERS[method](ep.url, "bench", options, group_size)
            except ImportError as e:
                print(f"{method} skipped: {e}")
                skipped.add(method)
                continue
            peers.append(peer)
            runs[method] = run_peer(peer, ep, data, chunks, repeats)
        while runs:
            for method, run in list(runs.items()):
                try:
                    rows.append(next(run))
                except StopIteration:
                    del runs[method]
                except ImportError as e:  # e.g. zarrs finding no adapter for the store
                    print(f"{method} skipped: {e}")
                    skipped.add(method)
                    del runs[method]
                    rows = [r for r in rows if r["method"] != method]
    finally:
        runners = [p.run_async for p in peers if p.run_async is not None]
        close_s3fs(runners[0] if runners else None)
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="small array (CI)")
    parser.add_argument("--mib", type=int, default=None,
                        help="array size in MiB (a square of 1 MiB chunks; default 256)")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None,
                        help="run every method this many times, interleaved case by case; "
                             "medians kept "
                             "(default 3, 1 with --tiny)")
    parser.add_argument("--group-size", type=int, default=None, help="arrays per group (31)")
    parser.add_argument("--latency-ms", default=None,
                        help="delay every S3 request by this much (the endpoint's middleware); "
                             "a comma-separated list runs each in turn (default 0,20; 0 with "
                             "--tiny)")
    parser.add_argument("--server", choices=("keepalive", "werkzeug"), default="keepalive",
                        help="the endpoint's HTTP server: keepalive (tornado, connections kept "
                             "open as S3 does) or werkzeug (a new connection per request)")
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve is not None:
        serve(args.serve, float(args.latency_ms or 0), args.server)
        return []
    import numpy as np
    import s3fs

    set_aws_env()
    shape, chunks = ((256, 256), (64, 64)) if args.tiny else ((8192, 8192), (512, 512))
    if args.mib and not args.tiny:
        side = 512 * max(1, round(args.mib ** 0.5))  # (side / 512)^2 chunks of 1 MiB
        shape = (side, side)
    repeats = args.repeats or (2 if args.tiny else 5)
    group_size = args.group_size or (4 if args.tiny else 31)
    data = np.random.default_rng(0).standard_normal(shape, dtype="f4")
    OUT.mkdir(exist_ok=True)
    results: list[dict] = []
    methods = args.methods.split(",")
    latencies = args.latency_ms or ("0" if args.tiny else "0,20")
    for latency in (float(x) for x in str(latencies).split(",")):
        runs: dict[tuple[str, str], list[dict]] = {}
        skipped: set[str] = set()
        with Endpoint(latency, args.server) as ep:
            options = {"key": "testing", "secret": "testing",
                       "client_kwargs": {"endpoint_url": ep.url}}
            s3fs.S3FileSystem(**options).mkdir("bench")
            for _ in range(max(1, args.rounds or (1 if args.tiny else 3))):
                close_s3fs()  # every round makes its own sessions
                for r in run_round(methods, skipped, ep, options, data, chunks, repeats,
                                   group_size):
                    if latency:
                        r["case"] = f"{r['case']} ({latency:g} ms latency)"
                    r["latency_ms"], r["server"] = latency, args.server
                    runs.setdefault((r["case"], r["method"]), []).append(r)
                s3fs.S3FileSystem(**options).rm("s3://bench/*", recursive=True)
            close_s3fs()
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


def label(r: dict) -> str:
    """``chunkstore (obstore)``: the method and the S3 client that served it."""
    backend = r.get("backend")
    return f"{r['method']} ({backend})" if backend and backend not in r["method"] \
        else r["method"]


def format_row(r: dict) -> str:
    rate = f"{r['mb_per_s']:7.1f} MB/s" if "mb_per_s" in r else " " * 12
    return (f"{r['case']:<36} {label(r):<30} {r['wall_s'] * 1e3:9.1f} ms {rate} "
            f"{r['requests']:5d} req {json.dumps(r['by_kind'])} "
            f"(at most {r.get('max_in_flight', 0)} at once)  correct={r['correct']}")


def print_table(results: list[dict]) -> None:
    print("\n| case | method | ms | MB/s | HTTP requests | of which LIST | MB sent / received "
          "| peak RSS +MB | correct |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        rate = f"{r['mb_per_s']:.0f}" if "mb_per_s" in r else ""
        print(f"| {r['case']} | {label(r)} | {r['wall_s'] * 1e3:.1f} | {rate} | "
              f"{r['requests']} | {r['lists']} | {r['mb_in']:.1f} / {r['mb_out']:.1f} | "
              f"{r['peak_rss_mb']:.0f} | {r['correct']} |")
    methods = list(dict.fromkeys(r["method"] for r in results))
    ours = [m for m in methods if m in OURS]
    # each chunkstore backend against every peer, and the default against fsspec named
    pairs = [(o, p) for o in ours for p in methods if p not in OURS]
    if "chunkstore" in ours and "chunkstore-fsspec" in ours:
        pairs.insert(0, ("chunkstore", "chunkstore-fsspec"))
    shown = {r["method"]: label(r) for r in results}
    # one line per case: every method side by side (MB/s for throughput, else ms; peak
    # RSS +MB after the slash), then the ratios of the pairs
    print("\n| case | " + " | ".join([shown[m] for m in methods]
                                     + [f"{shown[o]} vs {shown[p]}" for o, p in pairs]) + " |")
    print("|---|" + "---|" * (len(methods) + len(pairs)))
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
        for o, p in pairs:
            mine, theirs = rows.get(o), rows.get(p)
            cells.append(f"{theirs['wall_s'] / mine['wall_s']:.2f}x" if mine and theirs else "–")
        print(f"| {case} | " + " | ".join(cells) + " |")
    print("\n(ratio = the other's time / chunkstore's time: > 1 means chunkstore (with that "
          "backend) is faster; against obstore-alone, chunkstore's fraction of its floor; "
          "cells: MB/s or ms / peak RSS +MB)")

if __name__ == "__main__":
    main()
