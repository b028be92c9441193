"""Red team, round 3: the changed write path (uncompressed chunks copied once before
writing, compressor input staged in a per-thread scratch buffer, ``threading.write_bytes``
bounding encoded chunks in flight), attacked with awkward values (negative strides,
Fortran order, non-native byte order, 0-stride broadcasts, 0-d, records, objects,
strings, bools, views of the array's own reads) and with many writer threads. Every
test compares the exact final content with NumPy (and, where it can, with zarr-python
reading the same files)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.runtime import scratch

zarr = pytest.importorskip("zarr")

ZSTD = {"name": "zstd", "configuration": {"level": 1, "checksum": False}}
BIG = {"name": "bytes", "configuration": {"endian": "big"}}

# (name, create_array keyword arguments)
LAYOUTS = [
    ("v3-raw", {"compressors": None}),
    ("v3-blosc", {"compressors": "auto"}),
    ("v3-zstd", {"compressors": [ZSTD]}),
    ("v3-big-zstd", {"compressors": [ZSTD], "serializer": BIG}),
    ("v3-big-raw", {"compressors": None, "serializer": BIG}),
    ("v3-F-blosc", {"compressors": "auto", "order": "F"}),
    ("v3-sharded-zstd", {"compressors": [ZSTD], "shards": "x2"}),
    ("v2-raw", {"compressors": None, "zarr_format": 2}),
    ("v2-blosc", {"compressors": "auto", "zarr_format": 2}),
    ("v2-F-zstd", {"compressors": [{"id": "zstd", "level": 1}], "zarr_format": 2,
                   "order": "F"}),
]


def _make(where, shape, chunks, dtype, kw, **extra):
    kw = dict(kw)
    if kw.get("shards") == "x2":
        kw["shards"] = tuple(2 * c for c in chunks)
    if kw.get("zarr_format") == 2 and kw.get("compressors") not in (None, "auto"):
        kw["compressor"] = kw.pop("compressors")[0]
    return cs.create_array(where, shape=shape, chunks=chunks, dtype=dtype, **kw, **extra)


def _values(shape, dtype):
    """Awkward views holding the same values as ``np.arange(...).reshape(shape)``."""
    base = (np.arange(int(np.prod(shape))) % 251 - 100).astype(dtype).reshape(shape)
    big = np.zeros((shape[0] * 2, shape[1] * 3), dtype)
    big[::2, ::3] = base
    rev = np.ascontiguousarray(base[::-1, ::-1])[::-1, ::-1]
    swapped = base.astype(base.dtype.newbyteorder("S"))
    return base, {
        "c-contiguous": base.copy(),
        "strided": big[::2, ::3],
        "negative-strides": rev,
        "fortran": np.asfortranarray(base),
        "non-native": swapped,
        "non-native-fortran-negative": np.asfortranarray(swapped)[::-1][::-1],
        "transposed": np.ascontiguousarray(base.T).T,
    }


@pytest.mark.parametrize("name,kw", LAYOUTS, ids=[n for n, _ in LAYOUTS])
@pytest.mark.parametrize("dtype", ["<f8", ">i4", "u2"])
def test_awkward_value_layouts_write_exact(tmp_path, name, kw, dtype):
    shape, chunks = (13, 11), (4, 3)
    base, values = _values(shape, dtype)
    for label, value in values.items():
        where = str(tmp_path / f"{label}.zarr")
        a = _make(where, shape, chunks, dtype, kw, fill_value=0)
        a[...] = value
        np.testing.assert_array_equal(a[...], base, err_msg=f"{name} {label} whole")
        # unaligned partial write of an awkward view
        a[2:11, 1:10] = value[3:12, 0:9]
        expected = base.copy()
        expected[2:11, 1:10] = base[3:12, 0:9]
        np.testing.assert_array_equal(a[...], expected, err_msg=f"{name} {label} partial")
        np.testing.assert_array_equal(zarr.open_array(where, mode="r")[...], expected,
                                      err_msg=f"{name} {label} read by zarr")


@pytest.mark.parametrize("name,kw", LAYOUTS, ids=[n for n, _ in LAYOUTS])
def test_broadcast_zero_stride_and_0d_values(tmp_path, name, kw):
    where = str(tmp_path / "a.zarr")
    a = _make(where, (9, 10), (4, 4), "i4", kw, fill_value=-1)
    row = np.arange(10, dtype="i4")
    a[...] = np.broadcast_to(row, (9, 10))  # strides (0, 4)
    np.testing.assert_array_equal(a[...], np.broadcast_to(row, (9, 10)))
    col = np.arange(9, dtype=">i8")[:, None]
    a[...] = np.broadcast_to(col, (9, 10))  # strides (8, 0), other dtype and byte order
    np.testing.assert_array_equal(a[...], np.broadcast_to(col, (9, 10)).astype("i4"))
    a[1:8, 2:9] = np.array(7, dtype=">i2")  # a 0-d array
    expected = np.broadcast_to(col, (9, 10)).astype("i4").copy()
    expected[1:8, 2:9] = 7
    np.testing.assert_array_equal(a[...], expected)
    a[...] = np.broadcast_to(np.array(3, "i4"), (9, 10))  # all strides 0
    np.testing.assert_array_equal(zarr.open_array(where, mode="r")[...], np.full((9, 10), 3))


@pytest.mark.parametrize("name,kw", LAYOUTS[:4] + LAYOUTS[7:9],
                         ids=[n for n, _ in LAYOUTS[:4] + LAYOUTS[7:9]])
def test_zero_d_arrays(tmp_path, name, kw):
    where = str(tmp_path / "a.zarr")
    kw = {k: v for k, v in kw.items() if k != "shards"}
    a = cs.create_array(where, shape=(), dtype="f8", fill_value=0.0, **(
        {**kw, "compressor": kw.pop("compressors")[0]} if kw.get("zarr_format") == 2 and
        kw.get("compressors") not in (None, "auto") else kw))
    for value in (np.array(2.5), np.array(3.5, ">f8"), np.float32(4.5), 5,
                  np.array([[6.5]])[0, 0]):
        a[...] = value
        assert a[()] == float(value)
        assert zarr.open_array(where, mode="r")[()] == float(value)


def test_value_is_view_of_the_arrays_own_read(tmp_path):
    for kw in ({"compressors": None}, {"compressors": "auto"}, {"compressors": [ZSTD]}):
        a = cs.create_array(str(tmp_path / f"{len(kw)}-{id(kw)}.zarr"), shape=(20, 9),
                            chunks=(6, 4), dtype="i8", **kw)
        data = np.arange(180).reshape(20, 9)
        a[...] = data
        r = a[...]
        a[...] = r[::-1]  # reversed view of a read
        np.testing.assert_array_equal(a[...], data[::-1])
        r = a[...]
        a[1:, :] = r[:-1, :]  # overlapping shift by one row
        expected = data[::-1].copy()
        expected[1:] = data[::-1][:-1]
        np.testing.assert_array_equal(a[...], expected)
        r = a[2:14, 1:8]
        a[2:14, 1:8] = r.T.T[:, ::-1]
        expected[2:14, 1:8] = expected[2:14, 1:8][:, ::-1].copy()
        np.testing.assert_array_equal(a[...], expected)


def test_value_mutated_after_write_does_not_change_stored_data(tmp_path):
    # writes that are not durable at once (zip session, memory) must not keep a view of
    # the caller's buffer
    stores = {"zip": str(tmp_path / "a.zip"), "dict": {}, "memory-url":
              f"memory://rt3-writes-{id(tmp_path)}/a", "local": str(tmp_path / "a.zarr")}
    for label, where in stores.items():
        for kw in ({"compressors": None}, {"compressors": [ZSTD]}, {"compressors": None,
                                                                     "zarr_format": 2}):
            if isinstance(where, str) and not where.endswith(".zip"):
                target = where + f"-{len(kw)}-{kw['compressors'] is None}"
            elif isinstance(where, dict):
                target = {}
            else:
                target = str(tmp_path / f"{len(kw)}-{kw['compressors'] is None}.zip")
            a = cs.create_array(target, shape=(8, 8), chunks=(4, 4), dtype="f8", **kw)
            value = np.arange(64, dtype="f8").reshape(8, 8)
            a[...] = value
            a[0:4, 4:8] = value[0:4, 4:8]  # a whole chunk, contiguous in a block
            value[...] = -1.0
            chunk = np.arange(64, dtype="f8").reshape(8, 8)[4:8, 0:4].copy()
            a[4:8, 0:4] = chunk
            chunk[...] = -2.0
            if label == "zip":
                a.store.close()
                a = cs.open_array(target, mode="r")
            np.testing.assert_array_equal(a[...], np.arange(64, dtype="f8").reshape(8, 8),
                                          err_msg=f"{label} {kw}")


def test_structured_values_with_offsets_padding_and_byte_order(tmp_path):
    rec = np.dtype([("x", "<i4"), ("y", "<f8")])
    wide = np.dtype({"names": ["y", "pad", "x"], "formats": [">f8", "u1", ">i4"],
                     "offsets": [0, 8, 12], "itemsize": 24})
    src = np.zeros(10, wide)
    src["x"] = np.arange(10)
    src["y"] = np.arange(10) / 4
    src["pad"] = 255
    expected = np.zeros(10, rec)
    expected["x"] = np.arange(10)
    expected["y"] = np.arange(10) / 4
    for i, kw in enumerate(({"compressors": None}, {"compressors": [ZSTD]},
                            {"compressors": "auto"}, {"compressors": None, "zarr_format": 2})):
        where = str(tmp_path / f"r{i}.zarr")
        a = cs.create_array(where, shape=(10,), chunks=(3,), dtype=rec, **kw)
        a[...] = expected[::-1][::-1]
        np.testing.assert_array_equal(a[...], expected)
        multi = src[["x", "y"]]  # a multi-field view: offsets, itemsize 24, big-endian
        a[...] = multi.astype(rec)
        np.testing.assert_array_equal(a[...], expected)
        a[1:9:2] = expected[::-1][1:9:2]
        want = expected.copy()
        want[1:9:2] = expected[::-1][1:9:2]
        np.testing.assert_array_equal(cs.open_array(where, mode="r")[...], want)


def test_object_string_and_bool_values(tmp_path):
    words = np.array(["α", "", "bb", "ccc", "d" * 100, "e", "ff", "g"], dtype=object)
    for i, kw in enumerate(({"compressors": None}, {"compressors": [ZSTD]},
                            {"zarr_format": 2})):
        where = str(tmp_path / f"s{i}.zarr")
        s = cs.create_array(where, shape=(8,), chunks=(3,), dtype=str, **kw)
        s[...] = words[::-1][::-1]
        s[1:7:2] = words[::-1][1:7:2]  # a strided object view
        want = words.copy()
        want[1:7:2] = words[::-1][1:7:2]
        assert [str(x) for x in s[...]] == list(want)
        assert [str(x) for x in zarr.open_array(where, mode="r")[...]] == list(want)
    flags = (np.arange(30) % 3 == 0).reshape(5, 6)
    for kw in ({"compressors": None}, {"compressors": "auto"}, {"compressors": None,
                                                                  "serializer": BIG}):
        b = cs.create_array({}, shape=(5, 6), chunks=(2, 4), dtype=bool, **kw)
        b[...] = np.asfortranarray(flags)[::-1][::-1]
        b[1:4, 1:5] = ~flags[1:4, 1:5][:, ::-1]
        want = flags.copy()
        want[1:4, 1:5] = ~flags[1:4, 1:5][:, ::-1]
        np.testing.assert_array_equal(b[...], want)
        b[...] = np.broadcast_to(np.True_, (5, 6))
        assert b[...].all()


# -- many threads into one array --------------------------------------------------------------
def _threads(n, target):
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []

    def run(k):
        try:
            barrier.wait()
            target(k)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(300)
    assert not errors, repr(errors[:3])


@pytest.mark.parametrize("store", ["dict", "local"])
@pytest.mark.parametrize("compressors", [None, [ZSTD]], ids=["raw", "zstd"])
@pytest.mark.parametrize("write_bytes", [1, None], ids=["write_bytes=1", "default"])
def test_many_threads_aligned_and_unaligned_exact(tmp_path, store, compressors,
                                                  write_bytes):
    n = 8
    settings = {} if write_bytes is None else {"threading.write_bytes": write_bytes}
    with cs.config.set(settings):
        where = {} if store == "dict" else str(tmp_path / "a.zarr")
        a = cs.create_array(where, shape=(64, 40), chunks=(8, 8), dtype="i4",
                            compressors=compressors, fill_value=-1)

        def aligned(k):  # thread k owns rows 8k..8k+8: whole chunks
            for r in range(3):
                a[8 * k:8 * k + 8, :] = np.full((8, 40), 100 * r + k, "i4")[:, ::-1]

        _threads(n, aligned)
        expected = np.repeat(200 + np.arange(n), 8)[:, None] * np.ones(40, "i4")
        np.testing.assert_array_equal(a[...], expected)

        def unaligned(k):  # thread k owns columns k, k+8, ...: every chunk is shared
            for r in range(3):
                col = (np.arange(64) * 10 + 1000 * r + k).astype(">i8")[::-1][::-1]
                a[:, k::n] = np.broadcast_to(col[:, None], (64, len(range(k, 40, n))))

        _threads(n, unaligned)
        expected = (np.arange(64)[:, None] * 10 + 2000 + np.arange(40)[None, :] % n)
        np.testing.assert_array_equal(a[...], expected)
        np.testing.assert_array_equal(cs.open_array(where, mode="r")[...], expected)


@pytest.mark.parametrize("compressors", [[ZSTD], "auto", [{"id": "zstd", "level": 1}]],
                         ids=["v3-zstd", "v3-blosc", "v2-zstd"])
def test_same_buffer_to_two_arrays_from_two_threads(compressors):
    v2 = isinstance(compressors, list) and "id" in compressors[0]
    shape, chunks = (48, 48), (16, 16)
    kw = {"zarr_format": 2, "compressor": compressors[0]} if v2 else {
        "compressors": compressors}
    shared = np.arange(48 * 96, dtype="f8").reshape(48, 96)
    arrays = [cs.create_array({}, shape=shape, chunks=chunks, dtype="f8", **kw)
              for _ in range(4)]
    # every array gets a different non-contiguous view of the same buffer (staged
    # through the scratch buffer of whichever thread encodes it)
    views = [shared[:, 0::2], shared[:, 1::2], shared[::-1, 0::2], shared[:, ::-2]]

    def write(k):
        for _ in range(20):
            arrays[k][...] = views[k]
            arrays[k][5:40, 3:45] = views[(k + 1) % 4][5:40, 3:45]

    _threads(4, write)
    for k in range(4):
        want = views[k].copy()
        want[5:40, 3:45] = views[(k + 1) % 4][5:40, 3:45]
        np.testing.assert_array_equal(arrays[k][...], want, err_msg=f"array {k}")


def test_scratch_buffers_are_per_thread():
    got = {}

    def take(k):
        got[k] = scratch.scratch_buffer((4, 4), np.dtype("f8"), "encode")

    _threads(2, take)
    assert got[0] is not got[1]
    assert not np.shares_memory(got[0], got[1])
    mine = scratch.scratch_buffer((4, 4), np.dtype("f8"), "encode")
    assert mine is scratch.scratch_buffer((4, 4), np.dtype("f8"), "encode")
    assert not np.shares_memory(mine, got[0]) and not np.shares_memory(mine, got[1])
    # same shape, another record dtype of the same size: not the same buffer
    r1 = scratch.scratch_buffer((4,), np.dtype([("a", "<i8")]), "encode")
    r2 = scratch.scratch_buffer((4,), np.dtype([("b", "<f8")]), "encode")
    assert r2.dtype == np.dtype([("b", "<f8")])
    assert r1.dtype == np.dtype([("a", "<i8")])
    scratch.release()
    assert scratch.held_bytes() == 0


def test_big_endian_serializer_with_compressor_bytes_on_disk(tmp_path):
    import numcodecs

    where = tmp_path / "a.zarr"
    data = np.arange(12 * 10, dtype="<i4").reshape(12, 10) * 1000003
    a = cs.create_array(str(where), shape=data.shape, chunks=(6, 5), dtype="i4",
                        serializer=BIG, compressors=[ZSTD])
    for value in (data, np.asfortranarray(data), data.astype(">i4"), data[::-1][::-1]):
        a[...] = value
        raw = numcodecs.Zstd().decode((where / "c" / "1" / "1").read_bytes())
        assert bytes(raw) == data[6:, 5:].astype(">i4").tobytes()


@pytest.mark.parametrize("value", ["32MiB", "lots", None, -1])
def test_write_bytes_config_garbage_names_key(value):
    """A size string is taken; garbage is refused when set, naming the key."""
    a = cs.create_array({}, shape=(100,), chunks=(10,), dtype="i4")
    expected = np.zeros(100, "i4")
    expected[3:97] = 5
    if value != "32MiB":
        with pytest.raises(ValueError, match="threading.write_bytes"):
            cs.config.set({"threading.write_bytes": value})
        a[3:97] = 5
        np.testing.assert_array_equal(a[...], expected)
        return
    with cs.config.set({"threading.write_bytes": value}):
        a[3:97] = 5
    np.testing.assert_array_equal(a[...], expected)


@pytest.mark.parametrize("value", [0, 1, 10**12])
def test_write_bytes_extremes_still_exact(tmp_path, value):
    with cs.config.set({"threading.write_bytes": value}):
        a = cs.create_array(str(tmp_path / "a.zarr"), shape=(200, 30), chunks=(7, 11),
                            dtype="f4", compressors=[ZSTD], shards=(14, 22))
        data = np.random.default_rng(5).random((200, 30)).astype("f4")
        a[...] = data[::-1][::-1]
        a[3:190, 4:29] = data[3:190, 4:29].T.copy().T * 2
        want = data.copy()
        want[3:190, 4:29] *= 2
        np.testing.assert_array_equal(a[...], want)


@pytest.mark.parametrize("write_bytes", [1, 8 * 2**20])
def test_write_bytes_bounds_encoded_chunks_in_flight(tmp_path, write_bytes):
    import os
    import tracemalloc

    data = np.random.default_rng(0).random((48, 2**17))  # 48 MiB of 1 MiB chunks
    a = cs.create_array(str(tmp_path / "a.zarr"), shape=data.shape, chunks=(1, 2**17),
                        dtype="f8", compressors=[ZSTD])
    value = data[::-1][::-1]  # a view: staged through the scratch buffer if anything
    cores = os.cpu_count() or 1
    bound = max(write_bytes, (cores + 2) * 2**20) * 2 + 4 * 2**20
    with cs.config.set({"threading.write_bytes": write_bytes}):
        tracemalloc.start()
        try:
            a[...] = value
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < bound, f"peak {peak / 2**20:.1f} MiB, bound {bound / 2**20:.1f} MiB"
    np.testing.assert_array_equal(a[...], data)
