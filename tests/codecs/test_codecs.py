"""Codec chains: the bytes each codec stores (checked independently), round trips through
arrays, v2 compressor+filters, unsafe codecs, and corrupt chunks."""

from __future__ import annotations

import gzip
import json
import pickle

import google_crc32c
import numcodecs
import numpy as np
import pytest

import chunkstore as cs
from chunkstore.codecs import (
    BloscCodec,
    BytesCodec,
    ChunkSpec,
    CodecPipeline,
    Crc32cCodec,
    GzipCodec,
    TransposeCodec,
    ZstdCodec,
    build_pipeline,
    codec_from_json,
)
from chunkstore.errors import ChunkDecodeError, CodecError, MetadataError

DATA = np.arange(4 * 6, dtype="<i4").reshape(4, 6) * 1001 - 5000


def stored_chunk(a: cs.Array, coords=(0, 0)) -> bytes:
    blob = a.store.get(a.chunk_key(coords))
    assert blob is not None, f"chunk {coords} was not written"
    return blob


def make(codecs=None, data=DATA, **kw):
    kw.setdefault("chunks", data.shape)
    a = cs.create_array(None, shape=data.shape, dtype=data.dtype, codecs=codecs, **kw)
    a[...] = data
    return a


# -- v3 codecs: stored bytes --------------------------------------------------------------
@pytest.mark.parametrize("endian", ["little", "big"])
@pytest.mark.parametrize("dtype", ["<i2", ">i4", "<f8", "<c8", "<u8", "<f2"])
def test_bytes_endian(endian, dtype):
    data = (np.arange(24).reshape(4, 6) - 3).astype(dtype)
    a = make([{"name": "bytes", "configuration": {"endian": endian}}], data=data)
    stored = ">" if endian == "big" else "<"
    assert stored_chunk(a) == data.astype(np.dtype(dtype).newbyteorder(stored)).tobytes()
    assert a.metadata.codecs[0] == {"name": "bytes", "configuration": {"endian": endian}}
    got = a[...]
    np.testing.assert_array_equal(got, data)
    assert got.dtype.isnative


@pytest.mark.parametrize("dtype", ["|b1", "|i1", "|u1"])
def test_bytes_endian_absent_for_one_byte_types(dtype):
    data = (np.arange(24).reshape(4, 6) % 2).astype(dtype)
    a = make([{"name": "bytes", "configuration": {"endian": "big"}}], data=data)
    assert a.metadata.codecs[0]["name"] == "bytes"
    assert "endian" not in a.metadata.codecs[0].get("configuration", {})
    assert stored_chunk(a) == data.tobytes()
    np.testing.assert_array_equal(a[...], data)


def test_bytes_codec_rejects_bad_endian():
    with pytest.raises(CodecError, match="endian"):
        codec_from_json({"name": "bytes", "configuration": {"endian": "middle"}}, "zarr.json")


@pytest.mark.parametrize("order", [[1, 0], [0, 1]])
def test_transpose_2d(order):
    a = make([{"name": "transpose", "configuration": {"order": order}}, "bytes"])
    assert stored_chunk(a) == np.ascontiguousarray(DATA.transpose(order)).tobytes()
    np.testing.assert_array_equal(a[...], DATA)


def test_transpose_3d_partial_chunks():
    data = np.arange(5 * 4 * 3, dtype="f4").reshape(5, 4, 3)
    a = make([{"name": "transpose", "configuration": {"order": [2, 0, 1]}}, "bytes",
              "zstd"], data=data, chunks=(2, 3, 2))
    chunk = numcodecs.Zstd().decode(stored_chunk(a, (0, 0, 0)))
    expect = np.ascontiguousarray(data[:2, :3, :2].transpose(2, 0, 1)).tobytes()
    assert bytes(chunk) == expect
    np.testing.assert_array_equal(a[...], data)
    np.testing.assert_array_equal(a[1:4, ::2, -1], data[1:4, ::2, -1])


