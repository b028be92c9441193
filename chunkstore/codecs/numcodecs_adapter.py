"""Any numcodecs codec, as v3 ``numcodecs.<id>`` codecs and as v2 filters/compressors.

numcodecs objects are created from their config through the numcodecs registry; the
object codecs that can run code or build arbitrary objects (pickle, msgpack, json,
vlen-array) are refused unless the caller explicitly allows them.
"""

from __future__ import annotations

import math
from typing import Any

import numcodecs
import numpy as np

from chunkstore.codecs.base import ArrayArrayCodec, ArrayBytesCodec, BytesBytesCodec, ChunkSpec
from chunkstore.codecs.bounded import bounded_decode
from chunkstore.codecs.bounded import encoded_bound as numcodecs_encoded_bound
from chunkstore.codecs.compressors import check_numcodecs_config
from chunkstore.codecs.filter_specs import filter_output_spec
from chunkstore.codecs.limits import compressed_bound
from chunkstore.errors import ChunkDecodeError, CodecError

UNSAFE_IDS = frozenset({"pickle", "msgpack2", "json2", "vlen-array"})
#: numcodecs ids that zarr-python 3 treats as array -> array
ARRAY_TO_ARRAY_IDS = frozenset({"delta", "fixedscaleoffset", "quantize", "bitround", "packbits",
                                "astype", "categorize"})
ARRAY_TO_BYTES_IDS = frozenset({"pcodec", "zfpy"})


def numcodecs_from_config(config: dict[str, Any], where: str, allow_unsafe: bool = False) -> Any:
    """A numcodecs codec from its ``{"id": ..., ...}`` config, with the safety check."""
    if not isinstance(config, dict):
        raise CodecError(f"{where}: codec config must be an object, got {config!r}")
    codec_id = config.get("id")
    if not isinstance(codec_id, str):
        raise CodecError(f"{where}: codec config without an 'id': {config!r}")
    if codec_id in UNSAFE_IDS and not allow_unsafe:
        raise CodecError(
            f"{where}: codec {codec_id!r} can execute code or build arbitrary objects and is "
            "refused; pass allow_unsafe_codecs=True only for data you trust"
        )
    try:
        check_numcodecs_config(config)
    except CodecError as e:
        raise CodecError(f"{where}: {e}") from None
    try:
        return numcodecs.get_codec(dict(config))
    except Exception as e:  # unknown id (ValueError) or bad parameters (TypeError, ...)
        raise CodecError(f"{where}: cannot build numcodecs codec {config!r}: {e}") from e


class _NumcodecsMixin:
    codec_id: str

    def __init__(self, codec: Any) -> None:
        self.codec = codec
        self.codec_id = codec.codec_id

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"numcodecs.{self.codec_id}"

    def configuration(self) -> dict[str, Any]:
        config = dict(self.codec.get_config())
        config.pop("id", None)
        return config


class NumcodecsBytesCodec(_NumcodecsMixin, BytesBytesCodec):
    """A numcodecs compressor or checksum used as a v3 bytes -> bytes codec."""

    def encode(self, data: Any) -> Any:
        # numcodecs codecs expect array-likes (pickle cannot pickle a memoryview), as
        # zarr-python hands them a uint8 ndarray
        if isinstance(data, memoryview | bytes | bytearray):
            data = np.frombuffer(data, dtype=np.uint8)
        return self.codec.encode(data)

    def decode(self, data: Any, out: memoryview | None = None, limit: int | None = None
               ) -> Any:
        return bounded_decode(self.codec, data, limit, out=out)

    def encoded_bound(self, nbytes: int) -> int | None:
        return numcodecs_encoded_bound(self.codec, nbytes)


class NumcodecsArrayCodec(_NumcodecsMixin, ArrayArrayCodec):
    """A numcodecs filter (delta, fixedscaleoffset...) used as an array -> array codec."""

    def output_spec(self, spec: ChunkSpec) -> ChunkSpec:
        known = filter_output_spec(self.codec, spec)
        if known is not None:
            return known
        probe = self.codec.encode(np.zeros((1,) * max(1, len(spec.shape)), dtype=spec.dtype))
        return ChunkSpec(spec.shape, np.asarray(probe).dtype)

    def encode(self, chunk: np.ndarray) -> np.ndarray:
        out = np.asarray(self.codec.encode(np.ascontiguousarray(chunk)))
        return out.reshape(chunk.shape) if out.size == chunk.size else out

    def decode(self, chunk: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        out = np.asarray(self.codec.decode(np.ascontiguousarray(chunk)))
        n = math.prod(spec.shape)
        if out.size != n:
            raise ChunkDecodeError(f"{self.name}: decoded {out.size} items, expected {n} for "
                                   f"shape {spec.shape}")
        return out.astype(spec.dtype, copy=False).reshape(spec.shape)


class NumcodecsArrayBytesCodec(_NumcodecsMixin, ArrayBytesCodec):
    """A numcodecs codec that serializes an array itself (pcodec, zfpy)."""

    def encode(self, chunk: np.ndarray) -> Any:
        return self.codec.encode(np.ascontiguousarray(chunk))

    def serialized_limit(self, spec: ChunkSpec) -> int:
        return compressed_bound(spec.nbytes)

    def decode(self, data: Any, spec: ChunkSpec) -> np.ndarray:
        out = np.asarray(self.codec.decode(data))
        if out.nbytes != spec.nbytes:
            raise ChunkDecodeError(f"{self.name}: decoded {out.nbytes} bytes, expected "
                                   f"{spec.nbytes} for shape {spec.shape} {spec.dtype}")
        return out.reshape(-1).view(spec.dtype).reshape(spec.shape)


def wrap_numcodecs(codec: Any) -> ArrayArrayCodec | ArrayBytesCodec | BytesBytesCodec:
    """The v3 codec kind for a numcodecs object, following zarr-python's classification."""
    if codec.codec_id in ARRAY_TO_ARRAY_IDS:
        return NumcodecsArrayCodec(codec)
    if codec.codec_id in ARRAY_TO_BYTES_IDS:
        return NumcodecsArrayBytesCodec(codec)
    return NumcodecsBytesCodec(codec)
