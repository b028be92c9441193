"""Shared fixtures: a real S3 HTTP endpoint (moto's server mode on 127.0.0.1); a Jupyter
kernel running this interpreter (tests/notebook_helpers.py runs notebooks in it)."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import socket
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


def _cache_bytecode() -> None:
    """Let every process of the run keep what it compiles. Where the environment says
    PYTHONDONTWRITEBYTECODE (CI images often do), each test worker, dask worker, child
    process and kernel would compile the package again, and each test worker every test
    module (~0.7 s of CPU per process importing chunkstore; collection 29 s -> 11 s).
    Popped before pytest-xdist starts its workers, so they and their children inherit it."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False


_cache_bytecode()


def pytest_configure(config: pytest.Config) -> None:
    """Compile the package, the benchmarks and the tests' helper modules once, on every
    core, before the test workers start: each worker would compile all of them while
    collecting (children started with ``-B``, as multiprocessing does for a parent
    started under PYTHONDONTWRITEBYTECODE, read the files but never write them). Test
    modules and conftest files are left to pytest, which compiles its own rewritten
    copy of them."""
    if not hasattr(config, "workerinput"):
        import compileall
        import re
        root = Path(__file__).parents[1]
        rewritten = re.compile(r"(^|[/\\])(test_[^/\\]*|conftest)\.py$")
        for package in ("chunkstore", "benchmarks", "tests"):
            compileall.compile_dir(root / package, quiet=1, workers=0, rx=rewritten)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``starts_first`` (real clusters and servers, a minute or more each) run
    before the rest. pytest-xdist hands out the collection from its front, so they start on
    the first worker while the short tests fill the other; in collection order one of them
    could start last and leave the other worker idle for its whole length."""
    first = [item for item in items if item.get_closest_marker("starts_first")]
    if first:
        rest = [item for item in items if not item.get_closest_marker("starts_first")]
        items[:] = first + rest


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what collection imported (numpy, dask, zarr, tensorstore, every test module):
    the interpreter's full collections then skip it for the rest of the session."""
    gc.collect()
    gc.freeze()


_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def s3_storage_options(endpoint: str) -> dict:
    """s3fs options pointing at ``endpoint`` with moto's dummy credentials."""
    return {"anon": False, "key": "testing", "secret": "testing",
            "client_kwargs": {"endpoint_url": endpoint}}


class _AtomicWrites:
    """WSGI wrapper that runs one writing request (PUT, POST, DELETE) at a time.

    moto checks ``If-Match`` / ``If-None-Match`` and then stores the object in two steps
    that requests served by other threads can interleave; real S3 applies a conditional
    write atomically. Serializing writes makes the server behave like S3 there (reads
    stay concurrent); the requests themselves are real HTTP, nothing is mocked."""

    def __init__(self, app) -> None:
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):
        if environ.get("REQUEST_METHOD") in ("PUT", "POST", "DELETE"):
            with self.lock:
                return list(self.app(environ, start_response))
        return self.app(environ, start_response)