def test_transpose_bad_order():
    with pytest.raises(CodecError, match="permutation"):
        TransposeCodec([0, 0])
    with pytest.raises(CodecError, match="does not match"):
        CodecPipeline([TransposeCodec([1, 0, 2]), BytesCodec()], ChunkSpec((2, 2), np.dtype("i4")))


def test_gzip_stored_bytes():
    a = make(["bytes", {"name": "gzip", "configuration": {"level": 6}}])
    assert gzip.decompress(stored_chunk(a)) == DATA.tobytes()


def test_zstd_stored_bytes():
    a = make(["bytes", {"name": "zstd", "configuration": {"level": 3, "checksum": True}}])
    assert bytes(numcodecs.Zstd().decode(stored_chunk(a))) == DATA.tobytes()
    assert a.metadata.codecs[1] == {"name": "zstd", "configuration": {"level": 3,
                                                                      "checksum": True}}


def test_crc32c_stored_bytes():
    a = make(["bytes", "crc32c"])
    blob = stored_chunk(a)
    assert blob[:-4] == DATA.tobytes()
    assert int.from_bytes(blob[-4:], "little") == google_crc32c.value(DATA.tobytes())


@pytest.mark.parametrize("cname", ["lz4", "zstd", "blosclz", "zlib", "lz4hc"])
@pytest.mark.parametrize("shuffle", ["noshuffle", "shuffle", "bitshuffle"])
def test_blosc(cname, shuffle):
    a = make(["bytes", {"name": "blosc", "configuration": {"cname": cname, "clevel": 5,
                                                           "shuffle": shuffle}}])
    assert bytes(numcodecs.Blosc().decode(stored_chunk(a))) == DATA.tobytes()
    cfg = a.metadata.codecs[1]["configuration"]
    assert cfg["cname"] == cname and cfg["shuffle"] == shuffle and cfg["typesize"] == 4
    np.testing.assert_array_equal(a[...], DATA)


def test_blosc_bad_config():
    with pytest.raises(CodecError, match="cname"):
        BloscCodec(cname="nope")
    with pytest.raises(CodecError, match="shuffle"):
        BloscCodec(shuffle="sideways")
    with pytest.raises(CodecError, match="clevel"):
        BloscCodec(clevel=12)
    with pytest.raises(CodecError, match="level"):
        GzipCodec(level=11)


def test_codec_json_round_trip():
    for codec in (BytesCodec("big"), TransposeCodec([1, 0]), GzipCodec(2), ZstdCodec(4, True),
                  Crc32cCodec(), BloscCodec("zstd", 3, "bitshuffle", 8, 0)):
        again = codec_from_json(codec.to_json(), "zarr.json")
        assert again == codec and again.to_json() == codec.to_json()


def test_long_chain_round_trip():
    codecs = [{"name": "transpose", "configuration": {"order": [1, 0]}},
              {"name": "bytes", "configuration": {"endian": "big"}},
              {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 1,
                                                  "shuffle": "shuffle"}},
              {"name": "gzip", "configuration": {"level": 1}}, "crc32c"]
    a = make(codecs, chunks=(3, 4))
    np.testing.assert_array_equal(a[...], DATA)
    blob = stored_chunk(a, (1, 1))
    raw = numcodecs.Blosc().decode(numcodecs.GZip().decode(blob[:-4]))
    stored = np.frombuffer(raw, ">i4").reshape(4, 3)  # the (3, 4) chunk, transposed
    expect = np.zeros((3, 4), "i4")  # edge chunk: rows 3:6, cols 4:8 of a 4x6 array
    expect[:1, :2] = DATA[3:, 4:]
    np.testing.assert_array_equal(stored.T, expect)


