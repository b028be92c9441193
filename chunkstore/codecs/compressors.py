"""The v3 spec's bytes->bytes codecs (blosc, gzip, zstd, crc32c), via numcodecs (gzip encodes
through the standard library: a header without a time)."""

from __future__ import annotations

import gzip
import mmap
import struct
from collections.abc import Sequence
from typing import Any

import numcodecs
import numcodecs.blosc
import numpy as np
from numcodecs.compat import ensure_contiguous_ndarray

from chunkstore.codecs.base import BytesBytesCodec, ChunkSpec
from chunkstore.codecs.bounded import bounded_decode, check_blosc_frame, size_error
from chunkstore.codecs.limits import compressed_bound
from chunkstore.errors import CodecError

_SHUFFLE_NAMES = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}
_SHUFFLE_IDS = {v: k for k, v in _SHUFFLE_NAMES.items()}
_BLOSC_CNAMES = {"lz4", "lz4hc", "blosclz", "zstd", "snappy", "zlib"}
_BLOSC_SIZES = struct.Struct("<I4xI")  # header bytes 4..16: nbytes, (blocksize), cbytes
_COPY_MAX_BYTES = 32 * 1024  # below this a memcpy beats numcodecs' destination checks
_WHOLE_BUFFERS = (bytes, mmap.mmap)  # len() is the size in bytes
_AUTOSHUFFLE = -1  # numcodecs' choice by item size; a v3 document names "shuffle"
_BLOSC_MAX_BLOCKSIZE = 2**31 - 1  # blosc takes an int
ZSTD_LEVELS = range(-131072, 23)  # zstd's own bounds (ZSTD_minCLevel .. ZSTD_maxCLevel)


def whole_number(value: Any, what: str, low: int, high: int | None = None) -> int:
    """``value`` when it is an integer (not a bool, not a float) in ``[low, high]``;
    else ``CodecError`` naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low or (
            high is not None and value > high):
        bounds = f">= {low}" if high is None else f"in {low}..{high}"
        raise CodecError(f"{what} must be an integer {bounds}, got {value!r}")
    return int(value)


def check_numcodecs_config(config: dict[str, Any]) -> None:
    """The parameters of a v2 (numcodecs) blosc or zstd config, checked as for v3: out of
    range, numcodecs builds the codec and fails at the first chunk with a raw error."""
    codec_id = config.get("id")
    if codec_id == "blosc":
        shuffle = config.get("shuffle", 1)
        whole_number(shuffle, "blosc codec: shuffle", _AUTOSHUFFLE, 2)
        BloscCodec(config.get("cname", "lz4"), config.get("clevel", 5),
                   "shuffle" if shuffle == _AUTOSHUFFLE else int(shuffle),
                   config.get("typesize"), config.get("blocksize", 0))
    elif codec_id == "zstd":
        ZstdCodec(config.get("level", 0))


class BloscCodec(BytesBytesCodec):
    """Blosc; ``typesize`` is taken from the chunk's dtype when not given."""

    name = "blosc"
    fresh_output = True

    def __init__(self, cname: str = "lz4", clevel: int = 5, shuffle: str | int = "shuffle",
                 typesize: int | None = None, blocksize: int = 0) -> None:
        if isinstance(shuffle, int) and not isinstance(shuffle, bool):
            shuffle = "shuffle" if shuffle == _AUTOSHUFFLE else _SHUFFLE_IDS.get(shuffle, shuffle)
        if cname not in _BLOSC_CNAMES:
            raise CodecError(f"blosc codec: unknown cname {cname!r}")
        if not isinstance(shuffle, str) or shuffle not in _SHUFFLE_NAMES:
            raise CodecError(f"blosc codec: shuffle must be one of {sorted(_SHUFFLE_NAMES)}, "
                             f"got {shuffle!r}")
        clevel = whole_number(clevel, "blosc codec: clevel", 0, 9)
        if typesize is not None:
            typesize = whole_number(typesize, "blosc codec: typesize", 1)
        blocksize = whole_number(blocksize, "blosc codec: blocksize", 0, _BLOSC_MAX_BLOCKSIZE)
        self.cname, self.clevel, self.shuffle = cname, clevel, shuffle
        self.typesize, self.blocksize = typesize, blocksize
        self._cname_bytes = cname.encode()
        self._codec = numcodecs.Blosc(cname=cname, clevel=clevel, shuffle=_SHUFFLE_NAMES[shuffle],
                                      blocksize=self.blocksize, typesize=typesize)

    def configuration(self) -> dict[str, Any]:
        config: dict[str, Any] = {"cname": self.cname, "clevel": self.clevel,
                                  "shuffle": self.shuffle, "blocksize": self.blocksize}
        if self.typesize is not None:
            config["typesize"] = self.typesize
        return config

    def resolve(self, spec: ChunkSpec) -> BloscCodec:
        if self.typesize is None:
            return BloscCodec(self.cname, self.clevel, self.shuffle, spec.dtype.itemsize,
                              self.blocksize)
        return self

    def encode(self, data: Any) -> bytes:
        return self._codec.encode(data)

    def compress_array(self, chunk: np.ndarray) -> bytes:
        """``encode`` of a C-contiguous array of the stored dtype below blosc's 2 GiB
        limit, without numcodecs' normalisation of the input (a tenth of a tiny chunk's
        encoding time); the same bytes."""
        return numcodecs.blosc.compress(chunk, self._cname_bytes, self.clevel,
                                        _SHUFFLE_NAMES[self.shuffle], self.blocksize,
                                        self.typesize)

    def compress_many(self, chunks: Sequence[np.ndarray]) -> list[bytes]:
        """``compress_array`` of each chunk, in one loop (tiny inner chunks of a shard:
        the per-call work is what costs)."""
        compress, cname, clevel = numcodecs.blosc.compress, self._cname_bytes, self.clevel
        shuffle, blocksize, typesize = _SHUFFLE_NAMES[self.shuffle], self.blocksize, self.typesize
        return [compress(c, cname, clevel, shuffle, blocksize, typesize) for c in chunks]

    def decode(self, data: Any, out: memoryview | None = None, limit: int | None = None
               ) -> Any:
        if limit is None and out is None:
            check_blosc_frame(data)
        return bounded_decode(self._codec, data, limit, out=out)

    def encoded_bound(self, nbytes: int) -> int:
        return compressed_bound(nbytes)


