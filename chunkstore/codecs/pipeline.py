"""Codec pipelines: turn one chunk into bytes and back, for v3 and v2 arrays."""

from __future__ import annotations

from typing import Any

import numcodecs
import numpy as np

from ..errors import ChunkDecodeError, CodecError
from .base import ArrayArrayCodec, ArrayBytesCodec, BytesBytesCodec, ChunkSpec, Codec
from .bytes_codec import BytesCodec
from .compressors import BloscCodec, blosc_copy_ok, blosc_decode_into, check_blosc_frame
from .numcodecs_adapter import numcodecs_from_config
from .registry import codec_from_json


class CodecPipeline:
    """A resolved v3 chain: array->array*, one array->bytes, bytes->bytes*."""

    zarr_format = 3

    def __init__(self, codecs: list[Codec], spec: ChunkSpec, where: str = "array") -> None:
        self.spec = spec
        self.array_array: list[tuple[ArrayArrayCodec, ChunkSpec]] = []
        self.array_bytes: ArrayBytesCodec | None = None
        self.bytes_bytes: list[BytesBytesCodec] = []
        current = spec
        for codec in codecs:
            codec = codec.resolve(current)
            if isinstance(codec, ArrayArrayCodec):
                if self.array_bytes is not None:
                    raise CodecError(f"{where}: field 'codecs': array->array codec "
                                     f"{codec.name!r} after the array->bytes codec")
                self.array_array.append((codec, current))
                current = codec.output_spec(current)
            elif isinstance(codec, ArrayBytesCodec):
                if self.array_bytes is not None:
                    raise CodecError(f"{where}: field 'codecs': more than one array->bytes codec")
                self.array_bytes = codec
                self._bytes_spec = current
                current = codec.bytes_spec(current)
            else:
                if self.array_bytes is None:
                    raise CodecError(f"{where}: field 'codecs': bytes->bytes codec "
                                     f"{codec.name!r} before the array->bytes codec")
                self.bytes_bytes.append(codec)
        if self.array_bytes is None:
            raise CodecError(f"{where}: field 'codecs' has no array->bytes codec (e.g. 'bytes')")
        self._direct = (
            not self.array_array
            and isinstance(self.array_bytes, BytesCodec)
            and len(self.bytes_bytes) == 1
            and (self.array_bytes.endian is None or self.array_bytes._stored_dtype(spec.dtype)
                 .isnative)
        )
        # the common chain bytes+blosc: decode straight into the output, no per-call dispatch
        self._blosc = (self.bytes_bytes[0]._codec
                       if self._direct and type(self.bytes_bytes[0]) is BloscCodec else None)
        self._blosc_copy = blosc_copy_ok(spec.dtype, spec.nbytes)

    @property
    def codecs(self) -> list[Codec]:
        return [c for c, _ in self.array_array] + [self.array_bytes] + list(self.bytes_bytes)

    def to_json(self) -> list[dict[str, Any]]:
        return [c.to_json() for c in self.codecs]

    @property
    def fixed_size(self) -> bool:
        """Encoded chunks are the raw bytes in C order (ranged partial reads possible)."""
        return (not self.array_array and not self.bytes_bytes
                and isinstance(self.array_bytes, BytesCodec))

    def encode(self, chunk: np.ndarray) -> bytes | memoryview:
        for codec, _spec in self.array_array:
            chunk = codec.encode(chunk)
        data = self.array_bytes.encode(chunk)
        for codec in self.bytes_bytes:
            data = codec.encode(data)
        return data

    def decode(self, data: Any, out: np.ndarray | None = None) -> np.ndarray:
        """Decode one stored chunk to an array of the chunk spec.

        ``out`` (C-contiguous, the chunk's shape and dtype) is filled directly when the
        chain allows (one compressor over raw native bytes), saving a copy.
        """
        if out is not None and self._direct:
            if self._blosc is not None:
                blosc_decode_into(self._blosc, data, out, self._blosc_copy)
            else:
                self.bytes_bytes[0].decode(data, out=memoryview(out.reshape(-1).view(np.uint8)))
            return out
        for codec in reversed(self.bytes_bytes):
            data = codec.decode(data)
        chunk = self.array_bytes.decode(data, self._bytes_spec)
        for codec, spec in reversed(self.array_array):
            chunk = codec.decode(chunk, spec)
        if chunk.shape != self.spec.shape:
            raise ChunkDecodeError(f"decoded chunk has shape {chunk.shape}, expected {self.spec.shape}")
        return chunk


