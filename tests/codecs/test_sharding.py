"""Zarr v3 sharding (sharding_indexed): round trips, bytes on disk, ranged IO, interop."""

from __future__ import annotations

import json
import threading

import numcodecs
import numpy as np
import pytest

import chunkstore as cs
from chunkstore.codecs.sharding import ShardingCodec
from chunkstore.errors import ChunkDecodeError
from chunkstore.storage.local.store import LocalStore
from chunkstore.storage.memory import MemoryStore

EMPTY = 2**64 - 1


# -- helpers ---------------------------------------------------------------------------------
class CountingMixin:
    """Counts store read calls and the bytes they return (a real store underneath)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # lists mutated in place: read-only views of the store share them
        self.calls: list[tuple[str, int]] = []  # (method, number of keys / ranges)
        self.sizes: list[int] = []
        self.ranges: list[tuple[str, object]] = []

    def reset(self) -> None:
        for log in (self.calls, self.sizes, self.ranges):
            log.clear()

    @property
    def nbytes(self) -> int:
        return sum(self.sizes)

    def _count(self, values):
        self.sizes.extend(len(v) for v in values if v is not None)

    def _batch(self, name, n, ranges, fn, *args):
        """Record one call (not the calls it makes inside) and the bytes it returns."""
        depth = getattr(self, "_depth", 0)
        if depth == 0:
            self.calls.append((name, n))
            self.ranges.extend(ranges)
        self._depth = depth + 1
        try:
            found = fn(*args)
        finally:
            self._depth = depth
        if depth == 0:
            values = [v[0] if isinstance(v, tuple) else v for v in found]
            self._count(values)
        return found

    # keyword arguments (bounds such as ``max_bytes``) go through to the store
    def get(self, key, byte_range=None, **kw):
        return self._batch("get", 1, [(key, byte_range)], lambda: [super(CountingMixin, self)
                                                                   .get(key, byte_range, **kw)])[0]

    def get_many(self, keys, **kw):
        return self._batch("get_many", len(keys), [(k, None) for k in keys],
                           lambda: super(CountingMixin, self).get_many(keys, **kw))

    def get_versioned_many(self, keys):
        return self._batch("get_versioned_many", len(keys), [(k, None) for k in keys],
                           super().get_versioned_many, keys)

    def get_ranges(self, requests, **kw):
        return self._batch("get_ranges", len(requests), list(requests),
                           lambda: super(CountingMixin, self).get_ranges(requests, **kw))

    def get_versioned_ranges(self, requests):
        return self._batch("get_versioned_ranges", len(requests),
                           [(k, r) for k, r, _ in requests],
                           lambda: super(CountingMixin, self).get_versioned_ranges(requests))


class CountingMemoryStore(CountingMixin, MemoryStore):
    pass


class CountingLocalStore(CountingMixin, LocalStore):
    pass


def crc32c(data: bytes) -> int:
    """Plain CRC-32C (Castagnoli), independent of numcodecs."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def split_shard(blob: bytes, n_inner: int, location: str) -> np.ndarray:
    """The (n, 2) index of a shard, its checksum verified by hand."""
    size = 16 * n_inner + 4
    raw = blob[:size] if location == "start" else blob[-size:]
    body, checksum = raw[:-4], int.from_bytes(raw[-4:], "little")
    assert crc32c(body) == checksum
    return np.frombuffer(body, dtype="<u8").reshape(n_inner, 2)


def selections(shape):
    rng = np.random.default_rng(1)
    yield (Ellipsis,)
    for _ in range(6):
        sel = []
        for n in shape:
            a, b = sorted(rng.integers(0, n + 1, 2))
            sel.append(slice(int(a), int(b), int(rng.integers(1, 3))))
        yield tuple(sel)
    yield tuple(n - 1 for n in shape)