def blosc_decode_into(codec: Any, data: Any, out: np.ndarray, copy: bool = False) -> None:
    """Decode a blosc frame straight into ``out`` (native, writable; C-contiguous unless
    ``copy``: then it may be a chunk's place in a larger array).

    The per-chunk fast path: the same header checks as ``check_blosc_frame``, then
    numcodecs' ``blosc.decompress``. ``copy=True`` (tiny chunks of plain dtypes, see
    ``blosc_copy_ok``) decompresses to new bytes and copies them in, which is cheaper
    than numcodecs normalising the destination. Buffers other than ``bytes``, memory maps
    and contiguous byte views go through ``codec.decode`` (a ``numcodecs.Blosc``).
    """
    # bytes, maps and byte views (obstore's downloaded bodies): len() is the size in bytes
    whole = type(data) in _WHOLE_BUFFERS or (
        type(data) is memoryview and data.format == "B" and data.c_contiguous)
    if whole and len(data) >= 16:
        nbytes, cbytes = _BLOSC_SIZES.unpack_from(data, 4)
        if cbytes == len(data) and nbytes == out.nbytes:
            if not copy:
                numcodecs.blosc.decompress(data, out.reshape(-1).view(np.uint8))
            elif out.flags.c_contiguous:
                memoryview(out).cast("B")[:] = numcodecs.blosc.decompress(data)
            else:  # a chunk's place in a larger output: one copy, no scratch buffer
                out[...] = np.frombuffer(numcodecs.blosc.decompress(data),
                                         out.dtype).reshape(out.shape)
            return
    check_blosc_frame(data, out.nbytes)
    if not out.flags.c_contiguous:
        out[...] = np.frombuffer(codec.decode(data), out.dtype).reshape(out.shape)
        return
    codec.decode(data, out=memoryview(out.reshape(-1).view(np.uint8)))


