"""Red team: the obstore read changes (``ObstoreStore.get_views`` handing out obstore's
own buffers, size-limited reads as one plain GET whose size is checked before the body
is read, cached capabilities), against the moto S3 server of tests/conftest.py."""

from __future__ import annotations

import gc
import threading
from concurrent.futures import ThreadPoolExecutor

import numcodecs
import numpy as np
import pytest

pytest.importorskip("obstore")
pytest.importorskip("moto.server")

import chunkstore as cs  # noqa: E402
from chunkstore.errors import ChunkDecodeError  # noqa: E402
from chunkstore.storage.bounds import ObjectSizeError  # noqa: E402
from chunkstore.storage.obstore import store as store_module  # noqa: E402
from chunkstore.storage.obstore.store import ObstoreStore  # noqa: E402


@pytest.fixture
def ob(s3_bucket):
    url, options = s3_bucket
    return ObstoreStore(url + "/root", options)


class _Counting:
    """obstore, with every body read (``GetResult.bytes``) counted per path."""

    def __init__(self, real):
        self.real, self.bodies = real, []

    def __getattr__(self, name):
        return getattr(self.real, name)

    def get(self, client, path, *args, **kwargs):
        result = self.real.get(client, path, *args, **kwargs)
        outer = self

        class Result:
            meta = result.meta

            def bytes(self):
                outer.bodies.append(path)
                return result.bytes()
        return Result()


def test_views_keep_their_content_after_overwrite_delete_and_close(ob):
    first = bytes(range(256)) * 64
    ob.set("a", first)
    ob.set("b", b"xyz")
    views = ob.get_views(["a", "b", "missing"])
    assert views[2] is None
    ob.set("a", b"\0" * len(first))     # overwritten, same size
    ob.delete("b")
    with ob:
        assert bytes(ob.get_views(["a"])[0]) == b"\0" * len(first)
    ob.close()  # closed twice
    del ob
    gc.collect()
    assert bytes(views[0]) == first and bytes(views[1]) == b"xyz"
    assert memoryview(views[0]).readonly
    arr = np.frombuffer(views[0], np.uint8)
    assert arr.sum() == sum(range(256)) * 64


def test_empty_and_missing_objects(ob):
    ob.set("empty", b"")
    assert [None if v is None else bytes(v) for v in ob.get_views(["empty", "nope"])] == [
        b"", None]
    assert [None if v is None else bytes(v) for v in
            ob.get_views(["empty", "nope"], max_bytes=0)] == [b"", None]
    assert ob.get("empty", max_bytes=0) == b"" and ob.get("nope", max_bytes=0) is None
    assert ob.get_many(["empty", "nope"], max_bytes=0) == [b"", None]
    assert ob.get_ranges([("empty", (0, 4)), ("nope", (0, 4))]) == [b"", None]
    assert ob.get_ranges([("empty", (-4, None))]) == [b""]


@pytest.mark.parametrize("call", ["get", "get_many", "get_views"])
def test_too_large_is_never_read_and_names_the_key(ob, monkeypatch, call):
    ob.set("big/0", b"\1" * (4 << 20))
    ob.set("small", b"ok")
    counting = _Counting(store_module.obstore_module())
    monkeypatch.setattr(store_module, "obstore_module", lambda: counting)
    with pytest.raises(ObjectSizeError, match=r"'big/0'.*4194304 bytes.*1000"):
        if call == "get":
            ob.get("big/0", max_bytes=1000)
        else:
            getattr(ob, call)(["small", "big/0"], max_bytes=1000)
    assert not any(p.endswith("big/0") for p in counting.bodies), counting.bodies
    # exactly max_bytes is fine
    assert bytes(ob.get_views(["big/0"], max_bytes=4 << 20)[0]) == b"\1" * (4 << 20)


def test_object_replaced_while_read_is_one_version_or_the_other(ob):
    """A writer flips an object between two versions of different sizes; bounded reads
    (views and copies) only ever see one whole version, or are refused as too large."""
    small, large = b"s" * 1000, b"L" * 300_000
    ob.set("k", small)
    stop = threading.Event()

    def flip():
        while not stop.is_set():
            ob.set("k", large)
            ob.set("k", small)

    writer = threading.Thread(target=flip)
    writer.start()
    seen = set()
    try:
        for _ in range(25):
            for got in (ob.get_views(["k"])[0], ob.get_many(["k", "k"])[1],
                        ob.get("k", max_bytes=len(large))):
                assert bytes(got) in (small, large)
                seen.add(len(got))
            try:
                got = bytes(ob.get_views(["k"], max_bytes=len(small))[0])
                assert got == small
            except ObjectSizeError as e:
                assert "'k'" in str(e)
    finally:
        stop.set()
        writer.join()
    assert seen  # something was read