# -- round trips ----------------------------------------------------------------------------------
@pytest.mark.parametrize("location", ["start", "end"])
@pytest.mark.parametrize("compressors", [None, "auto", numcodecs.Zstd(level=3)])
def test_round_trip_vs_numpy(location, compressors):
    shape, chunks, shards = (23, 17), (3, 4), (6, 8)  # partial edge shards and inner chunks
    a = cs.create_array(None, shape=shape, chunks=chunks, dtype="f4", fill_value=-1,
                        shards={"shape": shards, "index_location": location},
                        compressors=compressors)
    assert a.chunks == chunks and a.shards == shards
    ref = np.full(shape, -1, dtype="f4")
    rng = np.random.default_rng(0)
    for sel in selections(shape):
        value = rng.standard_normal(ref[sel].shape).astype("f4")
        a[sel] = value
        ref[sel] = value
        np.testing.assert_array_equal(a[...], ref)
        for read_sel in selections(shape):
            np.testing.assert_array_equal(a[read_sel], ref[read_sel])
    rows, cols = [0, 5, 22], [16, 2]
    a.oindex[rows, cols] = 9.5
    ref[np.ix_(rows, cols)] = 9.5
    a.vindex[[3, 4, 20], [1, 15, 7]] = [1.5, 2.5, 3.5]
    ref[[3, 4, 20], [1, 15, 7]] = [1.5, 2.5, 3.5]
    np.testing.assert_array_equal(a[...], ref)
    np.testing.assert_array_equal(a.oindex[rows, cols], ref[np.ix_(rows, cols)])
    np.testing.assert_array_equal(a.vindex[[1, 22, 7], [16, 0, 3]], ref[[1, 22, 7], [16, 0, 3]])


def test_nested_filters_and_f_order():
    data = np.arange(12 * 10, dtype="i8").reshape(12, 10)
    a = cs.create_array(None, shape=data.shape, chunks=(4, 5), shards=(8, 10), dtype="i8",
                        filters=[numcodecs.Delta(dtype="i8")], compressors=numcodecs.Zlib(1),
                        order="F")
    a[...] = data
    np.testing.assert_array_equal(a[...], data)
    inner = a.metadata.codecs[0]["configuration"]["codecs"]
    assert [c["name"] for c in inner] == ["transpose", "numcodecs.delta", "bytes",
                                          "numcodecs.zlib"]
    assert len(a.filters) == 2 and len(a.compressors) == 1
    np.testing.assert_array_equal(cs.open_array(a.store, mode="r")[3:9, 4:7], data[3:9, 4:7])


def test_missing_inner_chunks_and_bytes_on_disk():
    store = MemoryStore()
    a = cs.create_array(store, shape=(8, 8), chunks=(2, 2), shards=(4, 4), dtype="<u2",
                        compressors=None, fill_value=0)
    a[0:2, 2:4] = 7          # inner chunk (0, 1) of shard (0, 0)
    a[3, 3] = 9              # inner chunk (1, 1) of shard (0, 0), partially
    blob = store.get("c/0/0")
    index = split_shard(blob, 4, "end")
    assert index[0].tolist() == [EMPTY, EMPTY] and index[2].tolist() == [EMPTY, EMPTY]
    # stored inner chunks are raw little-endian bytes at their offsets
    off, n = (int(v) for v in index[1])
    assert n == 8
    assert np.frombuffer(blob[off:off + n], "<u2").tolist() == [7] * 4
    off, n = (int(v) for v in index[3])
    assert np.frombuffer(blob[off:off + n], "<u2").tolist() == [0, 0, 0, 9]
    assert len(blob) == 2 * 8 + 16 * 4 + 4
    assert sorted(store.list()) == ["c/0/0", "zarr.json"]  # empty shards are not stored
    assert a.nchunks_initialized == 4 and a.nchunks == 16  # zarr-python: shards x 4
    ref = np.zeros((8, 8), "u2")
    ref[0:2, 2:4] = 7
    ref[3, 3] = 9
    np.testing.assert_array_equal(a[...], ref)


