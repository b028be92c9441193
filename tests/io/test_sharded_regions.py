"""Sharded arrays read and written region by region (issue 35): a selection of step-1
slices is read shard by shard, the inner chunks of each decoded into one stack and
placed by a reshape; a write of whole shards encodes each shard's inner chunks in one
pass. The same answers, the same bytes and the same refusals as chunk by chunk."""

from __future__ import annotations

import itertools
import time

import numcodecs
import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import ChunkDecodeError
from chunkstore.io.sharded import ShardIO
from chunkstore.storage.memory import MemoryStore

EMPTY = 2**64 - 1
LZ4 = numcodecs.Blosc(cname="lz4", clevel=5, shuffle=1)


def _data(shape, dtype="i4"):
    return (np.arange(int(np.prod(shape))).reshape(shape) % 997 + 1).astype(dtype)


def _index(store, key, n_inner):
    raw = store.get(key)
    return np.frombuffer(raw[len(raw) - 16 * n_inner - 4:-4], "<u8").reshape(-1, 2)


def _count_region_calls(monkeypatch):
    calls = {"read": 0, "write": 0}
    real_read, real_unit = ShardIO._read_region, ShardIO._region_unit

    def read(self, *a, **k):
        calls["read"] += 1
        return real_read(self, *a, **k)

    def unit(self, *a, **k):
        calls["write"] += 1
        return real_unit(self, *a, **k)

    monkeypatch.setattr(ShardIO, "_read_region", read)
    monkeypatch.setattr(ShardIO, "_region_unit", unit)
    return calls


@pytest.mark.parametrize("compressors", [LZ4, None, numcodecs.GZip(1)])
@pytest.mark.parametrize("dtype", ["i4", ">i4", "f8", "u1"])
def test_region_reads_equal_numpy(compressors, dtype, monkeypatch):
    """Boxes with partial inner chunks, at the array's edge (shape not a multiple of the
    inner chunk), over missing shards and missing (fill) inner chunks."""
    calls = _count_region_calls(monkeypatch)
    shape = (37, 45)
    data = _data(shape, dtype)
    a = cs.create_array(MemoryStore(), shape=shape, chunks=(4, 5), shards=(8, 15),
                        dtype=dtype, fill_value=7, compressors=compressors)
    a[:24, :] = data[:24]           # shards of rows 24.. missing
    a[4:8, 5:10] = 7                # one inner chunk back to fill: not stored
    ref = data.copy()
    ref[24:] = 7
    ref[4:8, 5:10] = 7
    rng = np.random.default_rng(0)
    boxes = [(slice(None), slice(None)), (slice(3, 30), slice(1, 44)), (slice(4, 8), slice(5, 10)),
             (slice(30, 37), slice(0, 45))]
    boxes += [tuple(slice(int(lo), int(lo) + int(rng.integers(1, n - lo + 1)))
                    for lo, n in zip(rng.integers(0, shape), shape, strict=True))
              for _ in range(12)]
    for box in boxes:
        np.testing.assert_array_equal(a[box], ref[box], err_msg=str(box))
    assert calls["read"] >= len(boxes)  # every one went through the region path


def test_region_read_into_f_order_and_3d():
    data = _data((12, 10, 9), "i2")
    a = cs.array(data, store=MemoryStore(), chunks=(2, 5, 3), shards=(4, 10, 9),
                 compressors=LZ4)
    out = np.empty((9, 8, 7), "i2", order="F")
    a.get_basic_selection((slice(1, 10), slice(2, 10), slice(1, 8)), out=out)
    np.testing.assert_array_equal(out, data[1:10, 2:10, 1:8])
    np.testing.assert_array_equal(a[...], data)


def test_other_selections_still_read_right(monkeypatch):
    """Steps, reversed slices, ints, index arrays: chunk by chunk, as before."""
    calls = _count_region_calls(monkeypatch)
    data = _data((20, 20))
    a = cs.array(data, store=MemoryStore(), chunks=(2, 2), shards=(10, 10), compressors=LZ4)
    for sel in [(slice(None, None, 3), slice(None)), (slice(None, None, -1), slice(2, 9)),
                (3, slice(None)), (np.array([1, 7, 19]), slice(0, 5))]:
        np.testing.assert_array_equal(a.get_orthogonal_selection(sel)
                                      if isinstance(sel[0], np.ndarray) else a[sel],
                                      data[np.ix_(sel[0], np.arange(20)[sel[1]])]
                                      if isinstance(sel[0], np.ndarray) else data[sel])
    assert calls["read"] == 0


