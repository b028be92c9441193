"""The Zarr v2 codec pipeline: numcodecs filters, in order, then an optional compressor."""

from __future__ import annotations

import math
from typing import Any

import numcodecs
import numpy as np

from chunkstore.codecs.base import ChunkSpec
from chunkstore.codecs.bounded import bounded_decode, encoded_bound
from chunkstore.codecs.bytes_codec import raw_bytes
from chunkstore.codecs.compressors import blosc_copy_ok, blosc_decode_into, gzip_member
from chunkstore.codecs.filter_specs import filter_output_spec
from chunkstore.codecs.limits import over_cap, variable_cap
from chunkstore.codecs.vlen import VLEN_IDS, check_item_count
from chunkstore.errors import ChunkDecodeError
from chunkstore.runtime.scratch import contiguous


def _flat_bytes(arr: np.ndarray) -> memoryview:
    return memoryview(arr.reshape(-1).view(np.uint8))


_FRESH_OUTPUT = (numcodecs.Blosc, numcodecs.Zstd, numcodecs.GZip, numcodecs.Zlib,
                 numcodecs.LZ4, numcodecs.BZ2, numcodecs.LZMA)


class V2Pipeline:
    """v2: filters (numcodecs, in order) then an optional compressor; C or F layout.

    The compressor may produce exactly what the filters encode a chunk to (the chunk's
    bytes without filters; e.g. ``1 + ceil(n / 8)`` bytes after ``packbits``), or for
    variable-length chunks at most :func:`~chunkstore.codecs.limits.variable_cap`.
    """

    zarr_format = 2
    fixed_size = False

    def __init__(self, filters: list[Any], compressor: Any, spec: ChunkSpec, order: str) -> None:
        self.filters, self.compressor, self.spec, self.order = filters, compressor, spec, order
        self._direct = not filters and compressor is not None and (order == "C" or len(spec.shape) < 2)
        self.fixed_size = not filters and compressor is None and order == "C"
        self._blosc = (compressor if self._direct and type(compressor) is numcodecs.Blosc
                       and not spec.dtype.hasobject else None)
        self._blosc_copy = blosc_copy_ok(spec.dtype, spec.nbytes)
        #: ``decode(out=)`` also takes a strided ``out`` (tiny blosc chunks: one copy)
        self.strided_out = self._blosc is not None and self._blosc_copy
        # compressors whose output is always new bytes may read from a reused buffer
        self._stage = (self._direct and order == "C" and not spec.dtype.hasobject
                       and type(compressor) in _FRESH_OUTPUT)
        self._n = math.prod(spec.shape)
        self._filtered_nbytes = self._filtered_size()
        #: the most bytes a chunk's encoding can take: its bytes after the filters (when
        #: fixed), through the compressor's bound; None when unknown
        self.stored_bound: int | None = self._filtered_nbytes
        if self._filtered_nbytes is not None and compressor is not None:
            self.stored_bound = encoded_bound(compressor, self._filtered_nbytes)

    def _filtered_size(self) -> int | None:
        """The exact size of a chunk after the filters, None when it varies."""
        if self.spec.dtype.kind in "OT" and not self.filters:
            return None
        current: ChunkSpec | None = self.spec
        for f in self.filters:
            current = filter_output_spec(f, current)
            if current is None:
                return None
        return current.nbytes

    def encode(self, chunk: np.ndarray, strided_ok: bool = False
               ) -> bytes | memoryview | np.ndarray:
        """One chunk's stored bytes (``strided_ok``: as ``Pipeline.encode``)."""
        if self._stage and not chunk.flags.c_contiguous and chunk.dtype == self.spec.dtype:
            # the compressor's input is read once and not kept: a reused buffer
            return self._compress(_records_as_void(contiguous(chunk, chunk.dtype)))
        if (self.compressor is None and not self.filters and self.order != "F"
                and chunk.dtype.kind != "O"):
            return raw_bytes(chunk, strided_ok)  # no codec at all: one copy at most
        need = ["F" if self.order == "F" else "C"] + (["W"] if chunk.dtype.kind == "O" else [])
        data: Any = np.require(chunk, requirements=need)  # VLenBytes wants a writable buffer
        if self.order == "F":
            data = data.reshape(-1, order="F")
        for f in self.filters:
            data = f.encode(data)
        if self.compressor is not None:
            return self._compress(_records_as_void(data))
        return memoryview(np.ascontiguousarray(data).reshape(-1).view(np.uint8))

    def _compress(self, data: Any) -> Any:
        """The compressor's output; gzip's without a time in its header (the same bytes
        for the same chunk, as the v3 codec writes)."""
        if type(self.compressor) is numcodecs.GZip:
            return gzip_member(data, self.compressor.level)
        return self.compressor.encode(data)

    @property
    def filter_ids(self) -> list[str]:
        """The numcodecs ids of the filters, in order."""
        return [str(getattr(f, "codec_id", "")) for f in self.filters]

    def _decompress(self, data: Any, out: np.ndarray | None) -> Any:
        """The compressor's output, bounded by what the filters may have produced."""
        if out is not None and self._direct:
            return bounded_decode(self.compressor, data, out=_flat_bytes(out))
        if self._filtered_nbytes is not None:
            return bounded_decode(self.compressor, data,
                                  out=np.empty(self._filtered_nbytes, np.uint8))
        try:
            return bounded_decode(self.compressor, data, variable_cap(memoryview(data).nbytes))
        except ChunkDecodeError as e:
            raise over_cap(e) from e

    def decode(self, data: Any, out: np.ndarray | None = None) -> np.ndarray:
        """Decode one stored chunk (into ``out`` when the chain allows)."""
        if out is not None and self._blosc is not None:
            blosc_decode_into(self._blosc, data, out, self._blosc_copy)
            return out
        if self.compressor is not None:
            data = self._decompress(data, out)
            if out is not None and self._direct:
                return out
        for f in reversed(self.filters):
            if f.codec_id in VLEN_IDS:
                check_item_count(data, self._n, f.codec_id)
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
        if arr.size != self._n:
            raise ChunkDecodeError(f"chunk has {arr.size} items, expected shape {self.spec.shape}")
        return arr.reshape(self.spec.shape, order=self.order)


def _object_chunk(data: Any, spec: ChunkSpec, order: str) -> np.ndarray:
    arr = np.asarray(data)
    n = math.prod(spec.shape)
    if arr.dtype.kind not in "OT" or arr.size != n:
        raise ChunkDecodeError(f"object codec returned {arr.size} items of {arr.dtype}, "
                               f"expected {n} objects for shape {spec.shape}")
    arr = arr.reshape(spec.shape, order=order)
    return arr if arr.dtype == spec.dtype else arr.astype(spec.dtype)


def _records_as_void(data: Any) -> Any:
    """Records as opaque items of their size: numcodecs reads arrays through the buffer
    protocol, which has no format for a datetime field (the bytes, and the item size
    blosc shuffles by, are the same)."""
    if isinstance(data, np.ndarray) and data.dtype.fields is not None:
        return data.view(np.dtype((np.void, data.dtype.itemsize)))
    return data