def test_index_at_start_offsets_count_the_index():
    store = MemoryStore()
    a = cs.create_array(store, shape=(4,), chunks=(2,), shards={"shape": (4,),
                        "index_location": "start"}, dtype="<i4", compressors=None)
    a[...] = [1, 2, 3, 4]
    blob = store.get("c/0")
    index = split_shard(blob, 2, "start")
    assert index.tolist() == [[36, 8], [44, 8]]
    assert np.frombuffer(blob[36:], "<i4").tolist() == [1, 2, 3, 4]
    doc = json.loads(store.get("zarr.json"))
    assert doc["chunk_grid"]["configuration"]["chunk_shape"] == [4]
    conf = doc["codecs"][0]["configuration"]
    assert conf["index_location"] == "start" and conf["chunk_shape"] == [2]
    assert [c["name"] for c in conf["index_codecs"]] == ["bytes", "crc32c"]


def test_nested_compressed_inner_chunks_decode_with_numcodecs():
    store = MemoryStore()
    data = np.arange(64, dtype="<f8").reshape(8, 8)
    cs.array(data, store=store, chunks=(4, 4), shards=(8, 8), compressors=numcodecs.Zstd(5))
    blob = store.get("c/0/0")
    index = split_shard(blob, 4, "end")
    for i, (r, c) in enumerate(np.ndindex(2, 2)):
        off, n = (int(v) for v in index[i])
        inner = np.frombuffer(numcodecs.Zstd().decode(blob[off:off + n]), "<f8").reshape(4, 4)
        np.testing.assert_array_equal(inner, data[r * 4:(r + 1) * 4, c * 4:(c + 1) * 4])


# -- ranged IO -------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["memory", "local"])
@pytest.mark.parametrize("location", ["start", "end"])
def test_reading_one_inner_chunk_fetches_index_and_that_range(kind, location, tmp_path):
    store = CountingMemoryStore() if kind == "memory" else CountingLocalStore(str(tmp_path))
    data = np.random.default_rng(0).standard_normal((64, 64)).astype("f4")
    a = cs.create_array(store, shape=data.shape, chunks=(8, 8), dtype="f4",
                        shards={"shape": (64, 64), "index_location": location})
    a[...] = data
    shard_size = store.getsize("c/0/0")
    index = split_shard(store.get("c/0/0"), 64, location)
    reader = cs.open_array(store, mode="r+")  # same store object: counted
    store.reset()
    np.testing.assert_array_equal(reader[8:16, 24:32], data[8:16, 24:32])  # inner (1, 3)
    nbytes = int(index[1 * 8 + 3, 1])
    # the index, then the chunk with the index again (to check that no other writer
    # replaced the shard in between: the same call reads both from one version)
    index_bytes = 64 * 16 + 4
    assert store.calls == [("get_versioned_ranges", 1), ("get_versioned_ranges", 2)]
    assert store.nbytes == 2 * index_bytes + nbytes
    assert store.nbytes < shard_size / 4
    # the index is cached: a second read is one batched call (the chunk, and the index
    # again to check that no other writer replaced the shard)
    store.reset()
    np.testing.assert_array_equal(reader[10, 40:48], data[10, 40:48])
    assert store.calls == [("get_versioned_ranges", 2)]
    assert store.nbytes == int(index[13, 1]) + index_bytes
    # one batched request covers several shards' indexes and chunks
    store.reset()
    np.testing.assert_array_equal(reader.read_chunk((7, 7)), data[56:, 56:])
    assert all(name == "get_versioned_ranges" for name, _ in store.calls)


def test_several_shards_one_batched_request_each_stage():
    store = CountingMemoryStore()
    data = np.arange(256 * 256, dtype="i4").reshape(256, 256)
    a = cs.array(data, store=store, chunks=(32, 32), shards=(128, 128), compressors=None)
    reader = cs.open_array(store, mode="r+")  # same store object: counted
    store.reset()
    sel = (slice(2, 256, 96), slice(2, 256, 96))  # 9 far-apart inner chunks in 4 shards
    np.testing.assert_array_equal(reader[sel], data[sel])
    # + indexes rechecked
    assert store.calls == [("get_versioned_ranges", 4), ("get_versioned_ranges", 9 + 4)]
    assert store.nbytes == 2 * 4 * (16 * 16 + 4) + 9 * 32 * 32 * 4
    assert a.nchunks_initialized == 64 and a.nchunks == 64


