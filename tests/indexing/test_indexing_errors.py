"""NumPy-like indexing errors, and the IO a selection is allowed to do.

IO is counted with real stores that count their calls (no mocks): each touched chunk
is fetched once, all of them in one batched call, untouched chunks never; partial
reads of uncompressed chunks fetch byte ranges, not whole chunks.
"""

from __future__ import annotations

import threading
from dataclasses import replace

import numpy as np
import pytest

import chunkstore as cs
from chunkstore import indexing as ix


class CountingMemoryStore(cs.MemoryStore):
    """A MemoryStore recording every read call and the keys it asked for."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[str, list[str]]] = []
        self._lock = threading.Lock()

    def _log(self, kind: str, keys: list[str]) -> None:
        with self._lock:
            self.calls.append((kind, keys))

    def get(self, key, byte_range=None):
        self._log("get", [key])
        return super().get(key, byte_range)

    def get_many(self, keys):
        self._log("get_many", list(keys))
        return [cs.MemoryStore.get(self, k) for k in keys]

    def get_versioned_many(self, keys):
        self._log("get_versioned_many", list(keys))
        return super().get_versioned_many(keys)

    def get_ranges(self, requests):
        self._log("get_ranges", [k for k, _ in requests])
        return [cs.MemoryStore.get(self, k, r) for k, r in requests]

    def get_views(self, keys):
        self._log("get_views", list(keys))
        return cs.MemoryStore.get_views(self, keys)

    def chunk_keys_read(self) -> list[str]:
        return [k for _, keys in self.calls for k in keys if not k.endswith("zarr.json")]


class CountingLocalStore(cs.LocalStore):
    """A LocalStore counting the bytes it returns, per call kind."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.bytes_read = {"get": 0, "get_many": 0, "get_ranges": 0, "get_views": 0}
        self.ranges: list[tuple[str, object]] = []

    def _count(self, kind: str, keys, values) -> None:
        self.bytes_read[kind] += sum(len(v) for k, v in zip(keys, values, strict=True)
                                     if v is not None and not _is_metadata(k))

    def get(self, key, byte_range=None):
        value = super().get(key, byte_range)
        self._count("get", [key], [value])
        return value

    def get_many(self, keys):
        values = super().get_many(keys)
        self._count("get_many", keys, values)
        return values

    def get_ranges(self, requests):
        values = super().get_ranges(requests)
        self.ranges.extend(requests)
        self._count("get_ranges", [k for k, _ in requests], values)
        return values

    def get_views(self, keys):
        values = super().get_views(keys)
        self._count("get_views", keys, values)
        return values


class RangedLocalStore(CountingLocalStore):
    """Without zero-copy views: uncompressed chunks are read by byte ranges (as from a
    remote store, with a local file's request cost)."""

    capabilities = replace(cs.LocalStore.capabilities, zero_copy_views=False)


def _is_metadata(key: str) -> bool:
    return key.rsplit("/", 1)[-1] in ("zarr.json", ".zarray", ".zattrs", ".zgroup")


@pytest.fixture
def arr():
    a = cs.create_array(cs.MemoryStore(), name="data", shape=(6, 7, 8), chunks=(2, 3, 4),
                        dtype="i4")
    a[...] = np.arange(6 * 7 * 8).reshape(6, 7, 8)
    return a


# -- errors ------------------------------------------------------------------------------------
@pytest.mark.parametrize("sel, axis", [((6,), 0), ((-7,), 0), ((0, 7), 1), ((0, 0, -9), 2),
                                       ((slice(None), 0, 8), 2)])
def test_out_of_bounds_int_names_the_axis(arr, sel, axis):
    with pytest.raises(IndexError, match=f"out of bounds for axis {axis} with size") as e:
        arr[sel]
    assert "/data" in str(e.value)
    with pytest.raises(IndexError, match=f"axis {axis}"):
        arr[sel] = 1
    with np.testing.assert_raises(IndexError):  # NumPy agrees
        np.zeros(arr.shape)[sel]


def test_out_of_bounds_array_names_the_axis(arr):
    with pytest.raises(IndexError, match="index 7 is out of bounds for axis 1 with size 7"):
        arr.oindex[:, [0, 7]]
    with pytest.raises(IndexError, match="index -8 is out of bounds for axis 1"):
        arr.oindex[:, [-8]]
    with pytest.raises(IndexError, match="out of bounds for axis 2 with size 8"):
        arr.vindex[[0, 1], [0, 1], [0, 8]]
    with pytest.raises(IndexError, match="axis 2"):
        arr.vindex[[0, 1], [0, 1], [0, 8]] = 5
    with pytest.raises(IndexError, match="out of bounds for axis 0"):
        arr.blocks[3]


