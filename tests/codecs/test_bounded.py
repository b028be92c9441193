"""Bounded decoding: every compressor refuses to produce more than its stage's limit.

Unit tests of ``bounded_decode`` (zstd, blosc, lz4 from their headers; gzip, zlib, bz2,
lzma incrementally; other codecs checked after decoding), of the zstd frame walk, of
the variable-length item count check and of the limits a pipeline gives each stage.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import struct
import zlib

import numcodecs
import numpy as np
import pytest

import chunkstore as cs
from chunkstore.codecs import (
    BytesBytesCodec,
    BytesCodec,
    ChunkSpec,
    CodecPipeline,
    ZstdCodec,
    build_pipeline,
)
from chunkstore.codecs.bounded import bounded_decode, check_blosc_frame, encoded_bound
from chunkstore.codecs.limits import decode_limits, set_decode_limits, variable_cap
from chunkstore.codecs.vlen import check_item_count
from chunkstore.codecs.zstd_frame import decoded_size
from chunkstore.errors import ChunkDecodeError, CodecError

DATA = np.arange(4096, dtype="<u2").tobytes()  # 8 KiB, compressible
CODECS = {
    "zstd": numcodecs.Zstd(level=3), "gzip": numcodecs.GZip(1), "zlib": numcodecs.Zlib(1),
    "bz2": numcodecs.BZ2(1), "lzma": numcodecs.LZMA(), "lz4": numcodecs.LZ4(),
    "blosc": numcodecs.Blosc("lz4", 5, 1), "crc32": numcodecs.CRC32(),
}


def _enc(name: str, data: bytes = DATA) -> bytes:
    return bytes(CODECS[name].encode(np.frombuffer(data, "u1")))


@pytest.mark.parametrize("name", sorted(CODECS))
def test_within_the_limit(name):
    blob = _enc(name)
    assert bytes(bounded_decode(CODECS[name], blob, len(DATA), exact=True)) == DATA
    assert bytes(bounded_decode(CODECS[name], blob, 10 * len(DATA))) == DATA
    out = np.zeros(len(DATA), "u1")
    assert bounded_decode(CODECS[name], blob, out=memoryview(out)) is not None
    assert out.tobytes() == DATA


@pytest.mark.parametrize("name", sorted(CODECS))
def test_over_the_limit_is_refused(name):
    with pytest.raises(ChunkDecodeError, match=rf"{name}: the payload decodes to"):
        bounded_decode(CODECS[name], _enc(name), len(DATA) - 1)
    with pytest.raises(ChunkDecodeError, match="expected"):
        bounded_decode(CODECS[name], _enc(name), len(DATA) + 1, exact=True)


@pytest.mark.parametrize("name", ["zstd", "gzip", "zlib", "bz2", "lzma", "lz4"])
def test_truncated_payload(name):
    blob = _enc(name)
    with pytest.raises((ChunkDecodeError, RuntimeError, ValueError)):
        bounded_decode(CODECS[name], blob[:len(blob) // 2], len(DATA))


def test_gzip_members_and_padding_zlib_trailing_bytes():
    two = gzip.compress(DATA[:100]) + gzip.compress(DATA[100:]) + b"\0" * 8
    assert bytes(bounded_decode(CODECS["gzip"], two, len(DATA), exact=True)) == DATA
    with pytest.raises(ChunkDecodeError):
        bounded_decode(CODECS["gzip"], gzip.compress(DATA) + b"junk", len(DATA))
    # zlib.decompress ignores what follows the stream; so does the bounded decoder
    assert bytes(bounded_decode(CODECS["zlib"], zlib.compress(DATA) + b"xx", len(DATA))) == DATA


@pytest.mark.parametrize("module", [bz2, lzma])
def test_bz2_lzma_streams(module):
    name = module.__name__
    blob = module.compress(DATA[:100]) + module.compress(DATA[100:])
    assert bytes(bounded_decode(CODECS[name], blob, len(DATA), exact=True)) == DATA
    assert bytes(bounded_decode(CODECS[name], module.compress(DATA) + b"junk" * 4, len(DATA))
                 ) == DATA  # trailing garbage after a stream is ignored, as the stdlib does


def test_lzma_big_dictionary_is_allowed_up_to_the_memory_limit():
    codec = numcodecs.LZMA(preset=9 | lzma.PRESET_EXTREME)  # a 64 MiB dictionary
    assert bytes(bounded_decode(codec, bytes(codec.encode(DATA)), len(DATA))) == DATA


def _without_content_size(frame: bytes) -> bytes:
    """The same zstd frame with no content size in its header (as streaming writes it)."""
    descriptor, pos = frame[4], 5
    dict_id = (0, 1, 2, 4)[descriptor & 3]
    fcs = (1 if descriptor & 0x20 else 0, 2, 4, 8)[descriptor >> 6]
    if descriptor & 0x20:  # single segment: the window was the content size
        size = int.from_bytes(frame[pos + dict_id:pos + dict_id + fcs], "little")
        size += 256 if fcs == 2 else 0
        window = bytes([max(0, (size - 1).bit_length() - 10) << 3])
    else:
        window, pos = frame[5:6], 6
    return (frame[:4] + bytes([descriptor & 0x07]) + window + frame[pos:pos + dict_id]
            + frame[pos + dict_id + fcs:])


def test_zstd_frames_without_content_size():
    blob = _without_content_size(_enc("zstd"))
    assert decoded_size(blob, 10**9).exact is False
    assert bytes(bounded_decode(CODECS["zstd"], blob, len(DATA), exact=True)) == DATA
    assert bytes(bounded_decode(CODECS["zstd"], blob, 10**6)) == DATA  # bounded by blocks
    with pytest.raises(ChunkDecodeError):
        bounded_decode(CODECS["zstd"], blob, len(DATA) - 1, exact=True)
    bomb = _without_content_size(bytes(numcodecs.Zstd(3).encode(np.zeros(2**24, "u1"))))
    with pytest.raises(ChunkDecodeError, match="at least"):
        bounded_decode(CODECS["zstd"], bomb, 2**20)


def test_zstd_frame_walk():
    one = _enc("zstd")
    skippable = struct.pack("<II", 0x184D2A50, 3) + b"abc"
    assert decoded_size(one + one, 10**9).nbytes == 2 * len(DATA)
    assert decoded_size(skippable + one, 10**9).nbytes == len(DATA)
    for bad in (b"abc", b"abcd", one[:5], one[:-3]):
        with pytest.raises(ChunkDecodeError, match="zstd"):
            decoded_size(bad, 10**9)


def test_blosc_and_lz4_headers():
    blob = bytearray(_enc("blosc"))
    assert check_blosc_frame(blob) == len(DATA)
    blob[8:12] = struct.pack("<I", 2**31)  # a block size beyond the data
    with pytest.raises(CodecError, match="block size"):
        check_blosc_frame(bytes(blob))
    lz4 = bytearray(_enc("lz4"))
    lz4[:4] = struct.pack("<I", 2**31)
    with pytest.raises(ChunkDecodeError, match="lz4: the payload decodes to 2147483648"):
        bounded_decode(CODECS["lz4"], bytes(lz4), 2**20)


def test_unknown_codecs_are_checked_after_decoding():
    codec = numcodecs.Base64()
    blob = bytes(codec.encode(np.frombuffer(DATA, "u1")))
    assert bytes(bounded_decode(codec, blob, len(DATA))) == DATA
    with pytest.raises(ChunkDecodeError, match="base64"):
        bounded_decode(codec, blob, 100)
    assert encoded_bound(codec, 3) == 4
    assert encoded_bound(numcodecs.CRC32(), 10) == 14
    assert encoded_bound(numcodecs.Zstd(), 10) > 10


def test_vlen_item_count():
    payload = struct.pack("<I", 2) + struct.pack("<I", 1) + b"a" + struct.pack("<I", 0)
    check_item_count(payload, 2, "vlen-utf8")
    with pytest.raises(ChunkDecodeError, match="claims 3 items, expected 2"):
        check_item_count(struct.pack("<I", 3) + payload[4:], 2, "vlen-utf8")
    with pytest.raises(ChunkDecodeError, match="hold at most 1"):
        check_item_count(struct.pack("<I", 2) + b"\0" * 4, 2, "vlen-bytes")
    with pytest.raises(ChunkDecodeError, match="no item count"):
        check_item_count(b"\0", 2, "vlen-bytes")


def test_pipeline_stage_limits():
    a = cs.create_array(None, shape=(64,), chunks=(64,), dtype="i4",
                        compressors=[numcodecs.Blosc(), numcodecs.Zstd(), numcodecs.CRC32C()])
    a[:] = np.arange(64)
    pipeline = build_pipeline(a.metadata)
    assert pipeline._limits[0] == 256  # blosc: exactly the chunk
    assert pipeline._limits[1] >= 256 + 16  # zstd: what blosc may output for it
    assert pipeline._limits[2] > pipeline._limits[1]  # crc32c: what zstd may output
    np.testing.assert_array_equal(a[:], np.arange(64))
    out = np.empty(64, "i4")
    assert pipeline.decode(a.store.get(a.chunk_key((0,))), out=out) is out
    np.testing.assert_array_equal(out, np.arange(64))


def test_variable_length_cap_is_configurable():
    a = cs.create_array(None, shape=(4,), chunks=(4,), dtype=str, compressors=numcodecs.Zstd())
    a[:] = np.array(["x" * 300_000] * 4, dtype=object)  # 1.2 MB of strings, a tiny chunk
    old = set_decode_limits(vlen_min_bytes=1 << 20, vlen_ratio=2)
    try:
        assert variable_cap(100) == 1 << 20
        with pytest.raises(ChunkDecodeError, match="more than the 1048576"):
            cs.open_array(a.store, mode="r")[:]
        set_decode_limits(vlen_min_bytes=2 << 20)
        assert cs.open_array(a.store, mode="r")[0] == "x" * 300_000
    finally:
        set_decode_limits(vlen_min_bytes=old.vlen_min_bytes, vlen_ratio=old.vlen_ratio)
    assert decode_limits() == old
    with pytest.raises(ValueError):
        set_decode_limits(vlen_ratio=0)


class _Xor(BytesBytesCodec):
    """A codec written before ``limit`` existed: decode(data, out=None)."""

    name = "test.xor"

    def encode(self, data):
        return (np.frombuffer(data, "u1") ^ 0x5A).tobytes()

    def decode(self, data, out=None):
        return (np.frombuffer(data, "u1") ^ 0x5A).tobytes()


def test_codec_without_limit_parameter_is_checked_after_decoding():
    spec = ChunkSpec((64,), np.dtype("i4"))
    pipeline = CodecPipeline([BytesCodec(), ZstdCodec(1), _Xor()], spec)
    data = np.arange(64, dtype="i4")
    blob = pipeline.encode(data)
    np.testing.assert_array_equal(pipeline.decode(blob), data)
    with pytest.raises(ChunkDecodeError, match="test.xor: the payload decodes to"):
        pipeline.decode(_Xor().encode(bytes(100_000)))
