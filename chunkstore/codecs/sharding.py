"""The Zarr v3 ``sharding_indexed`` codec: many inner chunks in one stored object.

A shard (one chunk of the array's chunk grid) is cut into inner chunks of
``chunk_shape``; each inner chunk is encoded with the nested ``codecs`` and the
encoded chunks are concatenated. A shard index — an array of shape
``(*chunks_per_shard, 2)`` of uint64 ``(offset, nbytes)`` pairs, offsets counted from
the start of the shard object — is encoded with ``index_codecs`` (by default
little-endian bytes + crc32c) and placed at the ``start`` or ``end`` of the shard.
An inner chunk that is not stored has the entry ``(2^64-1, 2^64-1)``; a shard with no
inner chunk at all is not stored.

This module is pure: it encodes, decodes and parses bytes. The ranged IO that reads
only the index and the needed inner chunks lives in ``chunkstore.io.sharded``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from chunkstore.codecs.base import ArrayBytesCodec, ChunkSpec, Codec
from chunkstore.codecs.bounded import SHARD_UNUSED_BYTES, shard_bound
from chunkstore.codecs.bytes_codec import BytesCodec
from chunkstore.codecs.compressors import Crc32cCodec, whole_number
from chunkstore.codecs.fill import is_all_fill
from chunkstore.codecs.limits import memory_limit
from chunkstore.codecs.pipeline import CodecPipeline
from chunkstore.codecs.registry import codec_from_json, register_codec
from chunkstore.codecs.transpose import TransposeCodec
from chunkstore.errors import ChunkDecodeError, CodecError, OutOfMemoryError, UnsupportedError

EMPTY = np.uint64(2**64 - 1)
#: a shard index may always take this much, even when larger than the shard's data
MAX_INDEX_FLOOR_BYTES = 64 * 2**20
_MAX_END = 2**64 - 1  # no entry may end past this (the largest uint64)
_INDEX_DTYPE = np.dtype("uint64")
_LOCATIONS = ("start", "end")


def _to_codec(item: Any, where: str) -> Codec:
    if isinstance(item, Codec):
        return item
    if isinstance(item, str):
        item = {"name": item}
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        raise CodecError(f"{where}: invalid codec entry {item!r}")
    return codec_from_json({"name": item["name"], "configuration": item.get("configuration")
                            or {}}, where)


@register_codec
class ShardingCodec(ArrayBytesCodec):
    """``sharding_indexed``: inner chunks of ``chunk_shape``, each encoded with ``codecs``,
    plus an index encoded with ``index_codecs`` at ``index_location``.

    >>> import numpy as np
    >>> from chunkstore.codecs.base import ChunkSpec
    >>> codec = ShardingCodec((2, 2)).resolve(ChunkSpec((4, 4), np.dtype("i2")))
    >>> data = np.arange(16, dtype="i2").reshape(4, 4)
    >>> bool((codec.decode(codec.encode(data), codec.spec) == data).all())
    True
    """

    name = "sharding_indexed"

    def __init__(self, chunk_shape: Any, codecs: Any = None, index_codecs: Any = None,
                 index_location: str = "end", fill_value: Any = None) -> None:
        where = "codec 'sharding_indexed'"
        self.chunk_shape = chunk_shape_of(chunk_shape, where)
        if index_location not in _LOCATIONS:
            raise CodecError(f"{where}: index_location must be 'start' or 'end', got "
                             f"{index_location!r}")
        self.codecs = [_to_codec(c, f"{where}: field 'codecs'")
                       for c in (codecs if codecs is not None else [BytesCodec()])]
        self.index_codecs = [_to_codec(c, f"{where}: field 'index_codecs'")
                             for c in (index_codecs if index_codecs is not None
                                       else [BytesCodec("little"), Crc32cCodec()])]
        self.index_location = index_location
        #: value of missing inner chunks when decoding a whole shard (not part of the JSON)
        self.fill_value = fill_value
        # set by resolve():
        self.spec: ChunkSpec | None = None
        self.inner: CodecPipeline | None = None
        self.index: CodecPipeline | None = None
        self.chunks_per_shard: tuple[int, ...] = ()
        self.index_nbytes = 0

    # -- JSON ----------------------------------------------------------------------------
    def configuration(self) -> dict[str, Any]:
        codecs = self.inner.codecs if self.inner is not None else self.codecs
        index_codecs = self.index.codecs if self.index is not None else self.index_codecs
        return {"chunk_shape": list(self.chunk_shape),
                "codecs": [c.to_json() for c in codecs],
                "index_codecs": [c.to_json() for c in index_codecs],
                "index_location": self.index_location}

    @classmethod
    def from_json(cls, config: dict[str, Any], where: str) -> ShardingCodec:
        if "chunk_shape" not in config:
            raise CodecError(f"{where}: codec 'sharding_indexed' needs 'chunk_shape'")
        for field in ("codecs", "index_codecs"):
            if field in config and not isinstance(config[field], list):
                raise CodecError(f"{where}: codec 'sharding_indexed': {field!r} must be a list")
        return cls(config["chunk_shape"], config.get("codecs"), config.get("index_codecs"),
                   config.get("index_location", "end"))

    def __repr__(self) -> str:
        return (f"ShardingCodec(chunk_shape={self.chunk_shape}, codecs={self.codecs!r}, "
                f"index_location={self.index_location!r})")

    # -- resolution ----------------------------------------------------------------------
    def resolve(self, spec: ChunkSpec) -> ShardingCodec:
        where = "codec 'sharding_indexed'"
        if len(spec.shape) != len(self.chunk_shape):
            raise CodecError(f"{where}: chunk_shape {list(self.chunk_shape)} does not match the "
                             f"{len(spec.shape)}-d shard shape {list(spec.shape)}")
        if any(s % c for s, c in zip(spec.shape, self.chunk_shape, strict=True)):
            raise CodecError(f"{where}: the shard shape {list(spec.shape)} must be a multiple "
                             f"of the inner chunk shape {list(self.chunk_shape)}")
        fill = self.fill_value if self.fill_value is not None else spec.fill_value
        out = ShardingCodec(self.chunk_shape, self.codecs, self.index_codecs,
                            self.index_location, fill)
        out.spec = spec
        out.chunks_per_shard = tuple(s // c for s, c in
                                     zip(spec.shape, self.chunk_shape, strict=True))
        out.inner = CodecPipeline(self.codecs, ChunkSpec(self.chunk_shape, spec.dtype, fill),
                                  where, "codecs")
        out.index = CodecPipeline(self.index_codecs,
                                  ChunkSpec((*out.chunks_per_shard, 2), _INDEX_DTYPE),
                                  where, "index_codecs")
        idx = out.index
        if not (all(isinstance(c, TransposeCodec) for c, _ in idx.array_array)
                and isinstance(idx.array_bytes, BytesCodec)
                and all(isinstance(c, Crc32cCodec) for c in idx.bytes_bytes)):
            raise UnsupportedError(f"{where}: field 'index_codecs' must have a fixed encoded "
                                   f"size (bytes, transpose, crc32c), got {idx.to_json()}")
        # 16 bytes per inner chunk, 4 per crc32c: worked out, not encoded (a hostile
        # grid of 2**32 inner chunks would make a 64 GiB empty index to measure)
        n_inner = math.prod(out.chunks_per_shard)
        out.index_nbytes = 16 * n_inner + 4 * len(idx.bytes_bytes)
        shard_nbytes = math.prod(spec.shape) * spec.dtype.itemsize
        if out.index_nbytes > max(MAX_INDEX_FLOOR_BYTES, shard_nbytes):
            raise CodecError(
                f"{where}: shards of {list(spec.shape)} hold {n_inner} inner chunks of "
                f"{list(self.chunk_shape)}: their index would take {out.index_nbytes} "
                f"bytes, more than the shard's own {shard_nbytes} (and than "
                f"{MAX_INDEX_FLOOR_BYTES}); use larger inner chunks")
        return out

    def serialized_limit(self, spec: ChunkSpec) -> int | None:
        """The most bytes a shard may take: packed (its index and every inner chunk at
        its largest), plus as much again, at most ``SHARD_UNUSED_BYTES``, for the unused
        space the spec allows between inner chunks; None when the inner chunks have no
        bound. A shard read whole (nested in another, or with codecs around it) so never
        costs more than twice its packed size."""
        packed = shard_bound(self)
        return None if packed is None else packed + min(packed, SHARD_UNUSED_BYTES)

    def _check_resolved(self) -> None:
        if self.inner is None:
            raise CodecError("codec 'sharding_indexed' used before being resolved")

    # -- the index -------------------------------------------------------------------------
    @property
    def n_inner(self) -> int:
        """Number of inner chunks per shard."""
        return math.prod(self.chunks_per_shard)

    def check_index_fits(self, where: str = "shard") -> None:
        """Refuse (OutOfMemoryError) an index larger than this machine's memory before
        it is read or allocated: every read of a stored shard and every write needs it."""
        limit = memory_limit()
        if limit is not None and self.index_nbytes > limit:
            raise OutOfMemoryError(self._too_large(
                where, f"more than the {limit} bytes of memory this process can have"))

    def _too_large(self, where: str, why: str) -> str:
        return (f"{where}: the shard index of {self.n_inner} inner chunks needs "
                f"{self.index_nbytes} bytes, {why}; use larger inner chunks or smaller "
                "shards")

    def index_memory_error(self, where: str) -> OutOfMemoryError:
        """The error for a MemoryError met while reading or building the index."""
        return OutOfMemoryError(self._too_large(where, "which do not fit in memory"))

    def empty_index(self, where: str = "shard") -> np.ndarray:
        """An index with every inner chunk marked empty, shaped ``(*chunks_per_shard, 2)``."""
        self.check_index_fits(where)
        try:
            return np.full((*self.chunks_per_shard, 2), EMPTY, dtype=_INDEX_DTYPE)
        except MemoryError:
            raise self.index_memory_error(where) from None

    def empty_shard(self, where: str = "shard") -> bytes:
        """A shard of no inner chunks: just its encoded empty index."""
        index = self.empty_index(where)
        try:
            return bytes(self.index.encode(index))
        except MemoryError:
            raise self.index_memory_error(where) from None

    @property
    def index_range(self) -> tuple[int, int | None]:
        """The byte range of the index in a shard object (a suffix range at the end)."""
        if self.index_location == "start":
            return (0, self.index_nbytes)
        return (-self.index_nbytes, None)

    def decode_index(self, data: Any, where: str = "shard") -> np.ndarray:
        """The index as an ``(n_inner, 2)`` uint64 array (C order of inner chunks)."""
        self._check_resolved()
        if len(data) != self.index_nbytes:
            raise ChunkDecodeError(f"{where}: shard index has {len(data)} bytes, expected "
                                   f"{self.index_nbytes} (truncated shard?)")
        try:
            index = self.index.decode(data)
        except ChunkDecodeError:
            raise
        except MemoryError:
            raise self.index_memory_error(where) from None
        except Exception as e:
            raise ChunkDecodeError(f"{where}: cannot decode the shard index: {e}") from e
        index = np.asarray(index, dtype=_INDEX_DTYPE).reshape(-1, 2)
        lo = self.index_nbytes if self.index_location == "start" else 0
        self._check_entries(index, lo, _MAX_END, where)
        return index

    def _check_entries(self, index: np.ndarray, lo: int, hi: int, where: str,
                       size: int | None = None) -> None:
        """Every entry is empty (both fields 2^64-1) or lies within ``[lo, hi)``; the
        arithmetic stays in uint64 without wrapping (``offset + nbytes`` could)."""
        offset, nbytes = index[:, 0], index[:, 1]
        half = (offset == EMPTY) != (nbytes == EMPTY)
        lo64, hi64 = np.uint64(lo), np.uint64(hi)
        outside = (nbytes != EMPTY) & ((offset < lo64) | (offset > hi64)
                                       | (nbytes > hi64 - np.minimum(offset, hi64)))
        bad = np.flatnonzero(half | outside)
        if not bad.size:
            return
        i = int(bad[0])
        coords = tuple(int(c) for c in np.unravel_index(i, self.chunks_per_shard))
        entry = f"(offset {int(offset[i])}, nbytes {int(nbytes[i])})"
        if half[i]:
            raise ChunkDecodeError(f"{where}: inner chunk {coords}: half-empty index entry "
                                   f"{entry}")
        payload = f"bytes [{lo}, {hi})" if size is None else (
            f"payload (bytes [{lo}, {hi}) of the {size}-byte shard)")
        raise ChunkDecodeError(f"{where}: inner chunk {coords}: index entry {entry} lies "
                               f"outside the shard {payload}")

    def index_bytes_of(self, shard: Any, where: str = "shard") -> Any:
        """The encoded index inside a whole shard object."""
        if len(shard) < self.index_nbytes:
            raise ChunkDecodeError(f"{where}: shard has {len(shard)} bytes, fewer than its "
                                   f"{self.index_nbytes}-byte index (truncated shard?)")
        view = memoryview(shard)
        if self.index_location == "start":
            return view[:self.index_nbytes]
        return view[len(shard) - self.index_nbytes:]

    def parse(self, shard: Any, where: str = "shard") -> np.ndarray:
        """The decoded index of a whole shard object; every entry must be empty or lie
        inside the shard's payload (the bytes other than the index)."""
        index = self.decode_index(self.index_bytes_of(shard, where), where)
        self.check_payload(index, len(shard), where)
        return index

    def check_payload(self, index: np.ndarray, size: int, where: str = "shard") -> None:
        """Every entry of ``index`` is empty or inside the payload of a shard of ``size``
        bytes (the bytes other than the index); else ``ChunkDecodeError``."""
        lo, hi = ((self.index_nbytes, size) if self.index_location == "start"
                  else (0, size - self.index_nbytes))
        self._check_entries(index, lo, hi, where, size)

    @staticmethod
    def inner_bytes(shard: Any, index: np.ndarray, i: int) -> memoryview | None:
        """Encoded bytes of inner chunk ``i`` (C-order number) of a parsed shard."""
        offset, nbytes = index[i]
        if nbytes == EMPTY:
            return None
        return memoryview(shard)[int(offset):int(offset) + int(nbytes)]

    # -- whole shards --------------------------------------------------------------------------
    def build(self, parts: Mapping[int, Any], where: str = "shard"
              ) -> tuple[bytes, np.ndarray] | None:
        """A shard object from encoded inner chunks ``{C-order number: bytes}`` (stored
        in that order), with its decoded index; None when ``parts`` is empty."""
        self._check_resolved()
        if not parts:
            return None
        ids = sorted(parts)
        return self._assemble(ids, [parts[i] for i in ids], where)

    def build_list(self, blobs: Sequence[Any], where: str = "shard"
                   ) -> tuple[bytes, np.ndarray] | None:
        """``build`` from the encoded inner chunks of every C-order number in turn (None:
        not stored); None when there is none."""
        self._check_resolved()
        ids = [i for i, blob in enumerate(blobs) if blob is not None]
        if not ids:
            return None
        return self._assemble(ids, [blobs[i] for i in ids], where)

    def _assemble(self, ids: list[int], pieces: list[Any], where: str
                  ) -> tuple[bytes, np.ndarray]:
        """The shard of inner chunks ``ids`` (ascending) encoded as ``pieces``: the index
        is worked out in one pass, the payload joined in one copy."""
        index = self.empty_index(where).reshape(-1, 2)
        sizes = np.array([len(p) if type(p) is bytes else memoryview(p).nbytes
                          for p in pieces], _INDEX_DTYPE)
        ends = np.cumsum(sizes, dtype=_INDEX_DTYPE)
        ends += _INDEX_DTYPE.type(self.index_nbytes if self.index_location == "start" else 0)
        index[ids, 0] = ends - sizes
        index[ids, 1] = sizes
        try:
            encoded = bytes(self.index.encode(index.reshape(*self.chunks_per_shard, 2)))
            pieces = [encoded, *pieces] if self.index_location == "start" else [*pieces, encoded]
            return b"".join(pieces), index
        except MemoryError:
            raise self.index_memory_error(where) from None

    def inner_regions(self) -> list[tuple[slice, ...]]:
        """The region of each inner chunk in the shard, in C order."""
        return [tuple(slice(c * n, (c + 1) * n) for c, n in zip(coords, self.chunk_shape,
                                                                strict=True))
                for coords in np.ndindex(*self.chunks_per_shard)]

    def encode(self, chunk: np.ndarray) -> bytes:
        """Encode a whole shard; inner chunks equal to ``fill_value`` (when set) are left
        out, as the spec allows."""
        self._check_resolved()
        parts = {}
        for i, region in enumerate(self.inner_regions()):
            inner = np.ascontiguousarray(chunk[region])
            if self.fill_value is not None and is_all_fill(inner, self.fill_value):
                continue
            parts[i] = self.inner.encode(inner)
        built = self.build(parts)
        if built is None:  # an all-fill shard as a codec output: just the empty index
            return self.empty_shard()
        return built[0]

    def decode(self, data: Any, spec: ChunkSpec) -> np.ndarray:
        """Decode a whole shard; missing inner chunks read as ``fill_value`` (or 0)."""
        self._check_resolved()
        index = self.parse(data)
        fill = 0 if self.fill_value is None else self.fill_value
        out = np.full(spec.shape, fill, dtype=spec.dtype)
        for i, region in enumerate(self.inner_regions()):
            blob = self.inner_bytes(data, index, i)
            if blob is not None:
                out[region] = self.inner.decode(bytes(blob))
        return out


