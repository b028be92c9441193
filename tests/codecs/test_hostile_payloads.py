"""Hostile chunk payloads cost bounded memory and end in a clear error naming the key.

Each case writes a normal array with chunkstore, replaces one chunk's bytes in the store
by a payload built to blow up (a decompression bomb, a variable-length header claiming
2**27 or 2**31 items), then reads it, partially writes it (``a[i] = v``, which decodes
the old chunk) and verifies it in a process of its own (from the suite's fork server:
tests/codecs/hostile_payload_child.py). That process caps its address space
(``RLIMIT_AS``: what it has mapped after warming up + 2 x chunk + 64 MiB) and reports the growth of its peak RSS, which must stay below 2 x chunk + 16 MiB.
"""

from __future__ import annotations

import bz2
import functools
import lzma
import struct
import zlib
from collections.abc import Callable

import numcodecs
import numpy as np
import pytest

import chunkstore as cs
from chunkstore.api.verify import verify
from chunkstore.codecs import Crc32cCodec, GzipCodec, ZstdCodec, build_pipeline
from chunkstore.codecs.limits import variable_cap
from chunkstore.errors import ChunkDecodeError
from tests.codecs import hostile_payload_child
from tests.multiproc import context

MiB = 2**20
LIMIT_EXTRA = 16 * MiB  # allowed peak RSS growth on top of 2 x the chunk
AS_HEADROOM = 64 * MiB  # address-space headroom of the subprocess (allocator, threads)


# -- bomb payloads (built in pieces: the test process never holds the decoded bytes; each
# built once per process, as several cases share one)
_PIECE = 16 * MiB