def test_chain_order_errors():
    spec = ChunkSpec((4,), np.dtype("i4"))
    with pytest.raises(CodecError, match="no array->bytes"):
        CodecPipeline([TransposeCodec([0])], spec)
    with pytest.raises(CodecError, match="before the array->bytes"):
        CodecPipeline([GzipCodec(), BytesCodec()], spec)
    with pytest.raises(CodecError, match="after the array->bytes"):
        CodecPipeline([BytesCodec(), TransposeCodec([0])], spec)
    with pytest.raises(CodecError, match="more than one"):
        CodecPipeline([BytesCodec(), BytesCodec()], spec)


def test_unknown_codec_names_field():
    with pytest.raises(CodecError, match=r"x\.zarr/zarr\.json.*codecs.*'lzfse'"):
        codec_from_json({"name": "lzfse", "configuration": {}}, "x.zarr/zarr.json")


def test_unknown_codec_on_open_names_document(tmp_path):
    path = tmp_path / "x.zarr"
    cs.create_array(str(path), shape=(4,), chunks=(2,), dtype="i4")
    d = json.loads((path / "zarr.json").read_text())
    d["codecs"].append({"name": "lzfse", "configuration": {}})
    (path / "zarr.json").write_text(json.dumps(d))
    a = cs.open_array(str(path), mode="r")
    with pytest.raises(CodecError, match=r"x\.zarr/zarr\.json.*'lzfse'"):
        a[...]


