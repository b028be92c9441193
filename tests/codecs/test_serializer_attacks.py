"""Red team, round 3: ``create_array(..., serializer=...)`` (zarr-python 3's argument for
the array->bytes codec), attacked: big-endian bytes on disk, with compressors, shards,
strings, filters, order="F", partial (byte-range / memory-mapped / zero-copy) reads of
big-endian chunks, conflicting arguments, v2, and round trips with zarr-python both ways.
Every check compares with NumPy or with the bytes on disk."""

from __future__ import annotations

import json

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import CodecError

zarr = pytest.importorskip("zarr")

BIG = {"name": "bytes", "configuration": {"endian": "big"}}
LITTLE = {"name": "bytes", "configuration": {"endian": "little"}}
ZSTD = {"name": "zstd", "configuration": {"level": 1, "checksum": False}}


def _codecs(path) -> list:
    return json.loads((path / "zarr.json").read_text())["codecs"]


@pytest.mark.parametrize("dtype", ["i2", "u4", "i8", "f4", "f8", "c8", "c16", "u1", "?"])
def test_big_endian_bytes_on_disk_exact(tmp_path, dtype):
    where = tmp_path / "a.zarr"
    rng = np.random.default_rng(1)
    data = (rng.random((5, 7)) * 100).astype(dtype)
    a = cs.create_array(str(where), shape=data.shape, chunks=(2, 3), dtype=dtype,
                        serializer=BIG, compressors=None)
    a[...] = data
    assert _codecs(where)[0]["name"] == "bytes"
    if np.dtype(dtype).itemsize > 1:
        assert _codecs(where)[0]["configuration"]["endian"] == "big"
    want = data[2:4, 3:6].astype(np.dtype(dtype).newbyteorder(">")).tobytes()
    assert (where / "c" / "1" / "1").read_bytes() == want
    # edge chunk is stored whole (padded with fill)
    edge = np.zeros((2, 3), dtype)
    edge[:1, :1] = data[4:, 6:]
    assert (where / "c" / "2" / "2").read_bytes() == edge.astype(
        np.dtype(dtype).newbyteorder(">")).tobytes()
    np.testing.assert_array_equal(a[...], data)
    np.testing.assert_array_equal(zarr.open_array(str(where), mode="r")[...], data)


@pytest.mark.parametrize("map_bytes", [0, 1 << 20])
def test_partial_reads_of_big_endian_uncompressed_chunks_local(tmp_path, map_bytes):
    where = str(tmp_path / "a.zarr")
    data = np.arange(64 * 48, dtype="<i4").reshape(64, 48) * 7 - 5000
    a = cs.create_array(where, shape=data.shape, chunks=(32, 24), dtype="i4",
                        serializer=BIG, compressors=None)
    a[...] = data
    with cs.config.set({"cache.map_bytes": map_bytes}):
        b = cs.open_array(where, mode="r")
        for sel in [(5, 7), (slice(3, 4), slice(None)), (slice(None), 17),
                    (slice(30, 35), slice(20, 30)), (slice(None, None, -3), slice(1, 40, 5)),
                    (Ellipsis,)]:
            np.testing.assert_array_equal(b[sel], data[sel], err_msg=str(sel))
        np.testing.assert_array_equal(b.oindex[[0, 33, 63], [1, 25, 47]],
                                      data[np.ix_([0, 33, 63], [1, 25, 47])])
        np.testing.assert_array_equal(b.vindex[[0, 33, 63], [1, 25, 47]],
                                      data[[0, 33, 63], [1, 25, 47]])


@pytest.mark.parametrize("store", ["dict", "memory-url"])
def test_partial_reads_of_big_endian_uncompressed_chunks_memory(store):
    where = {} if store == "dict" else f"memory://rt3-ser-{np.random.randint(1 << 30)}/a"
    data = np.linspace(-1, 1, 40 * 30).reshape(40, 30)
    a = cs.create_array(where, shape=data.shape, chunks=(16, 16), dtype=">f8",
                        serializer=BIG, compressors=None)
    a[...] = data
    np.testing.assert_array_equal(a[7, 9], data[7, 9])
    np.testing.assert_array_equal(a[15:17, 15:17], data[15:17, 15:17])
    np.testing.assert_array_equal(a[:, 29], data[:, 29])
    a[15:17, 15:17] = -9.0  # a read-modify-write of four big-endian chunks
    data[15:17, 15:17] = -9.0
    np.testing.assert_array_equal(a[...], data)