@pytest.mark.parametrize("location", ["start", "end"])
def test_whole_shard_writes_store_what_chunk_by_chunk_writes_store(location, monkeypatch):
    """Same shards byte for byte as the per-chunk path (a partly covered region takes
    it); all-fill inner chunks left out, an all-fill shard not stored."""
    calls = _count_region_calls(monkeypatch)
    data = _data((40, 30))
    data[0:4, 0:5] = 0                       # one inner chunk all fill
    data[20:40, 15:30] = 0                   # a whole shard all fill
    stores = []
    for region in (True, False):
        store = MemoryStore()
        a = cs.create_array(store, shape=data.shape, chunks=(4, 5),
                            shards={"shape": (20, 15), "index_location": location},
                            dtype="i4", fill_value=0, compressors=LZ4)
        if region:
            a[...] = data
        else:  # the chunk-by-chunk path, shard by shard (one column short, then the rest)
            for i, j in itertools.product(range(2), range(2)):
                rows, cols = slice(20 * i, 20 * i + 20), slice(15 * j, 15 * j + 15)
                a[rows, slice(cols.start, cols.stop - 1)] = data[rows, cols][:, :-1]
                a[rows, slice(cols.stop - 1, cols.stop)] = data[rows, cols][:, -1:]
        np.testing.assert_array_equal(a[...], data)
        stores.append(store)
    assert calls["write"] == 4
    assert sorted(k for k in stores[0].list() if k.startswith("c/")) == ["c/0/0", "c/0/1",
                                                                        "c/1/0"]
    for key in ("c/0/0", "c/0/1", "c/1/0"):
        assert stores[0].get(key) == stores[1].get(key), key
    if location == "end":
        index = _index(stores[0], "c/0/0", 15)
        assert index[0].tolist() == [EMPTY, EMPTY] and (index[1:, 1] != EMPTY).all()


def test_whole_shard_writes_scalars_fill_and_write_empty_chunks():
    store = MemoryStore()
    a = cs.create_array(store, shape=(8, 8), chunks=(2, 2), shards=(4, 4), dtype="f4",
                        fill_value=np.nan, compressors=LZ4)
    a[...] = 3.5
    assert len([k for k in store.list() if k.startswith("c/")]) == 4
    np.testing.assert_array_equal(a[...], np.full((8, 8), 3.5, "f4"))
    a[0:4, 0:4] = np.nan                      # back to fill: the shard is deleted
    assert not store.exists("c/0/0")
    block = np.full((4, 4), np.nan, "f4")
    block[0, 0] = -np.float32(np.nan)         # another NaN's bits: not the fill, stored
    a[4:8, 4:8] = block
    index = _index(store, "c/1/1", 4)
    assert index[0, 1] != EMPTY and (index[1:, 1] == EMPTY).all()
    keep = cs.create_array(MemoryStore(), shape=(4, 4), chunks=(2, 2), shards=(4, 4),
                           dtype="i4", fill_value=0, compressors=LZ4,
                           write_empty_chunks=True)
    keep[...] = 0
    assert (_index(keep.store, "c/0/0", 4)[:, 1] != EMPTY).all()


