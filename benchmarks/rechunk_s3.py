"""bench_rechunk's rows on S3: chunkstore's rechunk and dask's (tasks, p2p; dask +
zarr-python over s3fs) with the source, any intermediate array and the target on moto's
S3 server, on the same LocalCluster as the local rows (``run_on_cluster``).

The server is ``benchmarks.s3_endpoint.Endpoint`` (moto behind the counting WSGI
middleware, tornado's keep-alive HTTP server, objects over 64 KiB kept in files): a
method named ``<method>-s3-<N>ms`` has every request delayed N ms on the server side
(a real object store answers in 10-50 ms), so every method pays the same latency.
Each run gets a fresh server with the source uploaded (untimed); the row has the
server's CPU seconds, its requests by kind, and the result checked on S3.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from benchmarks.rechunk_cli import AWS, BUCKET, upload
from benchmarks.rechunk_limit import plan_stages, run_limit
from benchmarks.rechunk_measure import MB, check, run_on_cluster
from benchmarks.rechunk_peers import dask_zarr_rechunk
from benchmarks.s3_endpoint import Endpoint, close_s3fs, set_aws_env

#: the S3 methods, without and with 20 ms per request (``parse`` reads any N); ``limit``:
#: the limit on S3 (``rechunk_limit``), the bytes alone through the same server
METHODS = ("limit-s3", "chunkstore-s3", "dask-tasks-s3", "dask-p2p-s3",
           "limit-s3-20ms", "chunkstore-s3-20ms", "dask-tasks-s3-20ms", "dask-p2p-s3-20ms")
_NAME = re.compile(r"(limit|chunkstore|dask-tasks|dask-p2p)-s3(?:-(\d+(?:\.\d+)?)ms)?")


def parse(method: str) -> tuple[str, float] | None:
    """(the local method, ms per request) of an S3 method's name, None for another name.

    >>> parse("dask-p2p-s3-20ms"), parse("chunkstore-s3"), parse("chunkstore")
    (('dask-p2p', 20.0), ('chunkstore', 0.0), None)
    """
    m = _NAME.fullmatch(method)
    return (m.group(1), float(m.group(2) or 0)) if m else None


def run_s3(case: str, method: str, src: Path, target: tuple, axes: tuple[int, ...] | None,
           max_mem: int, workdir: Path, scheduler: str | None = None) -> dict | None:
    """``method`` (a name ``parse`` reads) on ``case``: the local source ``src`` uploaded
    to a fresh S3 server, rechunked (transposed, with ``axes``) S3 -> S3; None when
    ``method`` is not an S3 method; ``scheduler``: see ``run_on_cluster``."""
    parsed = parse(method)
    if parsed is None:
        return None
    local, latency_ms = parsed
    from benchmarks.bench_rechunk import chunkstore_rechunk  # (it imports this module)
    set_aws_env()  # for the workers too (they inherit this process's environment)
    files = Path(workdir) / "moto-tmp"
    files.mkdir(parents=True, exist_ok=True)
    env = {"MOTO_S3_DEFAULT_KEY_BUFFER_SIZE": "65536", "TMPDIR": str(files)}
    with Endpoint(latency_ms, server="keepalive", env=env) as endpoint:
        import s3fs
        options = {"key": AWS["AWS_ACCESS_KEY_ID"], "secret": AWS["AWS_SECRET_ACCESS_KEY"],
                   "client_kwargs": {"endpoint_url": endpoint.url}}
        fs = s3fs.S3FileSystem(**options)
        fs.mkdir(BUCKET)
        src_url, dst_url = f"s3://{BUCKET}/{case}-src.zarr", f"s3://{BUCKET}/{case}-dst.zarr"
        upload(fs, src, src_url.removeprefix("s3://"))
        if local == "limit":
            fn = functools.partial(run_limit, src, workdir, plan_stages(src, target, max_mem,
                                                                        axes),
                                   (endpoint.url, src_url, dst_url))
        elif local == "chunkstore":
            fn = functools.partial(chunkstore_rechunk, src_url, dst_url, target, max_mem, axes,
                                   storage_options=options)
        else:
            fn = functools.partial(dask_zarr_rechunk, src_url, dst_url, target, local[5:],
                                   axes, storage_options=options)
        endpoint.counts(reset=True)
        cpu0 = endpoint.cpu_seconds()
        row = (fn() if local == "limit" else
               run_on_cluster(functools.partial(_then_close_sessions, fn), max_mem,
                              scheduler=scheduler))
        row["s3_cpu_s"] = endpoint.cpu_seconds() - cpu0
        counts = endpoint.counts()
        row.update(s3_latency_ms=latency_ms, s3_requests=sum(counts["counts"].values()),
                   s3_requests_by_kind=counts["counts"],
                   s3_mb_in=counts["bytes_in"] / MB, s3_mb_out=counts["bytes_out"] / MB)
        if "error" not in row:
            row["correct"] = (check(src, dst_url, axes, storage_options=options)
                              if local != "limit" else _same_objects(fs, src, dst_url))
            row["target_stored_mb"] = fs.du(dst_url.removeprefix("s3://")) / MB
        _close_sessions()
    return row


def _same_objects(fs, src: Path, dst_url: str) -> bool:
    """Whether the limit wrote one object of the same size for each chunk file of
    ``src`` (its objects are the source's chunks decoded and encoded again: no array)."""
    found = {p.rsplit("/", 1)[1]: size for p, size in
             fs.du(dst_url.removeprefix("s3://"), total=False).items()}
    return found == {p.name: p.stat().st_size for p in src.iterdir()
                     if not p.name.startswith(".")}


def _then_close_sessions(fn: functools.partial) -> dict:
    """``fn()``, then the s3fs sessions it opened (zarr-python's, on the workers and
    here) are closed: left open, each process warns "Unclosed client session" at exit."""
    from distributed import default_client
    row = fn()
    default_client().run(_close_sessions)
    _close_sessions()
    return row


def _close_sessions() -> None:
    """Close every s3fs session of this process, zarr-python's asynchronous ones on
    zarr's event loop."""
    from zarr.core.sync import sync
    close_s3fs(run_async=sync)