def blosc_decode_many(blobs: Sequence[Any], nbytes: int) -> bytes | None:
    """The blosc frames ``blobs``, each declaring ``nbytes`` decoded bytes, decoded and
    concatenated; None when one of them is not ``bytes``, its header does not match its
    size (as ``blosc_decode_into`` checks: nothing larger than ``nbytes`` is allocated),
    or it does not decode: the caller then decodes them one by one, for the error."""
    unpack = _BLOSC_SIZES.unpack_from
    for blob in blobs:
        if type(blob) is not bytes or len(blob) < 16 or unpack(blob, 4) != (nbytes, len(blob)):
            return None
    decompress = numcodecs.blosc.decompress
    try:
        return b"".join([decompress(blob) for blob in blobs])
    except Exception:  # a corrupt frame: named by the one-by-one decode
        return None


def blosc_copy_ok(dtype: np.dtype, nbytes: int) -> bool:
    """Whether ``blosc_decode_into(..., copy=True)`` suits chunks of ``dtype`` and size."""
    if dtype.fields is not None:  # records: no object or time fields anywhere inside
        return nbytes <= _COPY_MAX_BYTES and all(
            blosc_copy_ok(field[0].base, 0) for field in dtype.fields.values())
    return nbytes <= _COPY_MAX_BYTES and not dtype.hasobject and dtype.kind not in "Mm"


def _byte_view(data: Any) -> memoryview:
    """The bytes of a buffer (an array of any shape and dtype) as one flat view."""
    return memoryview(ensure_contiguous_ndarray(data)).cast("B")


def gzip_member(data: Any, level: int) -> bytes:
    """``data`` (any buffer) as one gzip member whose header has no time (numcodecs'
    GZip writes the current second): a chunk always encodes to the same bytes."""
    return gzip.compress(_byte_view(data), compresslevel=level, mtime=0)


class GzipCodec(BytesBytesCodec):
    name = "gzip"
    fresh_output = True

    def __init__(self, level: int = 5) -> None:
        if not isinstance(level, int) or not 0 <= level <= 9:
            raise CodecError(f"gzip codec: level must be 0..9, got {level!r}")
        self.level = level
        self._codec = numcodecs.GZip(level)

    def configuration(self) -> dict[str, Any]:
        return {"level": self.level}

    def encode(self, data: Any) -> bytes:
        return gzip_member(data, self.level)

    def decode(self, data: Any, out: memoryview | None = None, limit: int | None = None
               ) -> Any:
        return bounded_decode(self._codec, data, limit, out=out)

    def encoded_bound(self, nbytes: int) -> int:
        return compressed_bound(nbytes)


class ZstdCodec(BytesBytesCodec):
    name = "zstd"
    fresh_output = True

    def __init__(self, level: int = 0, checksum: bool = False) -> None:
        level = whole_number(level, "zstd codec: level", ZSTD_LEVELS.start, ZSTD_LEVELS.stop - 1)
        self.level, self.checksum = level, bool(checksum)
        self._codec = numcodecs.Zstd(level=level, checksum=self.checksum)

    def configuration(self) -> dict[str, Any]:
        return {"level": self.level, "checksum": self.checksum}

    def encode(self, data: Any) -> bytes:
        return self._codec.encode(data)

    def decode(self, data: Any, out: memoryview | None = None, limit: int | None = None
               ) -> Any:
        return bounded_decode(self._codec, data, limit, out=out)

    def encoded_bound(self, nbytes: int) -> int:
        return compressed_bound(nbytes)


class Crc32cCodec(BytesBytesCodec):
    """Appends a little-endian CRC32C; decode verifies it (numcodecs.CRC32C)."""

    name = "crc32c"

    def __init__(self) -> None:
        self._codec = numcodecs.CRC32C()

    def encode(self, data: Any) -> bytes:
        return self._codec.encode(data)

    def decode(self, data: Any, out: memoryview | None = None, limit: int | None = None
               ) -> Any:
        size = memoryview(data).nbytes - 4  # the output is the input less the checksum
        if limit is not None and size > limit:
            raise size_error("crc32c", size, limit, False)
        try:
            return bounded_decode(self._codec, data, limit, out=out)
        except RuntimeError as e:  # numcodecs raises RuntimeError on a checksum mismatch
            raise CodecError(f"crc32c checksum mismatch: {e}") from e

    def encoded_bound(self, nbytes: int) -> int:
        return nbytes + 4

    @classmethod
    def from_json(cls, config: dict[str, Any], where: str) -> Crc32cCodec:
        return cls()