def test_big_endian_with_compressors_and_zarr_reads_it(tmp_path):
    where = tmp_path / "a.zarr"
    data = np.random.default_rng(2).normal(size=(33, 17)).astype("f4")
    a = cs.create_array(str(where), shape=data.shape, chunks=(8, 8), dtype="f4",
                        serializer=BIG, compressors=[ZSTD])
    a[...] = data
    assert [c["name"] for c in _codecs(where)] == ["bytes", "zstd"]
    import numcodecs

    raw = numcodecs.Zstd().decode((where / "c" / "0" / "0").read_bytes())
    assert raw == data[:8, :8].astype(">f4").tobytes()
    np.testing.assert_array_equal(zarr.open_array(str(where), mode="r")[...], data)
    a[3:20, 4] = 0.5
    data[3:20, 4] = 0.5
    np.testing.assert_array_equal(zarr.open_array(str(where), mode="r")[...], data)


def test_big_endian_inside_shards_partial_reads_and_zarr(tmp_path):
    where = tmp_path / "s.zarr"
    data = np.arange(24 * 10, dtype="i8").reshape(24, 10) - 100
    a = cs.create_array(str(where), shape=data.shape, chunks=(4, 5), shards=(12, 10),
                        dtype="i8", serializer=BIG, compressors=None)
    a[...] = data
    (shard,) = _codecs(where)
    assert shard["name"] == "sharding_indexed"
    assert shard["configuration"]["codecs"][0] == BIG
    raw = (where / "c" / "0" / "0").read_bytes()
    first = data[:4, :5].astype(">i8").tobytes()
    assert first in raw  # an inner chunk stored big-endian, uncompressed
    np.testing.assert_array_equal(a[13, 7], data[13, 7])
    np.testing.assert_array_equal(a[3:9, 4:6], data[3:9, 4:6])
    np.testing.assert_array_equal(zarr.open_array(str(where), mode="r")[...], data)
    a[5:7, :] = 1
    data[5:7, :] = 1
    np.testing.assert_array_equal(cs.open_array(str(where), mode="r")[...], data)
    np.testing.assert_array_equal(zarr.open_array(str(where), mode="r")[...], data)


def test_sharding_codec_as_serializer_with_and_without_shards(tmp_path):
    inner = {"name": "sharding_indexed",
             "configuration": {"chunk_shape": [2], "codecs": [BIG],
                               "index_codecs": [LITTLE], "index_location": "end"}}
    for name, extra in (("plain", {"chunks": (8,)}), ("nested", {"chunks": (4,),
                                                                   "shards": (8,)})):
        where = str(tmp_path / f"{name}.zarr")
        inner_cfg = json.loads(json.dumps(inner))
        if name == "nested":
            inner_cfg["configuration"]["chunk_shape"] = [2]
        a = cs.create_array(where, shape=(16,), dtype="i4", serializer=inner_cfg,
                            compressors=None, **extra)
        a[...] = np.arange(16)
        a[3:6] = -1
        expected = np.arange(16)
        expected[3:6] = -1
        np.testing.assert_array_equal(cs.open_array(where, mode="r")[...], expected)
        np.testing.assert_array_equal(zarr.open_array(where, mode="r")[...], expected)


def test_serializer_with_transpose_filter_and_order_f(tmp_path):
    data = np.arange(6 * 8, dtype="u2").reshape(6, 8)
    w1 = tmp_path / "t.zarr"
    a = cs.create_array(str(w1), shape=data.shape, chunks=(3, 4), dtype="u2",
                        serializer=BIG, compressors=None,
                        filters=[{"name": "transpose", "configuration": {"order": [1, 0]}}])
    a[...] = data
    assert (w1 / "c" / "1" / "1").read_bytes() == data[3:, 4:].T.astype(">u2").tobytes()
    np.testing.assert_array_equal(a[4, 1:7], data[4, 1:7])
    np.testing.assert_array_equal(zarr.open_array(str(w1), mode="r")[...], data)
    w2 = tmp_path / "f.zarr"
    b = cs.create_array(str(w2), shape=data.shape, chunks=(3, 4), dtype="u2",
                        serializer=BIG, compressors=None, order="F")
    b[...] = data
    assert (w2 / "c" / "0" / "1").read_bytes() == data[:3, 4:].astype(">u2").tobytes(order="F")
    np.testing.assert_array_equal(b[2, :], data[2, :])
    np.testing.assert_array_equal(zarr.open_array(str(w2), mode="r")[...], data)


