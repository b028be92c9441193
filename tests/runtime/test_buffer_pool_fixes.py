"""Red team round 5: the attacks that found bugs (each failed before its fix): a shard
with unused space refused by partial writes, v2 Categorize of objects losing strings,
obstore mixing given keys with the environment's session token, the buffer pool beyond
its budgets and disabled by a failed task. Each test asserts the correct outcome."""

from __future__ import annotations

import http.server
import threading

import numcodecs
import numpy as np
import pytest

import chunkstore as cs
from chunkstore.runtime import current


# -- bounded reads: a spec-valid shard with unused space is refused ------------------------
def test_shard_with_unused_space_between_inner_chunks_accepts_partial_writes(tmp_path):
    """The sharding spec (sharding-indexed v1.0, "Binary shard format"): "chunks are
    written successively in a shard, where unused space between them is allowed".
    Writers that append updated inner chunks (zarrs' partial encoder) leave such space.
    zarr-python and chunkstore read the shard; chunkstore refuses every partial write of
    it (shard_bound = index + n x inner bound is passed as max_bytes), so the user can
    no longer update the array."""
    zarr = pytest.importorskip("zarr")
    google_crc32c = pytest.importorskip("google_crc32c")
    from zarr.codecs import BytesCodec, Crc32cCodec, ShardingCodec

    path = str(tmp_path / "s.zarr")
    data = np.arange(64, dtype="<i4")
    z = zarr.create_array(path, shape=(64,), chunks=(64,), dtype="<i4", fill_value=0,
                          compressors=None,
                          serializer=ShardingCodec(chunk_shape=(16,), codecs=[BytesCodec()],
                                                   index_codecs=[BytesCodec(), Crc32cCodec()]))
    z[...] = data
    key = tmp_path / "s.zarr" / "c" / "0"
    blob = key.read_bytes()
    n = 4 * 16 + 4
    index = np.frombuffer(blob[-n:-4], "<u8").reshape(4, 2)
    body, entries = b"", []
    for offset, size in index:
        entries.append((len(body), int(size)))
        body += blob[offset:offset + size] + bytes(1000)  # unused space after each
    raw = np.array(entries, "<u8").tobytes()
    key.write_bytes(body + raw + google_crc32c.value(raw).to_bytes(4, "little"))
    np.testing.assert_array_equal(np.asarray(zarr.open_array(path)[...]), data)

    a = cs.open_array(path, mode="r+", cache=0)
    np.testing.assert_array_equal(a[...], data)
    a[5] = 99  # was: ChunkDecodeError "holds 4324 bytes, more than the 324 ..."
    want = data.copy()
    want[5] = 99
    np.testing.assert_array_equal(a[...], want)
    np.testing.assert_array_equal(np.asarray(zarr.open_array(path)[...]), want)


# -- v2 object arrays with a Categorize filter: the strings are lost on write ---------------
def test_v2_str_array_with_categorize_filter_round_trips(tmp_path):
    """zarr-python 2 treats a Categorize filter as the object codec of an object array
    (it inserts no vlen codec when filters are given). chunkstore puts vlen-utf8 in
    front of it: Categorize then encodes the vlen *bytes*, maps every byte to 0, and the
    write succeeds while storing all-zero chunks; reading raises ChunkDecodeError. The
    user's strings are gone. Expected: exact round trip (or a refusal at create)."""
    labels = ["apple", "banana", "cherry"]
    data = np.array(labels * 2, dtype=object)
    a = cs.create_array(str(tmp_path / "c.zarr"), shape=(6,), chunks=(3,), dtype=str,
                        zarr_format=2, compressors=numcodecs.Zlib(), cache=0,
                        filters=[numcodecs.Categorize(labels, dtype=object, astype="u1")])
    a[...] = data
    got = cs.open_array(str(tmp_path / "c.zarr"), mode="r", cache=0)[...]
    assert got.tolist() == data.tolist()