def test_stale_cached_index_is_reread():
    store = MemoryStore()
    a = cs.create_array(store, shape=(8,), chunks=(2,), shards=(8,), dtype="i4",
                        compressors=None)
    a[...] = np.arange(8)
    reader = cs.open_array(store, mode="r+")  # same store object: counted
    np.testing.assert_array_equal(reader[...], np.arange(8))
    writer = cs.open_array(store)
    writer[0:2] = 0   # removes inner chunk 0: the others move forward in the shard
    writer[6:8] = 0
    ref = np.arange(8)
    ref[0:2] = ref[6:8] = 0
    np.testing.assert_array_equal(reader[2:8], ref[2:8])


@pytest.mark.parametrize("backend", ["fsspec", "obstore"])
@pytest.mark.parametrize("location", ["start", "end"])
def test_s3_reads_index_and_one_range(s3_bucket, location, backend):
    if backend == "obstore":
        pytest.importorskip("obstore")
        from chunkstore.storage.obstore.store import ObstoreStore as Backend
    else:
        from chunkstore.storage import FsspecStore as Backend

    class CountingS3Store(CountingMixin, Backend):
        pass

    url, options = s3_bucket
    data = np.arange(32 * 32, dtype="i4").reshape(32, 32)
    cs.array(data, store=f"{url}/x.zarr", storage_options={**options, "backend": backend},
             chunks=(4, 4), shards={"shape": (32, 32), "index_location": location})
    store = CountingS3Store(f"{url}/x.zarr", options)
    a = cs.open_array(store, mode="r+")
    store.reset()
    np.testing.assert_array_equal(a[4:8, 8:12], data[4:8, 8:12])
    # the index, then one range pinned to the index's ETag (If-Match): no index re-read
    assert store.calls == [("get_versioned_ranges", 1), ("get_versioned_ranges", 1)]
    rng = store.ranges[0][1]
    assert rng == ((0, 64 * 16 + 4) if location == "start" else (-(64 * 16 + 4), None))
    assert store.ranges[1][1][0] >= 0
    # the index once + one (compressed) chunk
    assert store.nbytes < (64 * 16 + 4) + 4 * 4 * 4 + 64
    store.reset()  # the index cached with its ETag: one GET, pinned
    np.testing.assert_array_equal(a[8:12, 8:12], data[8:12, 8:12])
    assert store.calls == [("get_versioned_ranges", 1)]
    assert store.nbytes < 4 * 4 * 4 + 64
    a[0, 0] = -1  # partial shard update on S3
    data[0, 0] = -1
    np.testing.assert_array_equal(cs.open_array(f"{url}/x.zarr", mode="r",
                                                storage_options=options)[...], data)


# -- writes ------------------------------------------------------------------------------------
def test_partial_shard_update_keeps_untouched_inner_bytes():
    store = CountingMemoryStore()
    data = np.arange(16 * 16, dtype="i2").reshape(16, 16)
    a = cs.array(data, store=store, chunks=(4, 4), shards=(16, 16), compressors=numcodecs.GZip())
    before = store.get("c/0/0")
    idx_before = split_shard(before, 16, "end")
    store.reset()
    a[5:7, 5:7] = -1                  # one inner chunk, partially
    data[5:7, 5:7] = -1
    # read the shard once, with its generation (the commit checks it is unchanged)
    assert [name for name, _ in store.calls] == ["get_versioned_many"]
    after = store.get("c/0/0")
    idx_after = split_shard(after, 16, "end")
    for i in range(16):
        if i == 5:
            continue
        ob, nb = (int(v) for v in idx_before[i])
        oa, na = (int(v) for v in idx_after[i])
        assert before[ob:ob + nb] == after[oa:oa + na]
    np.testing.assert_array_equal(a[...], data)
    # a fully covered shard is written without reading anything
    store.reset()
    a[...] = data + 1
    assert store.calls == []
    np.testing.assert_array_equal(cs.open_array(store, mode="r")[...], data + 1)