def test_strings_with_vlen_serializers(tmp_path):
    values = np.array(["", "a", "bé", "x" * 300, "\x00zero", "日本"], dtype=object)
    w = str(tmp_path / "s.zarr")
    a = cs.create_array(w, shape=(6,), chunks=(4,), dtype=str,
                        serializer={"name": "vlen-utf8"}, compressors=[ZSTD])
    a[...] = values
    assert [str(v) for v in a[...]] == list(values)
    assert [str(v) for v in zarr.open_array(w, mode="r")[...]] == list(values)
    a[1] = "changed"
    assert str(cs.open_array(w, mode="r")[1]) == "changed"
    raw = [b"", b"\x01\xff", b"\x00" * 5]
    wb = str(tmp_path / "b.zarr")
    b = cs.create_array(wb, shape=(3,), chunks=(2,), dtype=bytes,
                        serializer={"name": "vlen-bytes"}, compressors=None)
    b[...] = np.array(raw, dtype=object)
    assert [bytes(v) for v in b[...]] == raw


@pytest.mark.parametrize("dtype,serializer", [("i4", {"name": "vlen-utf8"}), (str, BIG),
                                              ("f8", {"name": "vlen-bytes"})])
def test_serializer_dtype_mismatch_error_names_argument(dtype, serializer):
    with pytest.raises((CodecError, ValueError)) as info:
        cs.create_array({}, shape=(4,), dtype=dtype, serializer=serializer)
    message = str(info.value)
    assert "serializer" in message and "MemoryStore" in message, message


@pytest.mark.parametrize("serializer,match", [
    ({"name": "zstd"}, "serializer"),
    ({"name": "crc32c"}, "serializer"),
    ({"name": "transpose", "configuration": {"order": [0]}}, "serializer"),
    ({"name": "nope"}, "nope"),
    ({"name": "bytes", "configuration": {"endian": "middle"}}, "endian"),
    (5, "5"),
    ([BIG], "serializer|codec"),
    (None, "None"),
])
def test_bad_serializers_are_clear_errors_and_create_nothing(tmp_path, serializer, match):
    where = tmp_path / "a.zarr"
    with pytest.raises((CodecError, ValueError, TypeError), match=match):
        cs.create_array(str(where), shape=(4,), dtype="i4", serializer=serializer)
    assert not (where / "zarr.json").exists()


def test_serializer_unknown_configuration_key_is_refused(tmp_path):
    where = tmp_path / "a.zarr"
    with pytest.raises((CodecError, ValueError, TypeError), match="surprise"):
        cs.create_array(str(where), shape=(4,), dtype="i4", serializer={
            "name": "bytes", "configuration": {"endian": "big", "surprise": 1}})
    assert not (where / "zarr.json").exists()


def test_serializer_conflicts_with_codecs_and_v2(tmp_path):
    with pytest.raises(ValueError, match="codecs=.*serializer=|serializer=.*codecs="):
        cs.create_array({}, shape=(4,), dtype="i4", serializer=BIG, codecs=[BIG])
    with pytest.raises(ValueError, match="codecs=.*serializer=|serializer=.*codecs="):
        cs.create_array({}, shape=(4,), dtype="i4", serializer="bytes", codecs=[LITTLE])
    with pytest.raises(ValueError, match="serializer"):
        cs.create_array(str(tmp_path / "v2"), shape=(4,), dtype="i4", serializer=BIG,
                        zarr_format=2)
    assert not (tmp_path / "v2" / ".zarray").exists()
    # "auto" is fine for v2 and for codecs=
    v2 = cs.create_array({}, shape=(4,), dtype=">i4", serializer="auto", zarr_format=2)
    v2[...] = [1, 2, 3, 4]
    np.testing.assert_array_equal(v2[...], [1, 2, 3, 4])
    c = cs.create_array({}, shape=(4,), dtype="i4", serializer="auto", codecs=[BIG])
    c[...] = [5, 6, 7, 8]
    np.testing.assert_array_equal(c[...], [5, 6, 7, 8])


def test_serializer_dict_mutated_after_create_changes_nothing(tmp_path):
    ser = {"name": "bytes", "configuration": {"endian": "big"}}
    w = tmp_path / "a.zarr"
    a = cs.create_array(str(w), shape=(4,), dtype="i4", serializer=ser, compressors=None)
    ser["configuration"]["endian"] = "little"
    a[...] = [1, 2, 3, 4]
    assert (w / "c" / "0").read_bytes() == np.array([1, 2, 3, 4], ">i4").tobytes()
    assert _codecs(w)[0] == BIG