def test_region_read_refuses_hostile_entries_and_names_corrupt_chunks():
    store = MemoryStore()
    cs.array(_data((8, 8)), store=store, chunks=(2, 2), shards=(8, 8), compressors=LZ4)
    raw = bytearray(store.get("c/0/0"))
    n = 16
    index = np.frombuffer(bytes(raw[-16 * n - 4:-4]), "<u8").reshape(-1, 2).copy()

    def encoded(entries):  # the default index codecs: little-endian bytes + crc32c
        return bytes(numcodecs.CRC32C().encode(entries.astype("<u8").tobytes()))

    # an inner chunk claiming a huge size: refused before any range is requested
    hostile = index.copy()
    hostile[3, 1] = 2**40
    body = bytes(raw[:-16 * n - 4])
    store.set("c/0/0", body + encoded(hostile))
    with pytest.raises(ChunkDecodeError, match=r"inner chunk \(0, 3\).*claims"):
        cs.open_array(store, mode="r")[...]
    # a frame whose header does not match the chunk: named by its inner chunk
    off = int(index[5, 0])
    bad = bytearray(body)
    bad[off + 4:off + 8] = (2**30).to_bytes(4, "little")  # its decoded size
    store.set("c/0/0", bytes(bad) + encoded(index))
    with pytest.raises(ChunkDecodeError, match=r"inner chunk \(1, 1\)"):
        cs.open_array(store, mode="r")[...]


def _codec_threads(monkeypatch):
    """Records the names of the threads that encode or decode inner chunks (``names``)
    and the most of them at work at once (``most``)."""
    import threading

    from chunkstore.io.chunk_codec import ChunkCodec
    seen = {"names": set(), "now": 0, "most": 0}
    lock = threading.Lock()

    def tracked(real):
        def call(self, *a, **k):
            with lock:
                seen["names"].add(threading.current_thread().name)
                seen["now"] += 1
                seen["most"] = max(seen["most"], seen["now"])
            try:
                time.sleep(0.0005)  # a window for another thread to overlap, if one may
                return real(self, *a, **k)
            finally:
                with lock:
                    seen["now"] -= 1
        return call

    monkeypatch.setattr(ChunkCodec, "encode_many", tracked(ChunkCodec.encode_many))
    monkeypatch.setattr(ChunkCodec, "decode_many", tracked(ChunkCodec.decode_many))
    return seen


@pytest.mark.parametrize("store_kind", ["memory", "local"])
def test_tiny_inner_chunks_stay_on_one_pool_thread(store_kind, tmp_path, monkeypatch):
    """Shards of tiny inner chunks (below INLINE_ITEM_BYTES each) are encoded by one pool
    thread, not the caller's (on the main thread numcodecs' blosc compresses under its
    global lock), and decoded by one thread: on more, their codec calls only take turns
    at the GIL (twice the time). Larger inner chunks are spread over the pool. Both read
    back exactly."""
    from chunkstore.runtime.pool import INLINE_ITEM_BYTES, threads_for_calls
    assert threads_for_calls(20 * 20 * 4) == 1
    assert threads_for_calls(INLINE_ITEM_BYTES) is None
    seen = _codec_threads(monkeypatch)
    store = MemoryStore() if store_kind == "memory" else str(tmp_path / "a.zarr")
    with cs.config.set({"threading.max_workers": 4}):
        data = _data((400, 400))
        a = cs.create_array(store, shape=data.shape, chunks=(20, 20), shards=(40, 40),
                            dtype="i4", compressors=LZ4)
        a[...] = data
        assert seen["most"] == 1 and len(seen["names"]) == 1, seen
        assert next(iter(seen["names"])).startswith("chunkstore"), seen  # a pool thread
        seen["names"].clear()
        np.testing.assert_array_equal(a[...], data)
        assert seen["most"] == 1, seen
        import chunkstore.io.sharded as sharded
        caps: list = []
        real_commit = sharded.commit_units

        def commit_units(*args, **kwargs):
            caps.append(kwargs.get("max_threads"))
            return real_commit(*args, **kwargs)

        monkeypatch.setattr(sharded, "commit_units", commit_units)
        big = _data((512, 512))  # inner chunks of 64 KiB: no cap on the threads
        b = cs.create_array(MemoryStore() if store_kind == "memory" else str(tmp_path / "b.zarr"),
                            shape=big.shape, chunks=(128, 128), shards=(256, 256),
                            dtype="i4", compressors=LZ4)
        b[...] = big
        np.testing.assert_array_equal(b[...], big)
        assert caps and set(caps) == {None}, caps
        assert seen["most"] >= 2, seen  # spread over the pool
        a[...] = data + 1  # tiny: capped at one
        assert set(caps[-1:]) == {1}, caps
        np.testing.assert_array_equal(a[...], data + 1)
