"""Codec pipelines: turn one chunk into bytes and back, for v3 and v2 arrays."""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from chunkstore.codecs.base import (
    ArrayArrayCodec,
    ArrayBytesCodec,
    BytesBytesCodec,
    ChunkSpec,
    Codec,
)
from chunkstore.codecs.bounded import size_error
from chunkstore.codecs.bytes_codec import BytesCodec
from chunkstore.codecs.compressors import (
    BloscCodec,
    blosc_copy_ok,
    blosc_decode_into,
    blosc_decode_many,
)
from chunkstore.codecs.limits import over_cap, variable_cap
from chunkstore.codecs.numcodecs_adapter import numcodecs_from_config
from chunkstore.codecs.registry import codec_from_json
from chunkstore.codecs.v2_pipeline import V2Pipeline
from chunkstore.errors import ChunkDecodeError, CodecError
from chunkstore.runtime.scratch import contiguous

_BLOSC_MAX_BYTES = 2**31 - 1  # numcodecs' max_buffer_size for blosc


class CodecPipeline:
    """A resolved v3 chain: array->array*, one array->bytes, bytes->bytes*.

    Decoding gives each bytes->bytes stage the most it may produce before it runs: the
    stage next to the array->bytes codec exactly the serialized chunk (its bytes, for
    fixed-size types), each stage in front of it what its inner neighbour's encoder can
    output for that (``encoded_bound``), and stages of variable-length chunks
    :func:`~chunkstore.codecs.limits.variable_cap` of the stored size.
    """

    zarr_format = 3

    def __init__(self, codecs: list[Codec], spec: ChunkSpec, where: str = "array",
                 field: str = "codecs") -> None:
        self.spec = spec
        self.array_array: list[tuple[ArrayArrayCodec, ChunkSpec]] = []
        self.array_bytes: ArrayBytesCodec | None = None
        self.bytes_bytes: list[BytesBytesCodec] = []
        current = spec
        for codec in codecs:
            try:
                codec = codec.resolve(current)
            except CodecError as e:  # named by where it is (the document, the field)
                raise CodecError(f"{where}: field {field!r}: {e}") from None
            if isinstance(codec, ArrayArrayCodec):
                if self.array_bytes is not None:
                    raise CodecError(f"{where}: field {field!r}: array->array codec "
                                     f"{codec.name!r} after the array->bytes codec")
                self.array_array.append((codec, current))
                after = codec.output_spec(current)
                try:  # the fill value goes through the codec as the elements do
                    fill = None if current.fill_value is None else codec.output_fill(current)
                except CodecError as e:
                    raise CodecError(f"{where}: field {field!r}: {e}") from None
                if after.dtype != current.dtype and \
                        type(codec).output_fill is ArrayArrayCodec.output_fill:
                    fill = None  # a type change of unknown effect (numcodecs' astype...)
                current = dataclasses.replace(after, fill_value=fill)
            elif isinstance(codec, ArrayBytesCodec):
                if self.array_bytes is not None:
                    raise CodecError(f"{where}: field {field!r}: more than one array->bytes codec")
                self.array_bytes = codec
                self._bytes_spec = current
                current = codec.bytes_spec(current)
            else:
                if self.array_bytes is None:
                    raise CodecError(f"{where}: field {field!r}: bytes->bytes codec "
                                     f"{codec.name!r} before the array->bytes codec")
                self.bytes_bytes.append(codec)
        if self.array_bytes is None:
            raise CodecError(f"{where}: field {field!r} has no array->bytes codec (e.g. 'bytes')")
        #: a chunk is serialized into a reused buffer (the compressor after the bytes
        #: codec returns new bytes), not into a new array per chunk
        self._stage = bool(isinstance(self.array_bytes, BytesCodec) and self.bytes_bytes
                           and self.bytes_bytes[0].fresh_output
                           and self._bytes_spec.dtype.kind != "O")
        # raw native bytes after the bytes->bytes codecs: the last one decodes into `out`
        self._into_out = (
            not self.array_array
            and isinstance(self.array_bytes, BytesCodec)
            and bool(self.bytes_bytes)
            and (self.array_bytes.endian is None or self.array_bytes._stored_dtype(spec.dtype)
                 .isnative)
        )
        # the common chain bytes+blosc: decode straight into the output, no per-call dispatch
        self._blosc = (self.bytes_bytes[0]._codec if self._into_out and len(self.bytes_bytes) == 1
                       and type(self.bytes_bytes[0]) is BloscCodec else None)
        self._blosc_copy = blosc_copy_ok(spec.dtype, spec.nbytes)
        #: ``decode(out=)`` also takes a strided ``out`` (tiny blosc chunks: one copy)
        self.strided_out = self._blosc is not None and self._blosc_copy
        # and encode a chunk of the stored dtype straight through blosc
        self._stored = self.array_bytes._stored_dtype(self._bytes_spec.dtype) \
            if isinstance(self.array_bytes, BytesCodec) else None
        self._blosc_encode = (self.bytes_bytes[0] if self._blosc is not None
                              and self._stored == spec.dtype and spec.dtype.kind != "O"
                              and spec.nbytes < _BLOSC_MAX_BYTES else None)
        self._blosc_bytes_view = spec.dtype.kind not in "biufc"
        serialized = self.array_bytes.serialized_limit(self._bytes_spec)
        self._exact = serialized if self.array_bytes.fixed_size else None
        self._limits: list[int | None] = []
        self._decoders = [_bounded_decoder(c) for c in self.bytes_bytes]
        for codec in self.bytes_bytes:
            self._limits.append(serialized)
            serialized = None if serialized is None else codec.encoded_bound(serialized)
        #: the most bytes a chunk's encoding can take (the array->bytes codec's
        #: ``serialized_limit``, exact for ``bytes``, through each bytes->bytes codec's
        #: ``encoded_bound``); None when unknown (variable-length items, a codec without a
        #: bound, sharding: see ``codecs.bounded.shard_bound``)
        self.stored_bound: int | None = serialized

    @property
    def codecs(self) -> list[Codec]:
        return [c for c, _ in self.array_array] + [self.array_bytes] + list(self.bytes_bytes)

    @property
    def filter_ids(self) -> list[str]:
        """The numcodecs ids of the array -> array codecs that are numcodecs filters."""
        return [str(getattr(c, "codec_id", "")) for c, _ in self.array_array]

    def to_json(self) -> list[dict[str, Any]]:
        return [c.to_json() for c in self.codecs]

    @property
    def fixed_size(self) -> bool:
        """Encoded chunks are the raw bytes in C order (ranged partial reads possible)."""
        return (not self.array_array and not self.bytes_bytes
                and isinstance(self.array_bytes, BytesCodec))

    def encode(self, chunk: np.ndarray, strided_ok: bool = False
               ) -> bytes | memoryview | np.ndarray:
        """One chunk's stored bytes. ``strided_ok``: without any codec but ``bytes``, a
        strided chunk may come back as an array (for stores that write arrays, see
        ``bytes_codec.raw_bytes``)."""
        if strided_ok and self.fixed_size:
            return self.array_bytes.encode(chunk, strided_ok=True)
        if self._blosc_encode is not None and chunk.dtype == self._stored:
            chunk = contiguous(chunk, self._stored)
            if self._blosc_bytes_view:  # e.g. datetime64: no buffer format of its own
                chunk = chunk.reshape(-1).view(np.uint8)
            return self._blosc_encode.compress_array(chunk)
        for codec, _spec in self.array_array:
            chunk = codec.encode(chunk)
        if self._stage:
            # the compressor's input is read once and not kept: a reused buffer
            chunk = contiguous(chunk, self.array_bytes._stored_dtype(chunk.dtype))
        data = self.array_bytes.encode(chunk)
        for codec in self.bytes_bytes:
            data = codec.encode(data)
        return data

    def encode_many(self, chunks: np.ndarray) -> list[Any] | None:
        """``encode`` of each chunk of a C-contiguous stack ``(n, *chunk shape)`` in one
        loop when the chain is bytes + blosc over the stored dtype; else None (encode
        them one by one)."""
        if (self._blosc_encode is None or chunks.dtype != self._stored
                or self._blosc_bytes_view or not chunks.flags.c_contiguous):
            return None
        return self._blosc_encode.compress_many(chunks)

    def decode_many(self, blobs: Sequence[Any]) -> np.ndarray | None:
        """The stored chunks ``blobs`` decoded into one stack ``(n, *chunk shape)`` (read
        only) when the chain is bytes + blosc over small chunks of a plain dtype and
        every frame is sound; else None (decode them one by one, for the error)."""
        if self._blosc is None or not self._blosc_copy:
            return None
        joined = blosc_decode_many(blobs, self.spec.nbytes)
        if joined is None:
            return None
        return np.frombuffer(joined, self.spec.dtype).reshape(len(blobs), *self.spec.shape)

    def decode(self, data: Any, out: np.ndarray | None = None) -> np.ndarray:
        """Decode one stored chunk to an array of the chunk spec.

        ``out`` (C-contiguous, the chunk's shape and dtype) is filled directly when the
        chain allows (compressors over raw native bytes), saving a copy.
        """
        if out is not None and self._blosc is not None:
            blosc_decode_into(self._blosc, data, out, self._blosc_copy)
            return out
        if self.bytes_bytes:
            data = self._decode_bytes(data, out if self._into_out else None)
            if out is not None and data is out:
                return out
        chunk = self.array_bytes.decode(data, self._bytes_spec)
        for codec, spec in reversed(self.array_array):
            chunk = codec.decode(chunk, spec)
        if chunk.shape != self.spec.shape:
            raise ChunkDecodeError(f"decoded chunk has shape {chunk.shape}, expected {self.spec.shape}")
        return chunk

    def _decode_bytes(self, data: Any, out: np.ndarray | None) -> Any:
        """Run the bytes->bytes codecs backwards, each within its limit; the last one
        into ``out`` (returned) or a buffer of the exact size when the size is fixed."""
        cap, stored = None, data
        for i in range(len(self.bytes_bytes) - 1, -1, -1):
            decode, limit = self._decoders[i], self._limits[i]
            if i == 0 and self._exact is not None:
                target = out if out is not None else np.empty(self._exact, np.uint8)
                self.bytes_bytes[0].decode(data, out=memoryview(target.reshape(-1).view(np.uint8)))
                return target
            if limit is not None:
                data = decode(data, limit)
                continue
            if cap is None:
                cap = variable_cap(memoryview(stored).nbytes)
            try:
                data = decode(data, cap)
            except ChunkDecodeError as e:
                raise over_cap(e) from e
        return data