# -- numcodecs.<id> codecs in v3 ----------------------------------------------------------------
@pytest.mark.parametrize(("codec", "data", "exact"), [
    ({"name": "numcodecs.delta", "configuration": {"dtype": "<i4"}}, DATA, True),
    ({"name": "numcodecs.fixedscaleoffset", "configuration": {
        "offset": 1000, "scale": 10, "dtype": "<f8", "astype": "<i4"}},
     DATA.astype("f8") / 10, True),
    ({"name": "numcodecs.quantize", "configuration": {"digits": 2, "dtype": "<f8"}},
     DATA.astype("f8") / 7, False),
    ({"name": "numcodecs.bitround", "configuration": {"keepbits": 10}},
     DATA.astype("f4") / 3, False),
    ({"name": "numcodecs.astype", "configuration": {"encode_dtype": "<i2", "decode_dtype": "<i4"}},
     DATA // 4, True),
])
def test_numcodecs_array_filters(codec, data, exact):
    a = make([codec, "bytes", "zstd"], data=data, chunks=(2, 3))
    assert a.metadata.codecs[0]["name"] == codec["name"]
    got = a[...]
    if exact:
        np.testing.assert_allclose(got, data, rtol=1e-12)
    else:
        np.testing.assert_allclose(got, data, rtol=1e-2, atol=1e-2)
    # a full chunk as the codec alone would store it
    nc = numcodecs.get_codec({"id": codec["name"][10:], **codec["configuration"]})
    enc = np.asarray(nc.encode(np.ascontiguousarray(data[:2, :3])))
    raw = bytes(numcodecs.Zstd().decode(stored_chunk(a)))
    assert raw == np.ascontiguousarray(enc).astype(enc.dtype.newbyteorder("<")).tobytes()


@pytest.mark.parametrize("cid", ["zlib", "bz2", "lzma", "lz4", "crc32", "adler32", "fletcher32",
                                 "jenkins_lookup3", "shuffle"])
def test_numcodecs_bytes_codecs(cid):
    config = {"elementsize": 4} if cid == "shuffle" else {}
    a = make(["bytes", {"name": f"numcodecs.{cid}", "configuration": config}])
    np.testing.assert_array_equal(a[...], DATA)
    nc = numcodecs.get_codec({"id": cid, **config})
    assert bytes(nc.decode(stored_chunk(a))) == DATA.tobytes()


def test_numcodecs_objects_as_compressors_and_filters():
    a = cs.create_array(None, shape=DATA.shape, chunks=(2, 3), dtype=DATA.dtype,
                        filters=[numcodecs.Delta(dtype="<i4")],
                        compressors=[numcodecs.Zlib(level=3)])
    a[...] = DATA
    names = [c["name"] for c in a.metadata.codecs]
    assert names == ["numcodecs.delta", "bytes", "numcodecs.zlib"]
    np.testing.assert_array_equal(a[...], DATA)
    b = cs.create_array(None, shape=(4,), dtype="f8", compressors=numcodecs.Blosc("zstd", 3, 2))
    assert b.metadata.codecs[1] == {"name": "blosc", "configuration": {
        "cname": "zstd", "clevel": 3, "shuffle": "bitshuffle", "blocksize": 0, "typesize": 8}}


def test_compressor_must_be_bytes_codec():
    with pytest.raises(CodecError, match="not a bytes->bytes"):
        cs.create_array(None, shape=(4,), dtype="i4", compressors=numcodecs.Delta("<i4"))
    with pytest.raises(CodecError, match="not an array->array"):
        cs.create_array(None, shape=(4,), dtype="i4", filters=numcodecs.Zlib())


# -- v2 compressor + filters -------------------------------------------------------------------
@pytest.mark.parametrize(("compressor", "filters"), [
    (None, None),
    ({"id": "zlib", "level": 1}, None),
    ({"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}, None),
    ({"id": "zstd", "level": 1}, [{"id": "delta", "dtype": "<i4"}]),
    ({"id": "gzip", "level": 1}, [{"id": "delta", "dtype": "<i4"},
                                  {"id": "shuffle", "elementsize": 4}]),
    (None, [{"id": "delta", "dtype": "<i4", "astype": "<i8"}]),
])
@pytest.mark.parametrize("order", ["C", "F"])
def test_v2_chain(compressor, filters, order):
    a = cs.create_array(None, shape=DATA.shape, chunks=(3, 4), dtype="<i4", zarr_format=2,
                        compressors=compressor, filters=filters, order=order)
    a[...] = DATA
    np.testing.assert_array_equal(a[...], DATA)
    # decode the stored chunk (0, 1) independently of chunkstore
    blob = a.store.get("0.1")
    if compressor is not None:
        blob = numcodecs.get_codec(compressor).decode(blob)
    for f in reversed(filters or []):
        blob = numcodecs.get_codec(f).decode(blob)
    chunk = np.frombuffer(bytes(blob) if not isinstance(blob, np.ndarray) else blob.tobytes(),
                          "<i4").reshape(3, 4, order=order)
    expect = np.zeros((3, 4), "<i4")
    expect[:, :2] = DATA[:3, 4:]
    np.testing.assert_array_equal(chunk, expect)
    zarray = json.loads(a.store.get(".zarray"))
    if compressor is None:
        assert zarray["compressor"] is None
    else:  # the same codec (zstd's default checksum=false is left out, as zarr-python does)
        assert (numcodecs.get_codec(zarray["compressor"]).get_config()
                == numcodecs.get_codec(compressor).get_config())
        assert "checksum" not in zarray["compressor"]
    assert zarray["filters"] == ([numcodecs.get_codec(f).get_config() for f in filters]
                                 if filters else None)


def test_v2_takes_one_compressor():
    with pytest.raises(CodecError, match="at most one compressor"):
        cs.create_array(None, shape=(4,), dtype="i4", zarr_format=2,
                        compressors=[numcodecs.Zlib(), numcodecs.GZip()])


def test_v2_unknown_codec_id():
    pipeline_meta = cs.create_array(None, shape=(4,), dtype="i4", zarr_format=2).metadata
    bad = pipeline_meta.replace(compressor={"id": "no-such-codec"})
    with pytest.raises(CodecError, match=r"compressor.*no-such-codec"):
        build_pipeline(bad, "x.zarr/.zarray")


# -- unsafe codecs ------------------------------------------------------------------------------
UNSAFE = [{"id": "pickle"}, {"id": "msgpack2"}, {"id": "json2"},
          {"id": "vlen-array", "dtype": "<i4"}]


@pytest.mark.parametrize("config", UNSAFE, ids=lambda c: c["id"])
def test_unsafe_v2_filter_refused_on_create(config):
    with pytest.raises(CodecError, match=f"'{config['id']}'.*refused"):
        cs.create_array(None, shape=(3,), dtype="i4", zarr_format=2, filters=[config])


@pytest.mark.parametrize("position", ["filter-first", "filter-last", "compressor"])
def test_unsafe_v2_codec_refused_on_open_in_any_position(position, numcodecs_unpickles):
    store = cs.MemoryStore()
    cs.create_array(store, shape=(3,), chunks=(3,), dtype="i4", zarr_format=2, compressors=None)
    zarray = json.loads(store.get(".zarray"))
    if position == "filter-first":
        zarray["filters"] = [{"id": "pickle"}, {"id": "zlib", "level": 1}]
    elif position == "filter-last":
        zarray["filters"] = [{"id": "zlib", "level": 1}, {"id": "pickle"}]
    else:
        zarray["compressor"] = {"id": "pickle"}
    store.set(".zarray", json.dumps(zarray).encode())
    store.set("0", pickle.dumps(np.arange(3, dtype="i4")))
    a = cs.open_array(store, mode="r")
    with pytest.raises(CodecError, match="'pickle'.*refused"):
        a[...]


@pytest.fixture
def numcodecs_unpickles(monkeypatch):
    """numcodecs >= 0.16 has its own pickle opt-in: lift it, so chunkstore's guard is
    the only one tested."""
    monkeypatch.setattr(numcodecs.pickles, "ALLOW_UNSAFE_PICKLE_DECODE", True, raising=False)


def test_unsafe_v3_codec_refused_then_allowed(numcodecs_unpickles):
    store = cs.MemoryStore()
    with pytest.raises(CodecError, match="refused"):
        cs.create_array(store, shape=(3,), dtype="i4",
                        codecs=["bytes", {"name": "numcodecs.pickle"}])
    a = cs.create_array(store, shape=(3,), dtype="i4", chunks=(3,),
                        codecs=["bytes", {"name": "numcodecs.pickle"}], allow_unsafe_codecs=True)
    a[...] = [1, 2, 3]
    with pytest.raises(CodecError, match="pickle.*refused"):
        cs.open_array(store, mode="r")[...]
    trusted = cs.open_array(store, mode="r", allow_unsafe_codecs=True)
    np.testing.assert_array_equal(trusted[...], [1, 2, 3])


def test_unsafe_opt_in_survives_pickling(numcodecs_unpickles):
    store = cs.MemoryStore()
    a = cs.create_array(store, shape=(3,), dtype="i4", chunks=(3,),
                        codecs=["bytes", {"name": "numcodecs.pickle"}], allow_unsafe_codecs=True)
    a[...] = [4, 5, 6]
    # an opted-in handle keeps its opt-in through pickling; a fresh one does not have it
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(a))[...], [4, 5, 6])


# -- corrupt chunks ------------------------------------------------------------------------------
@pytest.mark.parametrize("codecs", [
    ["bytes"], ["bytes", "zstd"], ["bytes", "gzip"], ["bytes", "crc32c"],
    ["bytes", {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5,
                                                  "shuffle": "shuffle"}}],
], ids=["raw", "zstd", "gzip", "crc32c", "blosc"])
@pytest.mark.parametrize("damage", ["truncate", "garbage", "flip"])
def test_corrupt_chunk_raises_decode_error_naming_key(codecs, damage):
    store = cs.MemoryStore()
    a = cs.create_array(store, name="grp/arr", shape=(8, 8), chunks=(4, 4), dtype="f8",
                        codecs=codecs)
    a[...] = np.random.default_rng(0).random((8, 8))
    key = a.chunk_key((1, 0))
    blob = bytearray(store.get(key))
    if damage == "truncate":
        blob = blob[: len(blob) // 2]
    elif damage == "garbage":
        blob = bytearray(b"\x13" * 37)
    else:
        blob[len(blob) // 2] ^= 0xFF
    store.set(key, bytes(blob))
    if damage == "flip" and codecs[-1] not in ("gzip", "crc32c"):
        # without a checksum a flipped bit may decode to other values; never a crash
        try:
            assert a[...].shape == (8, 8)
        except ChunkDecodeError as e:
            assert "grp/arr/c/1/0" in str(e)
        return
    with pytest.raises(ChunkDecodeError, match=r"'/grp/arr'.*'grp/arr/c/1/0'"):
        a[...]
    with pytest.raises(ChunkDecodeError, match="grp/arr/c/1/0"):
        a.read_chunk((1, 0))
    np.testing.assert_array_equal(a[:4], a[:4])  # other chunks still read


def test_corrupt_v2_chunk_names_key():
    store = cs.MemoryStore()
    a = cs.create_array(store, shape=(8,), chunks=(4,), dtype="i4", zarr_format=2,
                        compressors={"id": "zlib", "level": 1})
    a[...] = np.arange(8)
    store.set("1", b"not zlib")
    with pytest.raises(ChunkDecodeError, match="'1'"):
        a[...]
    np.testing.assert_array_equal(a[:4], np.arange(4))


def test_malformed_json_names_document():
    store = cs.MemoryStore()
    cs.create_array(store, name="x", shape=(2,), dtype="i4")
    store.set("x/zarr.json", b"{oops")
    with pytest.raises(MetadataError, match=r"x/zarr\.json.*malformed"):
        cs.open_array(store, path="x", mode="r")


def test_gzip_encodes_the_same_chunk_to_the_same_bytes_at_any_time(monkeypatch):
    """numcodecs' gzip puts the current second in each member's header, so rewriting a
    chunk with the same values changed its bytes (and its ETag); chunkstore's header has
    no time. zarr-python (numcodecs) and the standard library read it."""
    import time

    from chunkstore.codecs import GzipCodec

    data = np.arange(1000, dtype="<f8").reshape(10, 100)
    codec = GzipCodec(5)
    first = codec.encode(data)
    monkeypatch.setattr(time, "time", lambda: 2.0e9)  # another second
    assert codec.encode(data) == first
    assert first[4:8] == b"\0\0\0\0"  # MTIME: none
    assert gzip.decompress(first) == data.tobytes()
    assert bytes(numcodecs.GZip(5).decode(first)) == data.tobytes()
    assert bytes(codec.decode(first)) == data.tobytes()


@pytest.mark.parametrize("level", [0, 1, 9])
def test_v2_gzip_encodes_the_same_chunk_to_the_same_bytes_at_any_time(tmp_path, monkeypatch, level):
    """A v2 array's gzip compressor (numcodecs.GZip, which puts the current second in the
    header) stores the same bytes for the same chunk whenever it is written, as the v3
    codec does; zarr-python reads them; an empty buffer encodes and decodes too."""
    import time

    import zarr

    from chunkstore.codecs import GzipCodec
    from chunkstore.storage.local.store import LocalStore

    data = np.arange(1000, dtype="<i4").reshape(10, 100)
    store = LocalStore(str(tmp_path / "a"))
    a = cs.create_array(store, shape=(10, 100), chunks=(10, 100), dtype="<i4", zarr_format=2,
                        compressors=[numcodecs.GZip(level)], fill_value=0)
    a[...] = data
    first = bytes(store.get("0.0"))
    monkeypatch.setattr(time, "time", lambda: 2.0e9)  # another second
    a[...] = data
    assert bytes(store.get("0.0")) == first
    assert first[4:8] == b"\0\0\0\0"
    assert gzip.decompress(first) == data.tobytes()
    z = zarr.open_array(str(tmp_path / "a"), mode="r")
    np.testing.assert_array_equal(z[...], data)
    empty = GzipCodec(level).encode(np.empty(0, "i4"))
    assert gzip.decompress(empty) == b"" and bytes(GzipCodec(level).decode(empty)) == b""