def test_many_concurrent_readers_get_their_own_objects(ob):
    values = {f"k/{i}": bytes([i]) * (1000 + 37 * i) for i in range(20)}
    ob.set_many(list(values.items()))
    keys = list(values)

    def read(seed):
        order = list(np.random.default_rng(seed).permutation(keys))
        got = ob.get_views(order, max_bytes=10_000)
        assert [bytes(v) for v in got] == [values[k] for k in order]
        return len(got)

    with ThreadPoolExecutor(16) as pool:
        assert sum(pool.map(read, range(16))) == 16 * 20


def test_arrays_read_through_views_after_overwrite(s3_bucket):
    """A plain array read through views, kept, the chunks rewritten meanwhile."""
    url, options = s3_bucket
    where = url + "/arr"
    opts = {**options, "backend": "obstore"}
    data = np.arange(64 * 64, dtype="f8").reshape(64, 64)
    a = cs.create_array(where, shape=data.shape, chunks=(16, 16), dtype="f8", fill_value=0,
                        storage_options=opts, compressors=[numcodecs.Blosc()], cache=0)
    a[...] = data
    first = a[...]
    a[...] = -data
    np.testing.assert_array_equal(first, data)
    np.testing.assert_array_equal(a[...], -data)
    b = cs.open_array(where, mode="r", storage_options=opts)
    np.testing.assert_array_equal(b[3:50, 7:61], -data[3:50, 7:61])


def test_empty_and_oversized_chunk_objects_name_the_key(s3_bucket):
    url, options = s3_bucket
    where = url + "/arr2"
    opts = {**options, "backend": "obstore"}
    a = cs.create_array(where, shape=(32,), chunks=(8,), dtype="i4", fill_value=0,
                        storage_options=opts, compressors=[numcodecs.Blosc()], cache=0)
    a[...] = np.arange(32, dtype="i4")
    raw = ObstoreStore(where, options)
    raw.set("c/1", b"")
    with pytest.raises(ChunkDecodeError, match="c/1"):
        a[...]
    raw.set("c/1", b"\0" * (1 << 20))
    with pytest.raises((ChunkDecodeError, ObjectSizeError), match="c/1"):
        a[...]


def test_sharded_regions_on_s3_while_whole_shards_are_rewritten(s3_bucket):
    """The region path on a store without snapshot ranges (one covering GET per shard):
    equal to NumPy, and a reader racing a whole-shard writer sees each shard whole."""
    url, options = s3_bucket
    where = url + "/sharded"
    opts = {**options, "backend": "obstore"}
    data = np.arange(12 * 18, dtype="i4").reshape(12, 18)
    a = cs.create_array(where, shape=(12, 18), chunks=(2, 3), shards=(4, 6), dtype="i4",
                        fill_value=-1, storage_options=opts, compressors=[numcodecs.Blosc()],
                        cache=0)
    a[0:8, 0:12] = data[0:8, 0:12]          # whole shards
    a[5:12, 10:18] = data[5:12, 10:18]      # partial ones
    ref = np.full((12, 18), -1, "i4")
    ref[0:8, 0:12] = data[0:8, 0:12]
    ref[5:12, 10:18] = data[5:12, 10:18]
    np.testing.assert_array_equal(a[...], ref)
    np.testing.assert_array_equal(a[3:11, 2:17], ref[3:11, 2:17])
    a[0:4, 0:12] = 0  # each shard one value before the race: any whole version is uniform
    stop = threading.Event()
    errors = []

    def writer():
        w = cs.open_array(where, mode="r+", storage_options=opts, cache=0)
        r = 0
        while not stop.is_set():
            r += 1
            w[0:4, 0:12] = np.full((4, 12), r, "i4")   # two shards, each one value

    t = threading.Thread(target=writer)
    t.start()
    try:
        reader = cs.open_array(where, mode="r", storage_options=opts, cache=0)
        for _ in range(15):
            got = reader[0:4, 1:11]
            for half in (got[:, :5], got[:, 5:]):
                if len(np.unique(half)) != 1:
                    errors.append(half)
    finally:
        stop.set()
        t.join()
    assert not errors, errors[:1]


def test_capabilities_cached_by_a_read_only_clone_do_not_leak_into_writers(s3_bucket):
    """A read-only store's capabilities (assumed, never probed) cached before it is
    cloned writable: the writable clone probes, commits conditionally, and threads
    writing distinct elements of one chunk lose nothing."""
    url, options = s3_bucket
    ro = ObstoreStore(url + "/caps", options, read_only=True)
    assert ro.capabilities.partial_reads  # cached now
    rw = ro.with_read_only(False)
    assert not rw.read_only and ro.read_only
    a = cs.create_array(rw, shape=(8,), chunks=(8,), dtype="i4", fill_value=0, cache=0)
    assert rw.capabilities.conditional_writes  # moto honours If-Match
    with ThreadPoolExecutor(4) as pool:
        def write(k):
            for r in range(1, 6):
                a[k] = 10 * r + k
                a[k + 4] = 10 * r + k
        list(pool.map(write, range(4)))
    np.testing.assert_array_equal(cs.open_array(ro, mode="r", cache=0)[...],
                                  np.tile(50 + np.arange(4), 2))
