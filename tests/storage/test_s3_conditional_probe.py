"""Conditional writes on S3 are verified, not assumed (issue 30, item 7).

An S3 server behind a gateway that strips ``If-Match`` / ``If-None-Match`` (older MinIO,
some proxies) applies every conditional PUT: 4 writers of distinct inner chunks of one
shard then silently lost 46 of 64 updates, through either backend. Here a real HTTP
proxy in front of the moto server strips the headers (nothing mocked): the first
conditional commit of a writable store probes the server, which fails, so the store
reports no conditional writes (with a ConditionalWritesWarning), partial writes without
a synchronizer are refused before anything is stored, and with one the 4 writers lose
nothing. Without the proxy the probe passes and writers need no synchronizer.
"""

from __future__ import annotations

import http.client
import http.server
import threading
import uuid
import warnings

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import ConditionalWritesWarning, SynchronizerRequiredError
from chunkstore.storage.base import ABSENT
from chunkstore.storage.resolve import resolve_store
from chunkstore.storage.s3_conditional import PROBE_PREFIX
from tests.conftest import s3_storage_options

CONDITIONS = ("if-match", "if-none-match")
#: headers of one hop only, not forwarded (bodies are re-framed with a Content-Length)
_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te",
        "trailer", "upgrade", "expect", "content-length"}
_NOT_IMPLEMENTED = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>NotImplemented'
                    b'</Code><Message>conditional requests</Message></Error>')


class _Forward(http.server.BaseHTTPRequestHandler):
    """Forwards each request to the upstream server, without the headers in
    ``server.strip`` (or answering 501 NotImplemented to a request that has one, with
    ``server.refuse``); records ``(method, path, condition headers received)``."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if not size:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _forward(self) -> None:
        body = self._body()
        server: _Proxy = self.server  # type: ignore[assignment]
        conditions = sorted(k.lower() for k in self.headers if k.lower() in CONDITIONS)
        server.log.append((self.command, self.path, conditions))
        if server.refuse and conditions:
            self._answer(501, "Not Implemented", [("Content-Type", "application/xml")],
                         _NOT_IMPLEMENTED, None)
            return
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() not in _HOP and k.lower() not in server.strip}
        upstream = http.client.HTTPConnection(*server.upstream, timeout=60)
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            response = upstream.getresponse()
            data = response.read()
        finally:
            upstream.close()
        self._answer(response.status, response.reason, response.getheaders(), data,
                     response.getheader("Content-Length"))

    def _answer(self, status: int, reason: str, headers: list, data: bytes,
                head_length: str | None) -> None:
        self.send_response_only(status, reason)
        for k, v in headers:
            if k.lower() not in _HOP:
                self.send_header(k, v)
        if self.command != "HEAD":
            self.send_header("Content-Length", str(len(data)))
        elif head_length is not None:
            self.send_header("Content-Length", head_length)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward


class _Proxy(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, upstream: str, strip: tuple[str, ...], refuse: bool) -> None:
        super().__init__(("127.0.0.1", 0), _Forward)
        host, port = upstream.split("://", 1)[1].rsplit(":", 1)
        self.upstream, self.strip, self.refuse = (host, int(port)), set(strip), refuse
        self.log: list[tuple[str, str, list[str]]] = []
        self.url = f"http://127.0.0.1:{self.server_address[1]}"

    def probes(self) -> list[tuple[str, list[str]]]:
        """``(method, condition headers)`` of the requests on probe objects."""
        return [(m, c) for m, p, c in self.log if PROBE_PREFIX in p]

    def writes(self) -> list[str]:
        return [f"{m} {p}" for m, p, _ in self.log if m in ("PUT", "POST", "DELETE")]


@pytest.fixture
def proxy_to(s3_endpoint):
    """``proxy_to(strip=CONDITIONS, refuse=False)``: a started proxy to the moto
    server."""
    started: list[_Proxy] = []

    def start(strip: tuple[str, ...] = CONDITIONS, refuse: bool = False) -> _Proxy:
        proxy = _Proxy(s3_endpoint, strip, refuse)
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        started.append(proxy)
        return proxy

    yield start
    for proxy in started:
        proxy.shutdown()
        proxy.server_close()


def _through(proxy: _Proxy, bucket: tuple[str, dict]) -> tuple[str, dict]:
    """``s3_bucket_both``'s bucket, reached through ``proxy``."""
    url, options = bucket
    return url, {**s3_storage_options(proxy.url), "backend": options["backend"]}


def _left_objects(s3_bucket) -> list[str]:
    """Every object of the bucket, listed straight from the server."""
    url, options = s3_bucket
    st = resolve_store(url, storage_options={**options, "backend": "fsspec"})
    return sorted(st.list())


TOTAL, WRITERS = 64, 4


def _new_sharded(url: str, options: dict) -> None:
    cs.create_array(url, shape=(TOTAL,), chunks=(1,), shards=(TOTAL,), dtype="i4",
                    fill_value=0, storage_options=options)


def _race(url: str, options: dict, synchronizer=None, total: int = TOTAL) -> list:
    """``WRITERS`` threads, each with its own array handle, released together, write
    ``a[i] = i + 1`` for their own inner chunks ``i`` (one read-modify-write of the one
    shard each); returns the exception each raised (None: finished)."""
    barrier = threading.Barrier(WRITERS)
    outcome: list = [None] * WRITERS

    def writer(w: int) -> None:
        a = cs.open_array(url, mode="r+", storage_options=options, synchronizer=synchronizer)
        barrier.wait()
        try:
            for i in range(w, total, WRITERS):
                a[i] = i + 1
        except Exception as e:  # noqa: BLE001 (reported to the test)
            outcome[w] = e

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcome


