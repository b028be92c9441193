"""The named values of codec parameters, as zarr-python's ``zarr.codecs`` spells them
(``BloscShuffle.bitshuffle``, ``BloscCname.zstd``, ``Endian.little``,
``ShardingCodecIndexLocation.end``). Each member is the string itself (a ``StrEnum``),
so it goes wherever the string goes: ``BloscCodec(cname=BloscCname.zstd)`` is
``BloscCodec(cname="zstd")`` and its JSON document holds ``"zstd"``.

>>> BloscShuffle.bitshuffle == "bitshuffle", BloscShuffle.from_int(1)
(True, 'shuffle')
"""

from __future__ import annotations

from enum import StrEnum


class _Named(StrEnum):
    """A member shows as its string (in a codec's repr, in a metadata dict)."""

    def __repr__(self) -> str:
        return repr(self.value)


class BloscShuffle(_Named):
    """Blosc's shuffle filter: none, byte shuffle or bit shuffle."""

    noshuffle = "noshuffle"
    shuffle = "shuffle"
    bitshuffle = "bitshuffle"

    @staticmethod
    def from_int(num: int) -> str:
        """The name of numcodecs' shuffle number (0, 1 or 2); ValueError for others."""
        names = {0: "noshuffle", 1: "shuffle", 2: "bitshuffle"}
        if isinstance(num, bool) or num not in names:
            raise ValueError(f"Value must be between 0 and 2. Got {num}.")
        return names[num]


class BloscCname(_Named):
    """Blosc's inner compressors."""

    lz4 = "lz4"
    lz4hc = "lz4hc"
    blosclz = "blosclz"
    snappy = "snappy"
    zstd = "zstd"
    zlib = "zlib"


class Endian(_Named):
    """The byte order of the ``bytes`` codec."""

    little = "little"
    big = "big"


class ShardingCodecIndexLocation(_Named):
    """Where a shard keeps its index."""

    start = "start"
    end = "end"