def test_all_fill_shard_deleted_and_fill_inner_chunks_dropped():
    store = MemoryStore()
    a = cs.create_array(store, shape=(8, 8), chunks=(2, 2), shards=(4, 4), dtype="i4",
                        fill_value=5)
    a[...] = 1
    assert len([k for k in store.list() if k.startswith("c/")]) == 4
    a[0:4, 0:4] = 5                   # whole shard back to fill: deleted
    assert not store.exists("c/0/0")
    a[4:6, 4:8] = 5                   # half of shard (1, 1): those inner chunks dropped
    index = split_shard(store.get("c/1/1"), 4, "end")
    assert index[:2].tolist() == [[EMPTY, EMPTY]] * 2
    assert (index[2:, 1] != EMPTY).all()
    a[6:8, 4:8] = 5
    assert not store.exists("c/1/1")
    ref = np.ones((8, 8), "i4")
    ref[0:4, 0:4] = ref[4:8, 4:8] = 5
    np.testing.assert_array_equal(a[...], ref)


def test_chunk_primitives_resize_and_append():
    a = cs.create_array(None, shape=(10, 10), chunks=(2, 3), shards=(4, 6), dtype="i4")
    assert a.cdata_shape == (5, 4)
    a.write_chunk((4, 3), [[1], [2]])
    np.testing.assert_array_equal(a.read_chunk((4, 3)), [[1], [2]])
    assert a.chunk_key((4, 3)) == "c/2/1" and a.chunk_key((5 - 1, 0)) == "c/2/0"
    a[...] = 3
    a.resize(5, 7)
    assert sorted(k for k in a.store.list() if k.startswith("c/")) == [
        "c/0/0", "c/0/1", "c/1/0", "c/1/1"]
    a.resize(10, 10)
    ref = np.zeros((10, 10), "i4")
    ref[:5, :7] = 3
    np.testing.assert_array_equal(a[...], ref)
    a.append(np.full((3, 10), 4, "i4"))
    ref = np.concatenate([ref, np.full((3, 10), 4, "i4")])
    np.testing.assert_array_equal(a[...], ref)
    np.testing.assert_array_equal(a.read_region((slice(8, 13), slice(0, 10))), ref[8:13])


def test_errors():
    with pytest.raises(ValueError, match="multiple of chunks"):
        cs.create_array(None, shape=(10,), chunks=(3,), shards=(4,), dtype="i1")
    with pytest.raises(ValueError, match="zarr_format=3"):
        cs.create_array(None, shape=(10,), chunks=(2,), shards=(4,), zarr_format=2)
    store = MemoryStore()
    a = cs.create_array(store, shape=(4,), chunks=(2,), shards=(4,), dtype="i4")
    a[...] = 1
    blob = bytearray(store.get("c/0"))
    blob[-1] ^= 0xFF              # break the index checksum
    store.set("c/0", bytes(blob))
    with pytest.raises(ChunkDecodeError, match="c/0"):
        cs.open_array(store, mode="r")[...]
    store.set("c/0", b"\x00" * 5)  # truncated shard
    with pytest.raises(ChunkDecodeError, match="c/0"):
        cs.open_array(store, mode="r")[...]


