"""Reading one zip entry with bounded memory.

An entry's header declares its decompressed size, and a hostile archive may lie about
it or declare something huge (a few hundred KB of deflated zeros can declare and
decompress to 512 MiB). Here an entry is read only if its declared size is within a
limit, decompressed in steps that never produce more than the declared size (plus one
byte, to detect the lie), and checked against its CRC: it costs at most its declared
size, and a larger actual size is refused, not allocated. Stored (uncompressed)
entries must lie within the archive file. Encrypted entries are refused.
"""

from __future__ import annotations

import bz2
import lzma
import struct
import zipfile
import zlib
from collections.abc import Callable
from typing import Any

from chunkstore.storage.errors import BadArchiveError

#: compressed bytes read per step
_STEP = 256 * 1024


class _Inflate:
    """zlib's raw deflate, with the ``needs_input`` interface of bz2/lzma."""

    def __init__(self) -> None:
        self._d = zlib.decompressobj(-15)
        self.needs_input = True

    @property
    def eof(self) -> bool:
        return self._d.eof

    def decompress(self, data: bytes, max_length: int) -> bytes:
        out = self._d.decompress(self._d.unconsumed_tail + data, max_length)
        self.needs_input = not self._d.unconsumed_tail
        return out


class _ZipLzma:
    """LZMA as zip stores it: a 4-byte header and the properties, then raw LZMA1."""

    def __init__(self) -> None:
        self._d: Any = None
        self._head = b""
        self.needs_input, self.eof = True, False

    def decompress(self, data: bytes, max_length: int) -> bytes:
        if self._d is None:
            self._head += data
            if len(self._head) < 4:
                return b""
            (size,) = struct.unpack("<H", self._head[2:4])
            if len(self._head) < 4 + size:
                return b""
            filters = [lzma._decode_filter_properties(  # type: ignore[attr-defined]
                lzma.FILTER_LZMA1, self._head[4:4 + size])]
            self._d = lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=filters)
            data, self._head = self._head[4 + size:], b""
        out = self._d.decompress(data, max_length)
        self.needs_input, self.eof = self._d.needs_input, self._d.eof
        return out


_DECOMPRESSORS = {zipfile.ZIP_DEFLATED: _Inflate, zipfile.ZIP_BZIP2: bz2.BZ2Decompressor,
                  zipfile.ZIP_LZMA: _ZipLzma}


Pread = Callable[[int, int], bytes]  # (count, offset) -> at most count bytes at offset


def read_entry(pread: Pread, archive_size: int, info: zipfile.ZipInfo, data_offset: int,
               limit: int, where: str) -> bytes:
    """The decompressed bytes of the entry ``info`` whose data starts at ``data_offset``
    of the archive read by ``pread(count, offset)``; ``limit`` bounds its declared size
    (compressed entries) and ``where`` names archive and entry in errors."""
    if info.flag_bits & 0x1:
        raise BadArchiveError(f"{where}: the entry is encrypted")
    if data_offset + info.compress_size > archive_size:
        raise BadArchiveError(f"{where}: the entry's {info.compress_size} bytes run past the "
                              f"end of the archive ({archive_size} bytes): truncated?")
    if info.compress_type == zipfile.ZIP_STORED:
        if info.compress_size != info.file_size:
            raise BadArchiveError(f"{where}: a stored entry declares {info.file_size} bytes "
                                  f"but holds {info.compress_size}")
        data = pread(info.file_size, data_offset)
    else:
        make = _DECOMPRESSORS.get(info.compress_type)
        if make is None:
            raise BadArchiveError(f"{where}: unsupported compression method "
                                  f"{info.compress_type}")
        if info.file_size > limit:
            raise BadArchiveError(
                f"{where}: the entry declares {info.file_size} bytes once decompressed, "
                f"more than the limit of {limit} (ZipStore(max_entry_bytes=...))")
        data = _inflate(pread, info, data_offset, make(), where)
    if len(data) != info.file_size or zlib.crc32(data) != info.CRC:
        raise BadArchiveError(f"{where}: the entry is corrupt (size or CRC-32 differs from "
                              "its header)")
    return data


def _inflate(pread: Pread, info: zipfile.ZipInfo, offset: int, decompressor: Any,
             where: str) -> bytes:
    out = bytearray()
    left = info.compress_size
    data = b""
    while True:
        if decompressor.needs_input and not data:
            if left <= 0:
                break
            data = pread(min(_STEP, left), offset)
            offset += len(data)
            left -= len(data)
            if not data:
                break
        room = info.file_size - len(out) + 1  # one byte more reveals a lie
        out += decompressor.decompress(data, room)
        data = b""
        if len(out) > info.file_size:
            raise BadArchiveError(f"{where}: the entry decompresses to more than the "
                                  f"{info.file_size} bytes its header declares")
        if decompressor.eof:
            break
    return bytes(out)
