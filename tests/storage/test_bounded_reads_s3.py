"""Bounded reads on S3 (a moto server), both backends: an object larger than any
encoding of its chunk is refused (ChunkDecodeError naming array and key) without being
downloaded whole, a raw chunk of the wrong size read by ranges is an error, and the
sizes come with the GETs: no HEAD request per chunk."""

from __future__ import annotations

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import ChunkDecodeError
from chunkstore.storage.bounds import ObjectSizeError
from chunkstore.storage.obstore.setup import available

pytest.importorskip("s3fs")

BACKENDS = ["fsspec", pytest.param("obstore", marks=pytest.mark.skipif(
    not available(), reason="obstore is not installed"))]


def _options(options: dict, backend: str) -> dict:
    return {**options, "backend": backend}


def _spy_s3(store) -> list[str]:
    """The names of the S3 operations an FsspecStore sends from now on."""
    calls: list[str] = []
    fs = store.fs
    original = fs._call_s3

    async def spy(method, *args, **kwargs):
        calls.append(method if "Range" not in kwargs else f"{method} {kwargs['Range']}")
        return await original(method, *args, **kwargs)

    fs._call_s3 = spy
    return calls


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("layout", ["plain", "raw", "sharded"])
def test_oversized_object_on_s3(s3_bucket, backend, layout):
    url, options = s3_bucket
    where = f"{url}/big-{layout}.zarr"
    kw = {"plain": {}, "raw": {"compressors": None}, "sharded": {"shards": (512,)}}[layout]
    a = cs.create_array(where, shape=(512,), chunks=(256,), dtype="i4", cache=0,
                        storage_options=_options(options, backend), **kw)
    a[:] = np.arange(512, dtype="i4")
    a[5] = 7  # valid: a read-modify-write reads the exact values back
    want = np.arange(512, dtype="i4")
    want[5] = 7
    np.testing.assert_array_equal(a[:], want)
    np.testing.assert_array_equal(a.read_chunk((1,)), want[256:])
    key = a.chunk_key((0,))
    bound = a._engine.io_of().max_shard if layout == "sharded" else a._engine.io_of().max_stored
    a.store.set(key, bytes(2 * bound))
    for op in (lambda: a.__setitem__(5, 9), lambda: a.read_chunk((0,))):
        with pytest.raises(ChunkDecodeError, match=key):
            op()


def test_fsspec_s3_refuses_before_downloading(s3_bucket):
    """The versioned read of a partial write asks for ``max_bytes + 1`` bytes and reads
    the object's size from Content-Range before the body; whole reads ask for the same
    range (one GET each, no HEAD)."""
    url, options = s3_bucket
    store = cs.FsspecStore(f"{url}/fs-bounded", options)
    store.set("big", bytes(10_000))
    store.set("small", b"abc")
    store.set("empty", b"")
    calls = _spy_s3(store)
    with pytest.raises(ObjectSizeError, match="'big' .* holds 10000 bytes, more than the 100"):
        store.get_versioned_many(["small", "big"], max_bytes=100)
    assert calls == ["get_object bytes=0-100", "get_object bytes=0-100"]
    found = store.get_versioned_many(["small", "empty", "none"], max_bytes=100)
    assert [v for v, _ in found] == [b"abc", b"", None]
    assert found[0][1].value and found[1][1].value  # ETags, usable for If-Match
    assert store.set_if("small", b"new", found[0][1])
    del calls[:]
    assert store.get_many(["small", "none"], max_bytes=100) == [b"new", None]
    assert "head_object" not in calls
    with pytest.raises(ObjectSizeError, match="'big'"):
        store.get_many(["big"], max_bytes=100)
    assert store.get_many(["empty"], max_bytes=100) == [b""]


def test_fsspec_s3_ranged_read_takes_the_size_from_the_same_get(s3_bucket):
    url, options = s3_bucket
    where = f"{url}/ranged.zarr"
    a = cs.create_array(where, shape=(1024,), chunks=(1024,), dtype="i4", compressors=None,
                        storage_options=_options(options, "fsspec"), cache=0)
    a[...] = np.arange(1024)
    r = cs.open_array(where, mode="r", storage_options=_options(options, "fsspec"), cache=0)
    calls = _spy_s3(r.store)
    assert r[600:610].tolist() == list(range(600, 610))
    assert calls and all(c.startswith("get_object bytes=") for c in calls), calls
    good = a.store.get("c/0")
    for bad in (good + bytes(4096), good[:2000]):
        a.store.set("c/0", bad)
        for sel in (1, slice(600, 700)):
            with pytest.raises(ChunkDecodeError, match="'c/0'.*expected 4096"):
                r[sel]


def test_obstore_ranged_and_bounded_reads(s3_bucket):
    pytest.importorskip("obstore")
    from chunkstore.storage.obstore.store import ObstoreStore

    url, options = s3_bucket
    store = ObstoreStore(f"{url}/ob-bounded", options)
    store.set("k", bytes(range(256)) * 16)
    store.set("empty", b"")
    assert store.get_many(["k", "none", "empty"], max_bytes=4096) == [
        bytes(range(256)) * 16, None, b""]
    assert store.get("k", max_bytes=4096) == bytes(range(256)) * 16
    with pytest.raises(ObjectSizeError, match="'k' .* holds 4096 bytes, more than the 4095"):
        store.get_many(["k", "empty"], max_bytes=4095)
    assert store.get_ranges([("k", (0, 2)), ("k", (4094, 4096))], object_size=4096) == [
        b"\0\1", b"\xfe\xff"]
    with pytest.raises(ObjectSizeError, match="'k'.*4096 bytes, expected 8192"):
        store.get_ranges([("k", (0, 2))], object_size=8192)


def test_obstore_versioned_read_is_bounded(s3_bucket):
    """A partial write's versioned read on obstore: a GET whose size is checked before
    the body is read; ETags still serve If-Match."""
    pytest.importorskip("obstore")
    from chunkstore.storage.bounds import takes
    from chunkstore.storage.obstore.store import ObstoreStore

    url, options = s3_bucket
    store = ObstoreStore(f"{url}/ob-versioned", options)
    assert takes(store.get_versioned_many, "max_bytes")
    store.set("big", bytes(10_000))
    store.set("small", b"abc")
    store.set("empty", b"")
    with pytest.raises(ObjectSizeError, match="'big' .* holds 10000 bytes, more than the 100"):
        store.get_versioned_many(["small", "big"], max_bytes=100)
    found = store.get_versioned_many(["small", "empty", "none"], max_bytes=100)
    assert [v for v, _ in found] == [b"abc", b"", None]
    assert store.set_if("small", b"new", found[0][1])
    assert not store.set_if("small", b"lost", found[0][1])  # the ETag moved on
    assert store.set_if("empty", b"was empty", found[1][1])
    assert store.get_versioned_many(["small", "empty"])[0][0] == b"new"
    assert store.get("empty") == b"was empty"
    assert store.get_versioned_many([], max_bytes=1) == []