# -- obstore option translation: the environment's session token joins explicit keys -------
class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: list = []

    def do_GET(self):  # noqa: N802
        type(self).seen.append({k.lower(): v for k, v in self.headers.items()})
        body = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code>'
                b'<Message>none</Message></Error>')
        self.send_response(404)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_HEAD = do_GET

    def log_message(self, *args):
        pass


@pytest.fixture
def recorder():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Recorder.seen = []
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        thread.join()


@pytest.mark.parametrize("backend", ["fsspec", "obstore"])
def test_explicit_keys_are_not_mixed_with_the_environments_session(recorder, monkeypatch,
                                                                    backend):
    """storage_options key/secret without a token: botocore (s3fs) signs with exactly
    those; obstore (the default backend) also sends the environment's
    AWS_SESSION_TOKEN (and AWS_REQUEST_PAYER) with them. On AWS a session token that
    does not belong to the access key is InvalidToken: every request fails; a shell with
    temporary credentials (SSO, an assumed role) is the common case."""
    pytest.importorskip("obstore")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "ENVKEY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "envsecret")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "env-session-token")
    monkeypatch.setenv("AWS_REQUEST_PAYER", "true")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    from chunkstore.storage.resolve import resolve_store
    store = resolve_store(
        "s3://bucket/x", storage_options={"key": "MYKEY", "secret": "mysecret",
                                          "endpoint_url": recorder, "backend": backend})
    assert store.get("a") is None
    headers = _Recorder.seen[-1]
    assert "Credential=MYKEY/" in headers["authorization"]
    assert "x-amz-security-token" not in headers
    assert "x-amz-request-payer" not in headers


# -- buffer pool: budgets ------------------------------------------------------------------
MiB = 1 << 20


@pytest.fixture
def pool(monkeypatch):
    monkeypatch.setattr(current().buffers, "idle_seconds", 60)
    current().buffers.release()
    yield current().buffers
    current().buffers.release()


def _run_concurrently(n: int, budget: int, nbytes: int) -> None:
    barrier = threading.Barrier(n)

    def task():
        with current().buffers.retaining(budget):
            a = current().buffers.borrow((nbytes,), "u1")
            barrier.wait()
            current().buffers.give_back(a)
            del a
            barrier.wait()

    threads = [threading.Thread(target=task) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_pool_holds_no_more_than_the_running_tasks_budgets(pool):
    """buffer_pool's contract: "The pool never holds more than the budgets of the tasks
    running, minus what they have borrowed". After a stage of 4 concurrent tasks of
    16 MiB, a task of a 4 MiB budget (the next rechunk, a smaller max_mem) runs with
    12 MiB pooled (and 13 MiB after it): ``retaining`` sets the limit to
    max(old limit, budgets) on entry and, when the last task leaves, never trims."""
    _run_concurrently(4, 16 * MiB, 4 * MiB)
    with current().buffers.retaining(4 * MiB):
        b = current().buffers.borrow((MiB,), "u1")
        assert current().buffers.pooled_bytes() <= 3 * MiB  # was: 12 MiB
        current().buffers.give_back(b)
        del b
    assert current().buffers.pooled_bytes() <= 4 * MiB  # was: 13 MiB


def test_a_failed_task_does_not_disable_the_pool(pool):
    """A task that raises keeps its block (rightly: its traceback may view it) but its
    entry in ``_lent`` is never removed, not even by the idle release: it counts against
    every later budget forever, so later tasks whose budget is their block never pool
    again (the 40% page-zeroing cost comes back for the life of the worker)."""
    with pytest.raises(RuntimeError):
        with current().buffers.retaining(4 * MiB):
            a = current().buffers.borrow((4 * MiB,), "u1")
            raise RuntimeError("task failed")
    del a
    current().buffers.release()  # what the idle timer does
    with current().buffers.retaining(4 * MiB):
        b = current().buffers.borrow((4 * MiB,), "u1")
        current().buffers.give_back(b)
        del b
        assert current().buffers.pooled_bytes() == 4 * MiB  # was: 0
    assert not current().buffers.lent_bytes()