def sharding_of(codecs: Any) -> dict[str, Any] | None:
    """The configuration of the ``sharding_indexed`` codec when it is the whole of a v3
    ``codecs`` JSON list, or None. Only then is an array sharded in the sense of its
    chunk grid (``Array.shards``, inner chunks read one by one), as zarr-python says
    too; with codecs around it, each shard is encoded and decoded whole, as one chunk."""
    codecs = list(codecs or ())
    if len(codecs) == 1 and isinstance(codecs[0], dict) \
            and codecs[0].get("name") == ShardingCodec.name:
        return codecs[0].get("configuration") or {}
    return None


def chunk_shape_of(value: Any, where: str = "codec 'sharding_indexed'") -> tuple[int, ...]:
    """A sharding codec's ``chunk_shape``: a list of positive integers (no floats, no
    strings, no bools: NumPy-like truncation would change the grid silently)."""
    if isinstance(value, str | bytes) or not isinstance(value, list | tuple):
        raise CodecError(f"{where}: chunk_shape must be a list of positive integers, got "
                         f"{value!r}")
    return tuple(whole_number(c, f"{where}: chunk_shape {list(value)!r}: each entry", 1)
                 for c in value)


def inner_chunk_shape(metadata: Any) -> tuple[int, ...] | None:
    """The inner chunk shape of a sharded array's metadata, None when not sharded."""
    if metadata.zarr_format != 3:
        return None
    config = sharding_of(metadata.codecs)
    if config is None:
        return None
    return chunk_shape_of(config.get("chunk_shape", ()))