def test_codec_json_round_trip_and_validation():
    codec = ShardingCodec((2, 2), [{"name": "bytes"}], index_location="start")
    resolved = codec.resolve(cs.codecs.ChunkSpec((4, 4), np.dtype("i4")))
    again = cs.codecs.codec_from_json(resolved.to_json(), "test")
    assert again.to_json()["configuration"]["index_location"] == "start"
    with pytest.raises(cs.errors.CodecError, match="multiple"):
        codec.resolve(cs.codecs.ChunkSpec((5, 4), np.dtype("i4")))
    with pytest.raises(cs.errors.UnsupportedError, match="index_codecs"):
        ShardingCodec((2,), index_codecs=[{"name": "bytes"}, {"name": "gzip"}]).resolve(
            cs.codecs.ChunkSpec((4,), np.dtype("i4")))


def test_explicit_codec_big_endian_index_without_checksum():
    store = MemoryStore()
    codec = ShardingCodec((2,), [{"name": "bytes", "configuration": {"endian": "big"}}],
                          index_codecs=[{"name": "bytes", "configuration": {"endian": "big"}}])
    a = cs.create_array(store, shape=(6,), chunks=(4,), codecs=[codec], dtype="i2")
    assert a.chunks == (2,) and a.shards == (4,)
    a[...] = [1, 2, 3, 4, 5, 6]
    blob = store.get("c/1")   # inner chunk 0 = [5, 6], inner chunk 1 past the edge: empty
    assert len(blob) == 4 + 32
    assert np.frombuffer(blob[4:], ">u8").tolist() == [0, 4, EMPTY, EMPTY]
    assert np.frombuffer(blob[:4], ">i2").tolist() == [5, 6]
    np.testing.assert_array_equal(a[...], [1, 2, 3, 4, 5, 6])


def test_thread_synchronizer_interleaved_partial_shard_writes():
    # three threads write disjoint, interleaved elements of the same shards: every write
    # is a partial-shard read-modify-write, so without shard locks updates get lost
    a = cs.create_array(None, shape=(48,), chunks=(2,), shards=(8,), dtype="i4",
                        synchronizer=cs.ThreadSynchronizer())

    def work(k):
        for it in range(20):
            a[k::3] = 100 * k + it
    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expected = np.array([100 * (i % 3) + 19 for i in range(48)])
    np.testing.assert_array_equal(a[...], expected)


def test_dask_to_store_writes_whole_shards():
    da = pytest.importorskip("dask.array")
    from chunkstore.dask import from_store, to_store
    x = da.arange(40 * 30, chunks=(100,)).reshape(40, 30).rechunk((5, 5))
    store = CountingMemoryStore()
    a = to_store(x, store, chunks=(5, 5), shards=(10, 15))
    assert a.shards == (10, 15) and a.chunks == (5, 5)
    # blocks were rechunked onto the shard grid: no task read a shard back (no RMW)
    assert not [k for k, _ in store.ranges if k.startswith("c/")]
    np.testing.assert_array_equal(a[...], np.arange(1200).reshape(40, 30))
    y = from_store(a)
    assert y.chunks[0][0] == 5
    assert int(y.sum().compute()) == sum(range(1200))


# -- interop ------------------------------------------------------------------------------------
INTEROP = [((23, 17), (3, 4), (6, 8)), ((30,), (4,), (12,))]


@pytest.mark.parametrize("shape,chunks,shards", INTEROP)
@pytest.mark.parametrize("location", ["start", "end"])
def test_zarr_python_reads_ours(tmp_path, shape, chunks, shards, location):
    zarr = pytest.importorskip("zarr")
    data = np.random.default_rng(3).integers(0, 100, shape).astype("i4")
    a = cs.create_array(str(tmp_path / "x.zarr"), shape=shape, chunks=chunks, dtype="i4",
                        shards={"shape": shards, "index_location": location}, fill_value=0)
    region = tuple(slice(1, n - 2) for n in shape)  # leaves missing inner chunks
    a[region] = data[region]
    ref = np.zeros(shape, "i4")
    ref[region] = data[region]
    z = zarr.open_array(str(tmp_path / "x.zarr"), mode="r")
    assert z.shards == shards and z.chunks == chunks
    np.testing.assert_array_equal(z[...], ref)
    assert z.nchunks_initialized == a.nchunks_initialized