class V2Pipeline:
    """v2: filters (numcodecs, in order) then an optional compressor; C or F layout."""

    zarr_format = 2
    fixed_size = False

    def __init__(self, filters: list[Any], compressor: Any, spec: ChunkSpec, order: str) -> None:
        self.filters, self.compressor, self.spec, self.order = filters, compressor, spec, order
        self._direct = not filters and compressor is not None and (order == "C" or len(spec.shape) < 2)
        self.fixed_size = not filters and compressor is None and order == "C"
        self._blosc = (compressor if self._direct and type(compressor) is numcodecs.Blosc
                       and not spec.dtype.hasobject else None)
        self._blosc_copy = blosc_copy_ok(spec.dtype, spec.nbytes)

    def encode(self, chunk: np.ndarray) -> bytes | memoryview:
        need = ["F" if self.order == "F" else "C"] + (["W"] if chunk.dtype.kind == "O" else [])
        data: Any = np.require(chunk, requirements=need)  # VLenBytes wants a writable buffer
        if self.order == "F":
            data = data.reshape(-1, order="F")
        for f in self.filters:
            data = f.encode(data)
        if self.compressor is not None:
            return self.compressor.encode(data)
        return memoryview(np.ascontiguousarray(data).reshape(-1).view(np.uint8))

    def decode(self, data: Any, out: np.ndarray | None = None) -> np.ndarray:
        if out is not None and self._blosc is not None:
            blosc_decode_into(self._blosc, data, out, self._blosc_copy)
            return out
        if self.compressor is not None and self.compressor.codec_id == "blosc":
            check_blosc_frame(data, self.spec.nbytes if self._direct else None)
        if out is not None and self._direct:
            self.compressor.decode(data, out=memoryview(out.reshape(-1).view(np.uint8)))
            return out
        if self.compressor is not None:
            data = self.compressor.decode(data)
        for f in reversed(self.filters):
            data = f.decode(data)
        if self.spec.dtype.kind in "OT":  # the object codec returned an object array
            return _object_chunk(data, self.spec, self.order)
        arr = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data
        if arr.dtype != self.spec.dtype:
            arr = arr.reshape(-1).view(np.uint8)
            if arr.nbytes != self.spec.nbytes:
                raise ChunkDecodeError(f"chunk has {arr.nbytes} bytes, expected {self.spec.nbytes}"
                                       f" for shape {self.spec.shape} {self.spec.dtype}")
            arr = arr.view(self.spec.dtype)
        if arr.size != int(np.prod(self.spec.shape)):
            raise ChunkDecodeError(f"chunk has {arr.size} items, expected shape {self.spec.shape}")
        return arr.reshape(self.spec.shape, order=self.order)


def _object_chunk(data: Any, spec: ChunkSpec, order: str) -> np.ndarray:
    arr = np.asarray(data)
    n = int(np.prod(spec.shape, dtype=np.int64))
    if arr.dtype.kind not in "OT" or arr.size != n:
        raise ChunkDecodeError(f"object codec returned {arr.size} items of {arr.dtype}, "
                               f"expected {n} objects for shape {spec.shape}")
    arr = arr.reshape(spec.shape, order=order)
    return arr if arr.dtype == spec.dtype else arr.astype(spec.dtype)


Pipeline = CodecPipeline | V2Pipeline


def build_pipeline(metadata: Any, where: str = "array", allow_unsafe: bool = False) -> Pipeline:
    """The codec pipeline of an array's metadata (v2 or v3)."""
    spec = ChunkSpec(tuple(metadata.chunk_shape), np.dtype(metadata.dtype))
    if metadata.zarr_format == 3:
        codecs = [codec_from_json(c, where, allow_unsafe) for c in metadata.codecs]
        return CodecPipeline(codecs, spec, where)
    filters = [numcodecs_from_config(f, f"{where}: field 'filters'", allow_unsafe)
               for f in (metadata.filters or ())]
    compressor = None
    if metadata.compressor is not None:
        compressor = numcodecs_from_config(metadata.compressor, f"{where}: field 'compressor'",
                                           allow_unsafe)
    return V2Pipeline(filters, compressor, spec, metadata.order)
