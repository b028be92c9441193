"""The S3 endpoint of the S3 benchmarks: moto's server in a subprocess behind a WSGI
middleware that counts every request (and can delay each one), and how a case is
measured against it (requests, bytes, wall time, peak RSS).

    python benchmarks/s3_endpoint.py --serve PORT [--latency-ms 20] [--server keepalive]
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

MB = 1e6


# -- the counting S3 endpoint (runs in the subprocess) ------------------------------------
class CountingApp:
    """WSGI middleware: counts requests and bytes, answers /_bench/counts and /_bench/reset;
    delays every S3 request by ``latency_s`` (a real object store answers in 10-50 ms,
    so the number of requests in flight decides the throughput)."""

    def __init__(self, app: Callable, latency_s: float = 0.0) -> None:
        self.app, self.lock, self.latency_s = app, threading.Lock(), latency_s
        self.reset()

    def reset(self) -> None:
        self.counts: Counter[str] = Counter()
        self.bytes_in = self.bytes_out = 0
        #: requests being answered now, and the most at once since the reset
        self.in_flight = getattr(self, "in_flight", 0)
        self.max_in_flight = self.in_flight

    @staticmethod
    def kind(environ: dict) -> str:
        method = environ["REQUEST_METHOD"]
        segments = [s for s in environ.get("PATH_INFO", "").split("/") if s]
        query = environ.get("QUERY_STRING", "")
        if method == "GET" and len(segments) == 1 and "location" not in query:
            return "LIST"
        return method

    def __call__(self, environ: dict, start_response: Callable):
        path = environ.get("PATH_INFO", "")
        if path.startswith("/_bench/"):
            with self.lock:
                body = json.dumps({"counts": dict(self.counts), "bytes_in": self.bytes_in,
                                   "bytes_out": self.bytes_out,
                                   "max_in_flight": self.max_in_flight}).encode()
                if path == "/_bench/reset":
                    self.reset()
            start_response("200 OK", [("Content-Type", "application/json"),
                                      ("Content-Length", str(len(body)))])
            return [body]
        with self.lock:
            self.counts[self.kind(environ)] += 1
            self.bytes_in += int(environ.get("CONTENT_LENGTH") or 0)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.latency_s:
                time.sleep(self.latency_s)
            body = self.app(environ, start_response)
        except BaseException:
            self.done()
            raise
        return _CountedBody(self, body)

    def done(self) -> None:
        """A request answered (its body sent, or its failure raised)."""
        with self.lock:
            self.in_flight -= 1


class _CountedBody:
    """A response body whose bytes are counted; closing it (as a WSGI server always
    does, even before iterating) ends the request."""

    def __init__(self, app: CountingApp, body: Any) -> None:
        self.app, self.body, self.closed = app, body, False

    def __iter__(self):
        for chunk in self.body:
            with self.app.lock:
                self.app.bytes_out += len(chunk)
            yield chunk

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.app.done()
            if hasattr(self.body, "close"):
                self.body.close()


def serve(port: int, latency_ms: float = 0.0, server: str = "werkzeug") -> None:
    """Run moto's S3 server with request counting on 127.0.0.1:``port`` (blocks).

    ``server="keepalive"``: tornado's HTTP/1.1 server, which keeps connections open
    between requests as S3 does (the WSGI app runs on a pool of 128 threads);
    ``"werkzeug"``: werkzeug's development server, which closes the connection after
    every response, so each request also pays for a new TCP connection (a cost that
    falls mostly on clients that connect in Python)."""
    import logging

    from moto.server import DomainDispatcherApplication, create_backend_app

    app = CountingApp(DomainDispatcherApplication(create_backend_app), latency_ms / 1e3)
    if server == "werkzeug":
        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        make_server("127.0.0.1", port, app, threaded=True).serve_forever()
        return
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from tornado.httpserver import HTTPServer
    from tornado.wsgi import WSGIContainer

    for name in ("tornado.access", "tornado.application", "tornado.general"):
        logging.getLogger(name).setLevel(logging.ERROR)

    async def run() -> None:
        container = WSGIContainer(app, executor=ThreadPoolExecutor(128))
        HTTPServer(container, max_body_size=2**31, idle_connection_timeout=120).listen(
            port, "127.0.0.1")
        await asyncio.Event().wait()

    asyncio.run(run())


class Endpoint:
    """The counting moto server in a subprocess, for the length of a ``with`` block
    (``env``: variables added to its environment, e.g. moto's for keeping objects in
    files)."""

    def __init__(self, latency_ms: float = 0.0, server: str = "werkzeug",
                 env: dict[str, str] | None = None) -> None:
        self.latency_ms, self.server, self.env = latency_ms, server, env
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Endpoint:
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve",
                                      str(self.port), "--latency-ms", str(self.latency_ms),
                                      "--server", self.server],
                                     env={**os.environ, **(self.env or {})})
        deadline = time.monotonic() + 60
        while True:
            try:
                self.counts(reset=True)
                return self
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the moto S3 server did not start") from None
                time.sleep(0.1)

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(10)

    def cpu_seconds(self) -> float:
        """User + system CPU seconds of the server process so far."""
        import psutil
        times = psutil.Process(self.proc.pid).cpu_times()
        return times.user + times.system

    def counts(self, reset: bool = False) -> dict:
        """Requests and bytes since the last reset (and reset them, if asked)."""
        what = "reset" if reset else "counts"
        req = urllib.request.Request(f"{self.url}/_bench/{what}", method="POST")
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.loads(r.read())


# -- measuring ------------------------------------------------------------------------------
def measure(endpoint: Endpoint, fn: Callable[[], Any], repeats: int = 1,
            setup: Callable[[], Any] | None = None) -> tuple[dict, Any]:
    """Run ``fn`` (after an untimed ``setup`` whose result it receives): median time,
    server-side requests of the first repeat (and the most answered at once), peak RSS
    increase."""
    from benchmarks.bench_rechunk import RssSampler

    times, first, result, peak = [], None, None, 0.0
    for i in range(repeats):
        arg = setup() if setup else None
        endpoint.counts(reset=True)
        base = RssSampler([os.getpid()]).procs[os.getpid()].memory_info().rss
        with RssSampler([os.getpid()], interval=0.01) as sampler:
            t0 = time.perf_counter()
            result = fn(arg) if setup else fn()
            times.append(time.perf_counter() - t0)
        peak = max(peak, (max(sampler.peaks.values()) - base) / MB)
        if i == 0:
            first = endpoint.counts()
    assert first is not None
    counts = first["counts"]
    return {"wall_s": statistics.median(times), "requests": sum(counts.values()),
            "by_kind": counts, "lists": counts.get("LIST", 0),
            "mb_in": first["bytes_in"] / MB, "mb_out": first["bytes_out"] / MB,
            "max_in_flight": first.get("max_in_flight", 0),
            "peak_rss_mb": max(0.0, peak)}, result


def close_s3fs(run_async: Callable[[Any], Any] | None = None) -> None:
    """Close the aiohttp session of every s3fs filesystem in s3fs's instance cache, each on
    the event loop it was made on, then empty the cache. Dropped unclosed, a session is
    closed when its filesystem is garbage collected: a synchronous one by s3fs's finalizer,
    on whatever loop runs in the collecting thread (zarr-python's: "attached to a
    different loop"), an asynchronous one (zarr-python's) never ("Unclosed client session"
    and "Unclosed connector" at exit). ``run_async(coroutine)``: runs a coroutine on the
    loop of the asynchronous filesystems (``zarr.core.sync.sync``); without it they are
    left open."""
    import s3fs
    from fsspec.asyn import sync

    for fs in list(s3fs.S3FileSystem._cache.values()):
        # s3fs keeps the session's context in this private attribute and closes it
        # through it too (S3FileSystem.close_session)
        creator = getattr(fs, "_s3creator", None)
        if creator is None:
            continue
        if fs.asynchronous:
            if run_async is None:
                continue
            run_async(creator.__aexit__(None, None, None))
        else:
            sync(fs.loop, creator.__aexit__, None, None, None)
        fs._s3creator = fs._s3 = None  # s3fs makes a new session if the instance is used
    s3fs.S3FileSystem.clear_instance_cache()


#: prefix of the directory holding the dummy credential files (removed at exit)
AWS_DIR_PREFIX = "bench-s3-aws-"


def set_aws_env() -> None:
    """Dummy credentials for moto, also as files (tensorstore's AWS SDK logs errors
    when it finds no config or credentials file). The files' directory is made once per
    process (a second call reuses it) and removed when the process exits."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ[name] = "testing"
    os.environ["AWS_DEFAULT_REGION"] = os.environ["AWS_REGION"] = "us-east-1"
    current = Path(os.environ.get("AWS_SHARED_CREDENTIALS_FILE", "")).parent
    if current.name.startswith(AWS_DIR_PREFIX) and current.is_dir():
        return  # this process's files, from an earlier call
    aws = Path(tempfile.mkdtemp(prefix=AWS_DIR_PREFIX))
    atexit.register(shutil.rmtree, aws, True)
    (aws / "credentials").write_text("[default]\naws_access_key_id = testing\n"
                                     "aws_secret_access_key = testing\n")
    (aws / "config").write_text("[default]\nregion = us-east-1\n")
    os.environ["AWS_SHARED_CREDENTIALS_FILE"] = str(aws / "credentials")
    os.environ["AWS_CONFIG_FILE"] = str(aws / "config")


if __name__ == "__main__":  # the endpoint's subprocess
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", type=int, required=True)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--server", choices=("keepalive", "werkzeug"), default="werkzeug")
    args = parser.parse_args()
    serve(args.serve, args.latency_ms, args.server)