def test_zarr_writes_with_serializer_chunkstore_reads_and_writes_back(tmp_path):
    from zarr.codecs import BytesCodec, ZstdCodec

    w = str(tmp_path / "z.zarr")
    data = np.arange(7 * 9, dtype="<i8").reshape(7, 9) - 30
    z = zarr.create_array(w, shape=data.shape, chunks=(3, 4), dtype="i8",
                          serializer=BytesCodec(endian="big"), compressors=ZstdCodec())
    z[...] = data
    a = cs.open_array(w, mode="r+")
    np.testing.assert_array_equal(a[...], data)
    np.testing.assert_array_equal(a[2:5, 3:8], data[2:5, 3:8])
    a[1:6, 2] = 99
    data[1:6, 2] = 99
    np.testing.assert_array_equal(zarr.open_array(w, mode="r")[...], data)
    # zarr-python sharded + big endian inner chunks
    ws = str(tmp_path / "zs.zarr")
    zs = zarr.create_array(ws, shape=(16, 16), chunks=(4, 4), shards=(8, 8), dtype=">u4",
                           serializer=BytesCodec(endian="big"), compressors=None)
    sdata = np.arange(256, dtype="u4").reshape(16, 16)
    zs[...] = sdata
    np.testing.assert_array_equal(cs.open_array(ws, mode="r")[5:13, 3:11], sdata[5:13, 3:11])


def test_zarr_codec_object_as_serializer_works_or_names_it():
    from zarr.codecs import BytesCodec

    try:
        a = cs.create_array({}, shape=(4,), dtype="i4", serializer=BytesCodec(endian="big"),
                            compressors=None)
    except (CodecError, ValueError, TypeError) as e:
        assert "BytesCodec" in str(e)
    else:
        a[...] = [1, 2, 3, 4]
        assert a.store.get("c/0") == np.array([1, 2, 3, 4], ">i4").tobytes()


def test_big_endian_records_round_trip_with_serializer(tmp_path):
    rec = np.dtype([("x", "<i4"), ("y", ">f8"), ("z", "u1")])
    data = np.array([(1, 2.5, 3), (-4, 5.25, 6), (7, -8.0, 9)], dtype=rec)
    w = tmp_path / "r.zarr"
    a = cs.create_array(str(w), shape=(3,), chunks=(2,), dtype=rec, serializer=BIG,
                        compressors=None)
    a[...] = data
    np.testing.assert_array_equal(a[...], data)
    np.testing.assert_array_equal(cs.open_array(str(w), mode="r")[1:], data[1:])
    want = np.array(data[:2], dtype=[("x", ">i4"), ("y", ">f8"), ("z", "u1")]).tobytes()
    assert (w / "c" / "0").read_bytes() == want


def test_fill_value_and_missing_chunks_with_big_endian(tmp_path):
    w = str(tmp_path / "a.zarr")
    a = cs.create_array(w, shape=(10,), chunks=(4,), dtype="i4", fill_value=-123456,
                        serializer=BIG, compressors=None)
    a[5] = 7
    expected = np.full(10, -123456, "i4")
    expected[5] = 7
    np.testing.assert_array_equal(a[...], expected)
    np.testing.assert_array_equal(zarr.open_array(w, mode="r")[...], expected)
    a[4:8] = -123456  # all fill: chunk removed (write_empty_chunks False)
    assert not (tmp_path / "a.zarr" / "c" / "1").exists()
    np.testing.assert_array_equal(a[...], np.full(10, -123456, "i4"))


SHARDING_SERIALIZER = {"name": "sharding_indexed", "configuration": {
    "chunk_shape": [2], "codecs": [LITTLE], "index_codecs": [LITTLE],
    "index_location": "end"}}


@pytest.mark.parametrize("how", ["serializer-default-compressors", "codecs"])
def test_unsupported_chain_around_sharding_refused_at_creation(tmp_path, how):
    where = tmp_path / "a.zarr"
    kw = ({"serializer": SHARDING_SERIALIZER} if how != "codecs"
          else {"codecs": [SHARDING_SERIALIZER, ZSTD]})
    try:
        a = cs.create_array(str(where), shape=(8,), chunks=(4,), dtype="i4", **kw)
    except Exception as e:  # refused: must say why, and leave nothing behind
        assert "sharding" in str(e), str(e)
        assert not (where / "zarr.json").exists()
        return
    a[...] = np.arange(8)  # accepted: then it must work
    np.testing.assert_array_equal(cs.open_array(str(where), mode="r")[...], np.arange(8))
    np.testing.assert_array_equal(zarr.open_array(str(where), mode="r")[...], np.arange(8))