class _MotoServer:
    """moto's S3 server (its own S3 app and request handler) in a thread, writes atomic.

    The S3 app is served directly: moto's dispatcher between its services would find S3
    from each request's signature, listing moto's package directory under a lock every
    time; and requests are not logged (a locked write to stderr each). Errors still are."""

    def __init__(self, port: int) -> None:
        from moto.moto_server.werkzeug_app import MotoRequestHandler, create_backend_app
        from werkzeug.serving import make_server

        class QuietHandler(MotoRequestHandler):
            def log_request(self, *args, **kwargs) -> None:
                pass

        app = _AtomicWrites(create_backend_app("s3"))
        self._server = make_server("127.0.0.1", port, app, threaded=True,
                                   request_handler=QuietHandler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join()


@pytest.fixture(scope="session")
def s3_endpoint():
    """URL of a moto S3 server running in a thread of this process (session-wide)."""
    pytest.importorskip("moto.server", reason="moto[server] is not installed")
    pytest.importorskip("s3fs")
    with pytest.MonkeyPatch.context() as mp:
        for name, value in _AWS_ENV.items():
            mp.setenv(name, value)
        for name in ("AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
            mp.delenv(name, raising=False)
        mp.setenv("AWS_CONFIG_FILE", os.devnull)
        mp.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
        port = free_port()
        server = _MotoServer(port)
        server.start()
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.stop()


@pytest.fixture(scope="session")
def _s3_admin(s3_endpoint):
    """The s3fs client that makes and removes the test buckets: one per session, outside
    s3fs's instance cache (a new client costs ~0.25 s of CPU, and a test's own clients
    must not find it)."""
    import s3fs

    return s3fs.S3FileSystem(**s3_storage_options(s3_endpoint), skip_instance_cache=True)


@contextlib.contextmanager
def new_bucket(admin) -> Iterator[str]:
    """A new, empty bucket's name, made and (with what it holds) removed by ``admin``; s3fs's
    instance cache is cleared after, so that no test finds another's clients."""
    import s3fs

    bucket = f"test-{uuid.uuid4().hex[:16]}"
    admin.mkdir(bucket)
    try:
        yield bucket
    finally:
        try:
            admin.invalidate_cache()
            admin.rm(bucket, recursive=True)
        except OSError:
            pass
        s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture
def s3_bucket(s3_endpoint, _s3_admin):
    """A fresh, empty bucket: yields ``("s3://<bucket>", storage_options)``; the test's
    own s3fs clients are new ones (the instance cache is cleared before and after)."""
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    with new_bucket(_s3_admin) as bucket:
        yield f"s3://{bucket}", s3_storage_options(s3_endpoint)


S3_BACKENDS = ("fsspec", "obstore")


@pytest.fixture(params=S3_BACKENDS)
def s3_bucket_both(s3_bucket, request):
    """``s3_bucket`` once per S3 backend: ``(url, options)`` whose options name the
    backend (``"backend": "fsspec" | "obstore"``; obstore is the default of s3:// URLs
    when installed), for behaviour users rely on whichever client serves them. Skipped
    for obstore when it is not installed. (FsspecStore(...)/ObstoreStore(...) take the
    options without "backend": give them to ``resolve_store`` instead.)"""
    if request.param == "obstore":
        pytest.importorskip("obstore")
    url, options = s3_bucket
    return url, {**options, "backend": request.param}


# -- a kernel for the notebook tests -------------------------------------------------------
NOTEBOOK_KERNEL = "chunkstore-test-venv"
# Settings that would point a notebook at a real cluster or bucket: blank them for the test.
CLUSTER_VARS = ("CHUNKSTORE_SCHEDULER", "DASK_SCHEDULER_ADDRESS", "CHUNKSTORE_STORE",
                "CHUNKSTORE_S3_ENDPOINT", "AWS_ENDPOINT_URL", "CHUNKSTORE_ARRAY_GIB")


@pytest.fixture
def kernel_tmp(tmp_path) -> Path:
    """The kernel's temporary directory (TMPDIR): what a notebook leaves there stays."""
    path = tmp_path / "kernel-tmp"
    path.mkdir()
    return path


@pytest.fixture
def venv_kernel(tmp_path, kernel_tmp, monkeypatch):
    """Make a kernelspec running ``sys.executable`` with ``CI=1`` (plus ``env``) and its
    own TMPDIR, found through JUPYTER_PATH; returns its name."""
    for name in CLUSTER_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))

    def make(**env: str) -> str:
        spec_dir = tmp_path / "jupyter" / "kernels" / NOTEBOOK_KERNEL
        spec_dir.mkdir(parents=True, exist_ok=True)
        kernel_env = {"CI": "1", "MPLBACKEND": "module://matplotlib_inline.backend_inline",
                      "TMPDIR": str(kernel_tmp), **{name: "" for name in CLUSTER_VARS}, **env}
        spec = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "chunkstore venv", "language": "python", "env": kernel_env}
        (spec_dir / "kernel.json").write_text(json.dumps(spec))
        return NOTEBOOK_KERNEL

    return make


# -- docker-compose.yml's services as processes (tests/compose_services.py) ----------------
@pytest.fixture(scope="module")
def compose() -> dict:
    """docker-compose.yml, parsed."""
    from tests.compose_services import load_compose
    return load_compose()


@pytest.fixture
def running(compose, tmp_path):
    """The compose services as processes on 127.0.0.1, stopped at the end of the test."""
    from tests.compose_services import services_running
    with services_running(compose, tmp_path) as svc:
        yield svc


@pytest.fixture(scope="session", autouse=True)
def _botocore_data_loaded_once():
    """Every botocore session of this process (s3fs makes one per new client, and the S3
    tests make new clients) shares one data loader, as the clients of one session do: a
    new client then costs ~0.05 s instead of ~0.28 s of parsing the same service-model
    JSON again. The clients, their sessions and credentials stay new."""
    import functools
    import importlib.util

    if importlib.util.find_spec("botocore") is None:
        yield
        return
    import botocore.loaders
    import botocore.session

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(botocore.session, "create_loader",
                   functools.cache(botocore.loaders.create_loader))
        yield
