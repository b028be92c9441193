"""Decode with numcodecs compressors, never producing more than a limit.

``bounded_decode(codec, data, limit)`` decodes like ``codec.decode(data)`` but refuses
a payload that would decode to more than ``limit`` bytes *before* allocating it:

* zstd, blosc and lz4 state the decoded size in their headers: it is read and checked
  first (zstd: :mod:`.zstd_frame`; blosc: its 16-byte header; numcodecs' lz4: its
  4-byte size prefix), then the codec decodes into a buffer of that size;
* gzip, zlib, bz2 and lzma are decompressed incrementally with a ``max_length``, a
  step at a time, and stopped as soon as the output passes the limit;
* any other codec (checksums, shuffle, third-party codecs) decodes first and its
  output size is checked after — checksums and shuffle never grow their input.

With ``exact=True`` the output must be exactly ``limit`` bytes; ``out`` (``limit``
bytes, writable) receives it when given.
"""

from __future__ import annotations

import bz2
import lzma
import zlib
from collections.abc import Callable
from typing import Any

import numcodecs.blosc
import numcodecs.lz4
import numcodecs.zstd
import numpy as np

from chunkstore.codecs.limits import compressed_bound
from chunkstore.codecs.zstd_frame import decoded_size
from chunkstore.errors import ChunkDecodeError, CodecError

_STEP = 1 << 20  # output per incremental call: bounds the transient copy
_LZMA_MEMLIMIT_EXTRA = 128 << 20  # decoder memory beyond the output (dictionary)
_CHECKSUM_BYTES = {"crc32": 4, "crc32c": 4, "adler32": 4, "fletcher32": 4}
_COMPRESSORS = frozenset({"blosc", "zstd", "gzip", "zlib", "bz2", "lzma", "lz4"})


def _nbytes(buf: Any) -> int:
    return buf.nbytes if isinstance(buf, np.ndarray) else memoryview(buf).nbytes


def _as_bytes_array(buf: Any) -> np.ndarray:
    """A writable flat uint8 view of ``out``."""
    return np.asarray(memoryview(buf).cast("B") if not isinstance(buf, np.ndarray) else buf
                      ).reshape(-1).view(np.uint8)


def size_error(name: str, got: int, limit: int, exact: bool, *, at_least: bool = False
               ) -> ChunkDecodeError:
    """The error for a payload that decodes to ``got`` bytes against a ``limit``."""
    what = f"{'at least ' if at_least else ''}{got}"
    if exact:
        return ChunkDecodeError(f"{name}: the payload decodes to {what} bytes, expected "
                                f"{limit}")
    return ChunkDecodeError(f"{name}: the payload decodes to {what} bytes, more than the "
                            f"{limit} this chunk may hold")