@pytest.mark.parametrize("shape,chunks,shards", INTEROP)
@pytest.mark.parametrize("location", ["start", "end"])
def test_we_read_zarr_python(tmp_path, shape, chunks, shards, location):
    zarr = pytest.importorskip("zarr")
    data = np.random.default_rng(4).standard_normal(shape)
    z = zarr.create_array(str(tmp_path / "z.zarr"), shape=shape, chunks=chunks, dtype="f8",
                          shards={"shape": shards, "index_location": location}, fill_value=0.0)
    region = tuple(slice(2, n - 1) for n in shape)
    z[region] = data[region]
    ref = np.zeros(shape)
    ref[region] = data[region]
    a = cs.open_array(str(tmp_path / "z.zarr"), mode="r+")
    assert a.shards == shards and a.chunks == chunks
    np.testing.assert_array_equal(a[...], ref)
    a[(0,) * len(shape)] = 42.0   # partial shard update of a zarr-python shard
    ref[(0,) * len(shape)] = 42.0
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "z.zarr"), mode="r")[...], ref)


def _ts_spec(path, shape, chunks, shards, location, dtype="int32"):
    return {
        "driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)},
        "metadata": {
            "shape": list(shape), "data_type": dtype,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(shards)}},
            "codecs": [{"name": "sharding_indexed", "configuration": {
                "chunk_shape": list(chunks),
                "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                           {"name": "zstd", "configuration": {"level": 1}}],
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                                 {"name": "crc32c"}],
                "index_location": location}}],
            "fill_value": 0,
        },
        "create": True, "delete_existing": True,
    }


@pytest.mark.parametrize("shape,chunks,shards", INTEROP)
@pytest.mark.parametrize("location", ["start", "end"])
def test_tensorstore_both_ways(tmp_path, shape, chunks, shards, location):
    ts = pytest.importorskip("tensorstore")
    data = np.random.default_rng(5).integers(-50, 50, shape).astype("i4")
    region = tuple(slice(1, n - 3) for n in shape)
    ref = np.zeros(shape, "i4")
    ref[region] = data[region]
    # tensorstore writes, we read (and update), tensorstore reads back
    t = ts.open(_ts_spec(tmp_path / "t.zarr", shape, chunks, shards, location)).result()
    t[region] = data[region]
    a = cs.open_array(str(tmp_path / "t.zarr"))
    assert a.shards == shards
    np.testing.assert_array_equal(a[...], ref)
    a[-1:] = 7
    ref[-1:] = 7
    t2 = ts.open({"driver": "zarr3", "kvstore": {"driver": "file",
                                                 "path": str(tmp_path / "t.zarr")}}).result()
    np.testing.assert_array_equal(t2.read().result(), ref)
    # we write, tensorstore reads
    b = cs.create_array(str(tmp_path / "c.zarr"), shape=shape, chunks=chunks, dtype="i4",
                        shards={"shape": shards, "index_location": location})
    b[region] = data[region]
    t3 = ts.open({"driver": "zarr3", "kvstore": {"driver": "file",
                                                 "path": str(tmp_path / "c.zarr")}}).result()
    ref = np.zeros(shape, "i4")
    ref[region] = data[region]
    np.testing.assert_array_equal(t3.read().result(), ref)


def test_shard_index_cache_is_bounded_and_a_small_budget_still_reads_right():
    """The cache of parsed shard indexes never holds more than its byte budget, and
    entries evicted during a read do not confuse the check against other writers."""
    with cs.config.set({"cache.shard_index_bytes": 4096}):
        a = cs.zeros((4096,), chunks=(16,), shards=(256,), dtype="i4")
        a[:] = np.arange(4096)
        np.testing.assert_array_equal(a[:], np.arange(4096))
        np.testing.assert_array_equal(a[::7], np.arange(0, 4096, 7))
        cache = a._engine.io_of().indexes.cache
        assert 0 < cache.nbytes <= 4096 and len(cache) < 16