def test_wrong_number_of_indices(arr):
    with pytest.raises(IndexError, match="too many indices"):
        arr[0, 0, 0, 0]
    with pytest.raises(IndexError, match="too many indices"):
        arr.oindex[0, 0, 0, [0]]
    with pytest.raises(IndexError, match="one index array per axis"):
        arr.vindex[[0], [0]]
    with pytest.raises(IndexError, match="single ellipsis"):
        arr[..., 0, ...]


def test_float_and_other_bad_items(arr):
    with pytest.raises(IndexError, match="axis 1"):
        arr[0, 1.5]
    with pytest.raises(IndexError, match="integer or boolean"):
        arr.oindex[[0.5, 1.0]]
    with pytest.raises(IndexError, match="axis 0"):
        arr.vindex[[0.5], [0], [0]]
    with pytest.raises(IndexError):
        arr["a"]
    with pytest.raises(ValueError, match="step cannot be zero"):
        arr[::0]


def test_unsupported_mixes_are_clear(arr):
    with pytest.raises(IndexError, match="must be 1-d .*axis 0"):
        arr.oindex[np.zeros((2, 2), int)]
    with pytest.raises(IndexError, match="must be integers"):
        arr.vindex[slice(None), [0], [0]]
    with pytest.raises(IndexError, match="cannot be broadcast"):
        arr.vindex[[0, 1], [0, 1, 2], [0]]
    with pytest.raises(IndexError, match="does not match axis 1"):
        arr.oindex[:, np.ones(3, bool)]
    with pytest.raises(IndexError, match="mask selection needs a bool array"):
        arr.get_mask_selection(np.ones((6, 7), bool))
    with pytest.raises(IndexError, match="step 1"):
        arr.blocks[::2]
    with pytest.raises(IndexError, match="ints and slices only"):
        arr.blocks[[0, 1]]
    with pytest.raises(IndexError, match="newaxis"):
        arr[None]
    with pytest.raises(IndexError, match="basic"):  # arrays need oindex / vindex
        arr.get_basic_selection(([0, 1],))


def test_value_shape_mismatch_names_the_array(arr):
    with pytest.raises(ValueError, match="/data.*shape"):
        arr[0] = np.zeros((3, 3))
    with pytest.raises(ValueError, match="/data"):
        arr.vindex[[0, 1], [0, 1], [0, 1]] = [1, 2, 3]


def test_pure_indexers_need_no_array():
    """The selection math works without any store: chunks touched and parts."""
    projs = list(ix.OrthogonalIndexer((np.array([5, 0, 5]), slice(1, 4)), (6, 8), (2, 3)))
    assert sorted(p.chunk_coords for p in projs) == [(0, 0), (0, 1), (2, 0), (2, 1)]
    projs = list(ix.CoordinateIndexer((np.array([0, 5, 1]), np.array([7, 0, 6])), (6, 8),
                                      (2, 3)))
    assert sorted(p.chunk_coords for p in projs) == [(0, 2), (2, 0)]
    assert ix.block_selection_to_basic((1, slice(-1, None)), (5, 8), (2, 3)) == (
        slice(2, 4), slice(6, 8))


# -- IO: batched, once per chunk, untouched chunks never ---------------------------------------
def make_counted(shape=(8, 9), chunks=(2, 3), compressors="auto"):
    store = CountingMemoryStore()
    a = cs.create_array(store, shape=shape, chunks=chunks, dtype="f8", compressors=compressors)
    data = np.arange(np.prod(shape), dtype="f8").reshape(shape)
    a[...] = data
    store.calls.clear()
    return a, store, data