def encoded_bound(codec: Any, nbytes: int) -> int | None:
    """The most ``codec`` (numcodecs) encodes ``nbytes`` into; None when unknown."""
    cid = getattr(codec, "codec_id", None)
    if cid in _COMPRESSORS:
        return compressed_bound(nbytes)
    if cid in _CHECKSUM_BYTES:
        return nbytes + _CHECKSUM_BYTES[cid]
    if cid == "jenkins_lookup3":
        return nbytes + 4 + len(getattr(codec, "prefix", None) or b"")
    if cid == "shuffle":
        return nbytes
    if cid == "base64":
        return 4 * ((nbytes + 2) // 3)
    return None


class _Sink:
    """Collects decoded pieces, into ``out`` (or a buffer of ``limit`` bytes when the
    size is exact) or a growing bytearray, refusing to pass ``limit``."""

    def __init__(self, name: str, limit: int, exact: bool, out: Any) -> None:
        self.name, self.limit, self.exact, self.total = name, limit, exact, 0
        self.buf = _as_bytes_array(out) if out is not None else (
            np.empty(limit, np.uint8) if exact else None)
        self.parts = bytearray()

    def want(self) -> int:
        """How much to ask the decompressor for: one more byte than may still come
        (so that an overflow shows), at most a step."""
        return min(_STEP, self.limit - self.total + 1)

    def write(self, piece: bytes) -> None:
        n = len(piece)
        if self.total + n > self.limit:
            raise size_error(self.name, self.total + n, self.limit, self.exact, at_least=True)
        if self.buf is not None:
            self.buf[self.total:self.total + n] = np.frombuffer(piece, np.uint8)
        else:
            self.parts += piece
        self.total += n

    def result(self) -> Any:
        if self.exact and self.total != self.limit:
            raise size_error(self.name, self.total, self.limit, True)
        return self.buf if self.buf is not None else self.parts


def _inflate(sink: _Sink, data: Any, wbits: int, members: bool) -> None:
    """zlib (wbits 15) or gzip (31; ``members``: several members, zero padding)."""
    d, pending = zlib.decompressobj(wbits), data
    while True:
        want = sink.want()
        piece = d.decompress(pending, want)
        sink.write(piece)
        pending = d.unconsumed_tail
        if d.eof:
            rest = d.unused_data.lstrip(b"\0") if members else b""
            if not rest:
                return
            d, pending = zlib.decompressobj(wbits), rest
        elif not pending and len(piece) < want:  # input used up, no output pending
            raise ChunkDecodeError(f"{sink.name}: truncated stream")


def _streams(sink: _Sink, data: Any, make: Callable[[], Any]) -> None:
    """bz2 / lzma: one or more streams; trailing bytes that do not start a valid stream
    after a complete one are ignored, as ``bz2.decompress`` / ``lzma.decompress`` do."""
    d, pending, complete = make(), data, 0
    while True:
        try:
            piece = d.decompress(pending, sink.want())
        except (OSError, EOFError, lzma.LZMAError) as e:
            if complete:
                return
            raise ChunkDecodeError(f"{sink.name}: {e}") from e
        sink.write(piece)
        pending = b""
        if d.eof:
            complete += 1
            if not d.unused_data:
                return
            d, pending = make(), d.unused_data
        elif d.needs_input:
            raise ChunkDecodeError(f"{sink.name}: truncated stream")


def _lzma_maker(codec: Any, limit: int) -> Callable[[], Any]:
    fmt, filters = codec.format, codec.filters
    memlimit = limit + _LZMA_MEMLIMIT_EXTRA
    if fmt == lzma.FORMAT_RAW:  # no memlimit for raw streams: check the dictionary
        for f in filters or ():
            if int(f.get("dict_size", 0)) > memlimit:
                raise ChunkDecodeError(f"lzma: a dictionary of {f['dict_size']} bytes is "
                                       f"more than this chunk's decoder may use")
        return lambda: lzma.LZMADecompressor(format=fmt, filters=filters)
    return lambda: lzma.LZMADecompressor(format=fmt, memlimit=memlimit, filters=filters)


def _dest(out: Any, nbytes: int) -> np.ndarray:
    return _as_bytes_array(out) if out is not None else np.empty(nbytes, np.uint8)


def _zstd(codec: Any, data: Any, limit: int, exact: bool, out: Any) -> Any:
    size = decoded_size(data, limit)
    if size.exact and (size.nbytes > limit or (exact and size.nbytes != limit)):
        raise size_error("zstd", size.nbytes, limit, exact)
    if exact:  # unknown sizes stream into `dest`, which numcodecs checks is filled
        return numcodecs.zstd.decompress(data, _dest(out, limit))
    if size.nbytes > limit:
        raise size_error("zstd", size.nbytes, limit, exact, at_least=True)
    return numcodecs.zstd.decompress(data)


def check_blosc_frame(data: Any, expected_nbytes: int | None = None) -> int:
    """Blosc has no checksum and trusts its header: check the header against the buffer
    (so that a truncated chunk is an error rather than garbage); returns the decoded
    size it declares."""
    size = memoryview(data).nbytes
    if size < 16:
        raise CodecError(f"blosc: a chunk of {size} bytes is shorter than a blosc header")
    # blosc1 header: version, versionlz, flags, typesize, then uint32 LE nbytes,
    # blocksize, cbytes
    header = bytes(memoryview(data).cast("B")[:16])
    nbytes, blocksize, cbytes = (int.from_bytes(header[i:i + 4], "little") for i in (4, 8, 12))
    if cbytes != size:
        raise CodecError(f"blosc: the header says {cbytes} compressed bytes, the chunk "
                         f"has {size}")
    if blocksize > max(nbytes, 1) or (nbytes and not blocksize):
        raise CodecError(f"blosc: the header's block size {blocksize} does not fit its "
                         f"{nbytes} decoded bytes")
    if expected_nbytes is not None and nbytes != expected_nbytes:
        raise CodecError(f"blosc: the header says {nbytes} decoded bytes, expected "
                         f"{expected_nbytes}")
    return nbytes


def _blosc(codec: Any, data: Any, limit: int, exact: bool, out: Any) -> Any:
    nbytes = check_blosc_frame(data)
    if nbytes > limit or (exact and nbytes != limit):
        raise size_error("blosc", nbytes, limit, exact)
    return numcodecs.blosc.decompress(data, _dest(out, nbytes))


def _lz4(codec: Any, data: Any, limit: int, exact: bool, out: Any) -> Any:
    view = memoryview(data).cast("B")
    if len(view) < 4:
        raise ChunkDecodeError(f"lz4: a payload of {len(view)} bytes has no size prefix")
    nbytes = int.from_bytes(view[:4], "little")
    if nbytes > limit or (exact and nbytes != limit):
        raise size_error("lz4", nbytes, limit, exact)
    return numcodecs.lz4.decompress(data, _dest(out, nbytes))


def _incremental(codec: Any, data: Any, limit: int, exact: bool, out: Any) -> Any:
    cid = codec.codec_id
    sink = _Sink(cid, limit, exact, out)
    try:
        if cid in ("gzip", "zlib"):
            _inflate(sink, data, 31 if cid == "gzip" else 15, cid == "gzip")
        elif cid == "bz2":
            _streams(sink, data, bz2.BZ2Decompressor)
        else:
            _streams(sink, data, _lzma_maker(codec, limit))
    except zlib.error as e:
        raise ChunkDecodeError(f"{cid}: {e}") from e
    return sink.result()


_BOUNDED = {"zstd": _zstd, "blosc": _blosc, "lz4": _lz4, "gzip": _incremental,
            "zlib": _incremental, "bz2": _incremental, "lzma": _incremental}


def bounded_decode(codec: Any, data: Any, limit: int | None = None, exact: bool = False,
                   out: Any = None) -> Any:
    """``codec.decode(data)`` (a numcodecs codec) producing at most ``limit`` bytes
    (exactly, when ``exact`` or ``out`` is given); no limit when ``limit`` is None and
    ``out`` is not given. Returns the decoded buffer (``out`` itself when given)."""
    if out is not None:
        limit, exact = _nbytes(out), True
    if limit is None:
        return codec.decode(data)
    if isinstance(data, np.ndarray):
        data = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    decode = _BOUNDED.get(getattr(codec, "codec_id", None))
    if decode is not None:
        try:
            result = decode(codec, data, limit, exact, out)
        except (RuntimeError, ValueError) as e:  # numcodecs' errors on corrupt input
            if isinstance(e, ChunkDecodeError | CodecError):
                raise
            raise ChunkDecodeError(f"{codec.codec_id}: {e}") from e
    else:
        result = codec.decode(data)
        got = _nbytes(result)
        if got > limit or (exact and got != limit):
            raise size_error(getattr(codec, "codec_id", type(codec).__name__), got, limit,
                             exact)
        if out is not None:
            _as_bytes_array(out)[:] = np.frombuffer(memoryview(result).cast("B"), np.uint8)
    return out if out is not None else result


def shard_bound(codec: Any) -> int | None:
    """The most bytes a shard of the resolved sharding codec ``codec`` can take: its
    index and every inner chunk at its largest (None when the inner chunks have no
    bound)."""
    inner = codec.inner.stored_bound if codec.inner is not None else None
    if inner is None:
        return None
    return codec.index_nbytes + codec.n_inner * inner


#: unused space a shard may hold beyond its packed size: the sharding spec allows space
#: between inner chunks, which writers that append updated inner chunks leave behind
SHARD_UNUSED_BYTES = 16 * 2**20


def shard_read_bound(codec: Any) -> int | None:
    """The most bytes a partial shard write reads whole (its read-modify-write): the
    packed shard twice (every inner chunk with one earlier copy) plus
    :data:`SHARD_UNUSED_BYTES`; None when the inner chunks have no bound. The rewrite
    packs the shard again. A larger object (e.g. a sparse file of gigabytes) is refused
    before it is read."""
    packed = shard_bound(codec)
    return None if packed is None else 2 * packed + SHARD_UNUSED_BYTES