@functools.lru_cache(maxsize=256)
def _takes_limit(kind: type) -> bool:
    """Whether the ``decode`` of codecs of class ``kind`` takes a ``limit`` (looked up
    once per class: building a pipeline is part of every array's first read)."""
    return "limit" in inspect.signature(kind.decode).parameters


def _bounded_decoder(codec: BytesBytesCodec) -> Callable[[Any, int], Any]:
    """``decode(data, limit)`` for a bytes->bytes codec; a registered codec whose decode
    takes no ``limit`` has its output checked after decoding."""
    if _takes_limit(type(codec)):
        return lambda data, limit: codec.decode(data, limit=limit)

    def checked(data: Any, limit: int) -> Any:
        result = codec.decode(data)
        if memoryview(result).nbytes > limit:
            raise size_error(codec.name, memoryview(result).nbytes, limit, False)
        return result
    return checked


Pipeline = CodecPipeline | V2Pipeline


def build_pipeline(metadata: Any, where: str = "array", allow_unsafe: bool = False) -> Pipeline:
    """The codec pipeline of an array's metadata (v2 or v3)."""
    spec = ChunkSpec(tuple(metadata.chunk_shape), np.dtype(metadata.dtype))
    if metadata.zarr_format == 3:
        spec = ChunkSpec(spec.shape, spec.dtype, metadata.fill_value)
        codecs = [codec_from_json(c, where, allow_unsafe) for c in metadata.codecs]
        return CodecPipeline(codecs, spec, where)
    filters = [numcodecs_from_config(f, f"{where}: field 'filters'", allow_unsafe)
               for f in (metadata.filters or ())]
    compressor = None
    if metadata.compressor is not None:
        compressor = numcodecs_from_config(metadata.compressor, f"{where}: field 'compressor'",
                                           allow_unsafe)
    return V2Pipeline(filters, compressor, spec, metadata.order)