def _chunks_of(index_arrays, chunks):
    return {tuple(int(i) // c for i, c in zip(p, chunks, strict=True))
            for p in zip(*index_arrays, strict=True)}


@pytest.mark.parametrize("compressors", ["auto", None])
@pytest.mark.parametrize("kind", ["basic", "orthogonal", "coordinate", "mask", "block"])
def test_each_touched_chunk_fetched_once_in_one_batch(kind, compressors):
    a, store, data = make_counted(compressors=compressors)
    rows = np.array([7, 0, 7, 1, 0])
    cols = np.array([8, 2, 8, 3, 2])
    if kind == "basic":
        got, expected = a[1:5, 2:4], data[1:5, 2:4]
        touched = {(r // 2, c // 3) for r in range(1, 5) for c in range(2, 4)}
    elif kind == "orthogonal":
        got, expected = a.oindex[rows, cols], data[np.ix_(rows, cols)]
        touched = {(r // 2, c // 3) for r in rows for c in cols}
    elif kind == "coordinate":
        got, expected = a.vindex[rows, cols], data[rows, cols]
        touched = _chunks_of((rows, cols), (2, 3))
    elif kind == "mask":
        mask = np.zeros(data.shape, bool)
        mask[rows, cols] = True
        got, expected = a.vindex[mask], data[mask]
        touched = _chunks_of((rows, cols), (2, 3))
    else:
        got, expected = a.blocks[1:3, 2], data[2:6, 6:9]
        touched = {(1, 2), (2, 2)}
    np.testing.assert_array_equal(got, expected)
    kinds = [kind for kind, _ in store.calls]
    if compressors == "auto":
        assert kinds == ["get_views"]  # one batched call (values in place)
    else:  # uncompressed: values in place too (one call), or whole chunks and ranges
        assert sorted(set(kinds)) == sorted(kinds) and "get" not in kinds
    keys = store.chunk_keys_read()
    if compressors is None:  # several ranges of one chunk: still one chunk fetched
        keys = list(dict.fromkeys(k for kind, ks in store.calls if kind == "get_ranges"
                                  for k in ks)) + [k for kind, ks in store.calls
                                                   if kind in ("get_many", "get_views")
                                                   for k in ks]
    assert len(keys) == len(set(keys))  # each chunk once
    assert set(keys) == {a.chunk_key(c) for c in touched}  # untouched chunks never read


def test_set_reads_only_partially_covered_chunks_once():
    a, store, data = make_counted()
    a[0:4, 0:4] = -1  # chunks (0,0),(1,0) covered wholly; (0,1),(1,1) partially
    data[0:4, 0:4] = -1
    reads = store.chunk_keys_read()
    assert sorted(reads) == sorted({a.chunk_key((0, 1)), a.chunk_key((1, 1))})
    assert {k for k, _ in store.calls} == {"get_versioned_many"}  # each chunk read once
    store.calls.clear()
    a.vindex[[5, 5, 5], [1, 1, 1]] = [1, 2, 3]  # repeated: last write wins
    data[[5, 5, 5], [1, 1, 1]] = [1, 2, 3]
    assert store.chunk_keys_read() == [a.chunk_key((2, 0))]
    np.testing.assert_array_equal(a[...], data)


def test_missing_chunks_read_as_fill_without_error():
    store = CountingMemoryStore()
    a = cs.create_array(store, shape=(4, 4), chunks=(2, 2), dtype="i2", fill_value=7)
    a[0, 0] = 1
    store.calls.clear()
    got = a.oindex[[0, 3], [3, 0]]
    np.testing.assert_array_equal(got, np.array([[7, 1], [7, 7]]))
    assert [k for k, _ in store.calls] == ["get_views"]


# -- ranged reads inside uncompressed chunks ---------------------------------------------------
@pytest.fixture
def local_uncompressed(tmp_path):
    shape, chunks = (32, 256, 128), (16, 128, 64)  # rows 32 KB apart: separate ranges
    data = np.arange(np.prod(shape), dtype="f4").reshape(shape)
    cs.create_array(str(tmp_path / "u.zarr"), shape=shape, chunks=chunks, dtype="f4",
                    compressors=None)[...] = data
    a = cs.open_array(RangedLocalStore(tmp_path / "u.zarr"), mode="r")
    a.store.bytes_read.update(get=0, get_many=0, get_ranges=0)  # the metadata read
    return a, a.store, data


def test_partial_reads_fetch_byte_ranges(local_uncompressed):
    a, store, data = local_uncompressed
    assert a[5, 6, 7] == data[5, 6, 7]
    assert store.bytes_read == {"get": 0, "get_many": 0, "get_ranges": 4, "get_views": 0}
    np.testing.assert_array_equal(a[3, 40, :], data[3, 40, :])  # one row in two chunks
    assert store.bytes_read["get_ranges"] == 4 + 128 * 4
    assert len(store.ranges) == 1 + 2
    assert store.bytes_read["get_many"] == 0
    np.testing.assert_array_equal(a[:, 7, 9], data[:, 7, 9])  # a column: strided ranges
    assert store.bytes_read["get_many"] == 0
    assert store.bytes_read["get_ranges"] == 4 + 128 * 4 + 32 * 4  # strided: 4 bytes each
    assert len(store.ranges) == 1 + 2 + 32
    before = store.bytes_read["get_ranges"]
    pts = (np.array([1, 30, 17]), np.array([2, 250, 0]), np.array([3, 120, 70]))
    np.testing.assert_array_equal(a.vindex[pts], data[pts])
    assert store.bytes_read["get_ranges"] - before == 3 * 4
    assert store.bytes_read["get_many"] == 0


def test_large_selection_reads_whole_chunks(local_uncompressed):
    a, store, data = local_uncompressed
    np.testing.assert_array_equal(a[:16, :128, :64], data[:16, :128, :64])
    assert store.bytes_read["get_many"] == 16 * 128 * 64 * 4
    assert store.bytes_read["get_ranges"] == 0


def test_ranges_merge_by_request_cost(local_uncompressed):
    """16 rows of 256 bytes, 32 KB apart: 16 ranges from a local file; one range per chunk
    where a request costs as much as reading 1 MB (a remote store)."""
    a, store, data = local_uncompressed
    sel = (slice(0, 16), 5, slice(0, 64))
    np.testing.assert_array_equal(a[sel], data[sel])
    assert store.bytes_read["get_ranges"] == 16 * 64 * 4 and len(store.ranges) == 16
    assert store.bytes_read["get_many"] == 0

    class Remote(RangedLocalStore):
        capabilities = replace(RangedLocalStore.capabilities, request_cost_bytes=2**20)

    b = cs.open_array(Remote(store.root), mode="r")
    b.store.bytes_read.update(get=0)
    np.testing.assert_array_equal(b[sel], data[sel])
    assert len(b.store.ranges) == 1
    assert b.store.bytes_read["get_ranges"] == (15 * 128 * 64 + 64) * 4


@pytest.mark.parametrize("store_cls", [CountingLocalStore, RangedLocalStore])
def test_ranged_reads_of_a_missing_chunk_give_fill(tmp_path, store_cls):
    a = cs.create_array(str(tmp_path / "m.zarr"), shape=(40, 40), chunks=(20, 20), dtype="i4",
                        compressors=None, fill_value=-3)
    a[:20, :20] = 1
    b = cs.open_array(store_cls(tmp_path / "m.zarr"), mode="r")
    np.testing.assert_array_equal(b.oindex[[1, 30], [2, 35]], [[1, -3], [-3, -3]])
    assert b.store.bytes_read["get_many"] == 0


def test_local_uncompressed_reads_through_views(tmp_path):
    """On a local directory uncompressed chunks are read in place (memory maps): one
    batched get_views, no copies of whole chunks, no ranges."""
    shape, chunks = (32, 256, 128), (16, 128, 64)
    data = np.arange(np.prod(shape), dtype="f4").reshape(shape)
    cs.create_array(str(tmp_path / "u.zarr"), shape=shape, chunks=chunks, dtype="f4",
                    compressors=None)[...] = data
    a = cs.open_array(CountingLocalStore(tmp_path / "u.zarr"), mode="r")
    store = a.store
    store.bytes_read.update(get=0, get_many=0, get_ranges=0)  # the metadata read
    sels = [(5, 6, 7), (slice(None), 7, 9), (3, slice(None), 100), (slice(None), slice(None), 5),
            (slice(2, 30, 3), slice(None, None, -7), slice(1, 128, 9)), Ellipsis]
    for sel in sels:
        np.testing.assert_array_equal(a[sel], data[sel])
    pts = (np.array([1, 30, 17]), np.array([2, 250, 0]), np.array([3, 120, 70]))
    np.testing.assert_array_equal(a.vindex[pts], data[pts])
    np.testing.assert_array_equal(a.oindex[[31, 0], :, [5, 64]], data[[31, 0]][:, :, [5, 64]])
    assert store.bytes_read["get_many"] == store.bytes_read["get_ranges"] == 0
    assert store.bytes_read["get"] == 0