@functools.cache
def gzip_bomb(n: int, wbits: int = 31) -> bytes:
    """``n`` zero bytes (a multiple of 1 MiB) as one gzip (wbits 31) or zlib (wbits 15)
    stream. Each MiB is compressed after a full flush (the output byte-aligned, the window
    reset), so every MiB after the first compresses to the same bytes: compressed once and
    repeated, with the trailer (CRC-32 or Adler-32 and size) computed, instead of deflating
    0.5 GiB (~3.5 s)."""
    piece = bytes(MiB)
    c = zlib.compressobj(9, zlib.DEFLATED, wbits)
    first, body, again = (c.compress(piece) + c.flush(zlib.Z_FULL_FLUSH) for _ in range(3))
    assert body == again and first.endswith(body), "deflate of zeros is not periodic"
    end = b"\x03\x00"  # an empty final block (fixed Huffman codes)
    if wbits == 31:
        crc = 0
        for _ in range(n // MiB):
            crc = zlib.crc32(piece, crc)
        trailer = struct.pack("<II", crc, n & 0xFFFFFFFF)
    else:  # Adler-32 of zeros: a = 1, b = n (mod 65521)
        trailer = struct.pack(">I", (n % 65521) << 16 | 1)
    return first + body * (n // MiB - 1) + end + trailer


def _streams(compressor: Callable[[], object], n: int) -> bytes:
    """``n`` zero bytes as streams of 16 MiB each, one after the other (bz2 and xz files
    may hold several; ``bz2.decompress``/``lzma.decompress`` and the bounded decoder read
    them all): one stream compressed, repeated, instead of compressing ``n`` bytes."""
    c = compressor()
    one = c.compress(bytes(_PIECE)) + c.flush()
    return one * (n // _PIECE)


@functools.cache
def bz2_bomb(n: int) -> bytes:
    return _streams(lambda: bz2.BZ2Compressor(9), n)


def lzma_bomb(n: int) -> bytes:
    return _streams(lambda: lzma.LZMACompressor(format=lzma.FORMAT_XZ, preset=0), n)


@functools.cache
def zstd_bomb(n: int) -> bytes:
    return bytes(numcodecs.Zstd(level=3).encode(np.zeros(n, "u1")))


def blosc_bomb(n: int) -> bytes:
    return bytes(numcodecs.Blosc("lz4", 5, numcodecs.Blosc.NOSHUFFLE).encode(np.zeros(n, "u1")))


def lz4_bomb(n: int) -> bytes:
    return bytes(numcodecs.LZ4().encode(np.zeros(n, "u1")))


def crc32c(payload: bytes) -> bytes:
    return bytes(numcodecs.CRC32C().encode(np.frombuffer(payload, "u1")))


def vlen_count(n: int) -> bytes:
    """A 4-byte variable-length chunk that claims ``n`` items."""
    return struct.pack("<I", n)


# -- the child process -------------------------------------------------------------------------
def run_child(path: str, place: Callable[[], None], key: str, index: int, value, chunk_nbytes: int,
              ops: str = "read,write,verify", headroom: int = AS_HEADROOM) -> dict:
    """Open the array at ``path`` in a new process (from the suite's fork server) and warm
    it up, call ``place`` (which puts the bomb in the store), then run ``ops`` there and
    return the child's report (``hostile_payload_child.run``)."""
    ctx = context()
    conn, theirs = ctx.Pipe()
    proc = ctx.Process(target=hostile_payload_child.run,
                       args=(path, key, index, value, chunk_nbytes, headroom, ops, theirs))
    proc.start()
    theirs.close()
    try:
        assert conn.poll(300) and conn.recv() == "ready", f"exit status {proc.exitcode}"
        place()
        conn.send("go")
        assert conn.poll(300), f"no report; exit status {proc.exitcode}"
        report = conn.recv()
    finally:
        proc.join(60)
        if proc.exitcode is None:
            proc.kill()
            proc.join()
    assert proc.exitcode == 0, proc.exitcode
    return report


# -- cases --------------------------------------------------------------------------------------
_BIG = 256 * MiB
COMPRESSED_CASES = {
    "v3-zstd-crc32c": (3, [ZstdCodec(1), Crc32cCodec()], lambda: crc32c(zstd_bomb(_BIG))),
    "v3-zstd": (3, [ZstdCodec(1)], lambda: zstd_bomb(_BIG)),
    "v3-gzip": (3, [GzipCodec(1)], lambda: gzip_bomb(2 * _BIG)),
    "v3-blosc": (3, "auto", lambda: blosc_bomb(_BIG)),
    "v3-numcodecs.lz4": (3, [numcodecs.LZ4()], lambda: lz4_bomb(_BIG)),
    "v3-numcodecs.bz2": (3, [numcodecs.BZ2()], lambda: bz2_bomb(_BIG)),
    "v2-zlib": (2, numcodecs.Zlib(1), lambda: gzip_bomb(2 * _BIG, 15)),
    "v2-gzip": (2, numcodecs.GZip(1), lambda: gzip_bomb(2 * _BIG)),
    "v2-zstd": (2, numcodecs.Zstd(1), lambda: zstd_bomb(_BIG)),
    "v2-blosc": (2, "auto", lambda: blosc_bomb(_BIG)),
    "v2-lz4": (2, numcodecs.LZ4(), lambda: lz4_bomb(_BIG)),
    "v2-bz2": (2, numcodecs.BZ2(), lambda: bz2_bomb(_BIG)),
    "v2-lzma": (2, numcodecs.LZMA(), lambda: lzma_bomb(_BIG)),
}

VLEN_CASES = {
    "v3-string": (3, str, "x"),
    "v3-bytes": (3, bytes, b"x"),
    "v2-object-utf8": (2, str, "x"),
}


def compressed_case(tmp_path, name: str):
    """``(path, key, place, chunk_nbytes)`` of a 2-chunk i4 array whose chunk 0 will be
    a bomb."""
    fmt, compressors, build = COMPRESSED_CASES[name]
    path = str(tmp_path / "a.zarr")
    a = cs.create_array(path, shape=(512,), chunks=(256,), dtype="i4",
                        compressors=compressors, zarr_format=fmt)
    a[:] = np.arange(512, dtype="i4")
    key = a.chunk_key((0,))
    bomb = build()
    return path, key, lambda: a.store.set(key, bomb), 1024


def vlen_case(tmp_path, name: str, count: int):
    fmt, dtype, _ = VLEN_CASES[name]
    path = str(tmp_path / "s.zarr")
    a = cs.create_array(path, shape=(8,), chunks=(4,), dtype=dtype, compressors=None,
                        zarr_format=fmt)
    a[:] = np.array(["abcd"] * 8 if dtype is str else [b"abcd"] * 8, dtype=object)
    key = a.chunk_key((0,))
    return path, key, lambda: a.store.set(key, vlen_count(count)), 4 * 16


def check_report(report: dict, key: str, chunk_nbytes: int) -> None:
    for op, result in report.items():
        error = result["error"]
        assert error is not None, f"{op}: the hostile chunk was accepted"
        assert "MemoryError" not in error, f"{op}: {error}"
        assert key in error, f"{op}: the error does not name the key: {error}"
        assert error.startswith(("ChunkDecodeError", "verify:")), f"{op}: {error}"
        assert result["growth"] < 2 * chunk_nbytes + LIMIT_EXTRA, (
            f"{op}: peak RSS grew by {result['growth'] / MiB:.1f} MiB")


@pytest.mark.parametrize("build,decompress", [
    (gzip_bomb, lambda b: zlib.decompress(b, 31)),
    (lambda n: gzip_bomb(n, 15), zlib.decompress),
    (bz2_bomb, bz2.decompress),
    (lzma_bomb, lzma.decompress),
])
def test_bomb_builders_make_valid_payloads_of_their_size(build, decompress):
    """The builders' payloads decode in full, checksums included, to exactly ``n`` zero
    bytes (at 48 MiB here, built as the 256-512 MiB bombs are)."""
    n = 3 * _PIECE
    out = decompress(build(n))
    assert len(out) == n and out.count(0) == n


@pytest.mark.parametrize("name", sorted(COMPRESSED_CASES))
def test_decompression_bomb(tmp_path, name):
    path, key, place, nbytes = compressed_case(tmp_path, name)
    check_report(run_child(path, place, key, 5, 7, nbytes), key, nbytes)


@pytest.mark.parametrize("count", [2**27, 2**31])
@pytest.mark.parametrize("name", sorted(VLEN_CASES))
def test_vlen_item_count(tmp_path, name, count):
    path, key, place, nbytes = vlen_case(tmp_path, name, count)
    report = run_child(path, place, key, 1, VLEN_CASES[name][2], nbytes)
    check_report(report, key, nbytes)
    assert "items" in report["read"]["error"]


# -- shard index arithmetic -----------------------------------------------------------------
def _sharded(tmp_path, index_location: str = "end"):
    a = cs.create_array(str(tmp_path / "sh.zarr"), shape=(16,), chunks=(4,),
                        shards={"shape": (16,), "index_location": index_location},
                        dtype="i4", compressors=None)
    a[:] = np.arange(16, dtype="i4")
    codec = build_pipeline(a.metadata).array_bytes
    return a, codec, a.chunk_key((0,))


def _with_entry(codec, shard: bytes, i: int, offset: int, nbytes: int) -> bytes:
    index = codec.parse(shard).copy()
    index[i] = (offset, nbytes)
    encoded = bytes(codec.index.encode(index.reshape(*codec.chunks_per_shard, 2)))
    if codec.index_location == "start":
        return encoded + shard[len(encoded):]
    return shard[:-len(encoded)] + encoded


@pytest.mark.parametrize("index_location", ["end", "start"])
@pytest.mark.parametrize("entry", [(2**64 - 2, 4), (2**63, 2**63 + 8), (4, 2**64 - 2),
                                   (0, 8), (8, 2**64 - 1), (2**64 - 1, 8)])
def test_shard_index_entry_outside_payload(tmp_path, index_location, entry):
    a, codec, key = _sharded(tmp_path, index_location)
    shard = bytes(a.store.get(key))
    if entry == (0, 8) and index_location == "end":
        entry = (len(shard) - 8, 8)  # overlaps the index at the end
    hostile = _with_entry(codec, shard, 1, *entry)
    a.store.set(key, hostile)
    b = cs.open_array(str(tmp_path / "sh.zarr"), mode="r+")
    with pytest.raises(ChunkDecodeError, match=rf"{key}.*inner chunk \(1,\)"):
        b[0] = 7  # a partial write reads the shard first: it must not rewrite it
    assert bytes(a.store.get(key)) == hostile
    with pytest.raises(ChunkDecodeError, match=rf"{key}.*inner chunk \(1,\)"):
        b[:]
    assert not verify(a.store).ok


# -- bombs in variable-length chunks: bounded by the variable-length cap ----------------------
VLEN_BOMBS = {
    "v3-string-zstd": (3, numcodecs.Zstd(1), lambda: zstd_bomb(_BIG)),
    "v3-bytes-gzip": (3, numcodecs.GZip(1), lambda: gzip_bomb(2 * _BIG)),
    "v2-object-zlib": (2, numcodecs.Zlib(1), lambda: gzip_bomb(2 * _BIG, 15)),
}


@pytest.mark.parametrize("name", sorted(VLEN_BOMBS))
def test_decompression_bomb_in_variable_length_chunk(tmp_path, name):
    fmt, compressor, build = VLEN_BOMBS[name]
    dtype = bytes if "bytes" in name else str
    path = str(tmp_path / "s.zarr")
    a = cs.create_array(path, shape=(8,), chunks=(4,), dtype=dtype, compressors=compressor,
                        zarr_format=fmt)
    a[:] = np.array(["abcd"] * 8 if dtype is str else [b"abcd"] * 8, dtype=object)
    key = a.chunk_key((0,))
    bomb = build()
    cap = variable_cap(len(bomb))
    report = run_child(path, lambda: a.store.set(key, bomb), key, 1,
                       "x" if dtype is str else b"x", 0, headroom=cap + AS_HEADROOM)
    for op, result in report.items():
        assert result["error"] and key in result["error"], (op, result)
        assert "MemoryError" not in result["error"], (op, result)
        assert result["growth"] < cap + LIMIT_EXTRA, (op, result["growth"] / MiB)