def _stored(url: str, options: dict) -> np.ndarray:
    return cs.open_array(url, mode="r", storage_options=options)[:]


def test_probe_finds_ignored_conditions_once(s3_bucket_both, s3_bucket, proxy_to):
    """A writable store probes before relying on conditions: the stripped server fails,
    the flags say so, with one warning; another store on the same endpoint and bucket
    (either backend) does not probe again; a read-only store never probes; the probe
    objects are gone. A gateway stripping If-Match only is caught too."""
    pytest.importorskip("obstore")
    proxy = proxy_to()
    url, options = _through(proxy, s3_bucket_both)
    resolve_store(url, storage_options=s3_bucket_both[1]).set("k", b"v")  # not proxied
    reader = resolve_store(url, mode="r", storage_options=options)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConditionalWritesWarning)
        assert reader.capabilities.conditional_writes  # what the client can send: not probed
        assert not reader.capabilities.conditional_writes_ignored and reader.get("k") == b"v"
    assert proxy.writes() == []

    st = resolve_store(url + "/x.zarr", storage_options=options)
    with pytest.warns(ConditionalWritesWarning, match=r"does not honour conditional"):
        assert st.capabilities.conditional_writes is False
    assert st.capabilities.conditional_delete is False and st.capabilities.conditional_writes_ignored
    assert ("PUT", ["if-none-match"]) in proxy.probes()  # sent, and stripped on the way
    probed = len(proxy.log)
    other = "fsspec" if options["backend"] == "obstore" else "obstore"
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConditionalWritesWarning)
        for backend in (options["backend"], other):
            again = resolve_store(url + "/y.zarr", storage_options={**options,
                                                                    "backend": backend})
            assert not again.capabilities.conditional_writes and again.capabilities.conditional_writes_ignored
        assert not reader.capabilities.conditional_writes  # now known in this process
    assert len(proxy.log) == probed  # no second probe

    half = proxy_to(strip=("if-match",))
    st = resolve_store(url, storage_options=_through(half, s3_bucket_both)[1])
    with pytest.warns(ConditionalWritesWarning):
        assert not st.capabilities.conditional_writes
    assert ("PUT", ["if-match"]) in half.probes()
    assert _left_objects(s3_bucket) == ["k"]


def test_server_answering_not_implemented(s3_bucket, proxy_to):
    """A server refusing conditional requests with 501 fails the probe (no error): the
    store writes without conditions. (fsspec only: obstore retries 5xx answers.)"""
    proxy = proxy_to(refuse=True)
    url, options = _through(proxy, (s3_bucket[0], {"backend": "fsspec"}))
    st = resolve_store(url, storage_options=options)
    with pytest.warns(ConditionalWritesWarning):
        assert not st.capabilities.conditional_writes
    assert st.set_if("k", b"v", ABSENT)  # unchecked now: no 501 reaches it
    assert st.get("k") == b"v" and _left_objects(s3_bucket) == ["k"]


def test_shard_writers_refused_or_synchronized(s3_bucket_both, s3_bucket, proxy_to):
    """4 writers of inner chunks of one shard, through the stripping proxy. Without a
    synchronizer each is refused at its first write, naming the store and what to pass,
    and nothing is stored (before the probe they silently lost 46 of 64 updates). With
    one they keep every update. Writes of the whole shard need none."""
    proxy = proxy_to()
    url, options = _through(proxy, s3_bucket_both)
    url += "/x.zarr"
    with pytest.warns(ConditionalWritesWarning):
        _new_sharded(url, options)
    for error in _race(url, options):
        assert isinstance(error, SynchronizerRequiredError)
        assert "ignores conditional requests" in str(error) and proxy.url in str(error)
        assert "ThreadSynchronizer()" in str(error) and "'c/0'" in str(error)
    assert _left_objects(s3_bucket) == ["x.zarr/zarr.json"]

    # 16 inner chunks, 4 per writer (unsynchronized, ~70% of such updates were lost)
    assert _race(url, options, cs.ThreadSynchronizer(), total=16) == [None] * WRITERS
    expected = np.zeros(TOTAL, "i4")
    expected[:16] = np.arange(1, 17)
    np.testing.assert_array_equal(_stored(url, options), expected)
    # after the probe, no condition is sent where it would be ignored
    assert all(c == [] for _, p, c in proxy.log if PROBE_PREFIX not in p)

    a = cs.open_array(url, mode="r+", storage_options=options)
    a[:] = np.arange(TOTAL, dtype="i4") * 3  # the whole shard: last writer wins, safely
    np.testing.assert_array_equal(_stored(url, options), np.arange(TOTAL) * 3)


def test_probe_passes_on_a_server_honouring_conditions(s3_bucket_both, s3_bucket):
    """Without the proxy: no warning, the flags hold, writers need no synchronizer and
    lose nothing; the probe left nothing behind."""
    url, options = s3_bucket_both
    url += f"/direct-{uuid.uuid4().hex[:6]}.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConditionalWritesWarning)
        st = resolve_store(url, storage_options=options)
        assert st.capabilities.conditional_writes and st.capabilities.conditional_delete
        assert not st.capabilities.conditional_writes_ignored
        _new_sharded(url, options)
        assert _race(url, options, total=16) == [None] * WRITERS
    expected = np.zeros(TOTAL, "i4")
    expected[:16] = np.arange(1, 17)
    np.testing.assert_array_equal(_stored(url, options), expected)
    assert not [k for k in _left_objects(s3_bucket) if PROBE_PREFIX in k]
