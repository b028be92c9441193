"""The v3 ``bytes`` codec: an array's raw bytes in a given byte order."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from chunkstore.codecs.base import ArrayBytesCodec, ChunkSpec
from chunkstore.errors import ChunkDecodeError, CodecError

NATIVE = sys.byteorder
#: a strided block whose rows (its last axis) are contiguous and at least this long may
#: be handed as it is to a store that writes arrays (``Capabilities.writes_arrays``): the store
#: writes its rows straight from the source, saving the copy into new bytes
MIN_ROW_BYTES = 1024
_ROW_KINDS = frozenset("biufc")  # dtypes whose rows export a plain buffer


def raw_bytes(array: np.ndarray, strided_ok: bool = False) -> bytes | memoryview | np.ndarray:
    """The C-ordered bytes of ``array``: a view when it is C-contiguous already, else one
    copy made as ``bytes`` (which stores keep as they are, without copying it again).
    With ``strided_ok``, a strided block of long contiguous rows is returned as it is."""
    if array.flags.c_contiguous:
        return memoryview(array.reshape(-1).view(np.uint8))
    if strided_ok and has_long_rows(array):
        return array
    return array.tobytes()


def has_long_rows(array: np.ndarray) -> bool:
    """Whether ``array``'s rows (its last axis) are contiguous, of a plain numeric type
    and at least ``MIN_ROW_BYTES`` long: worth writing one by one."""
    return (array.strides[-1:] == (array.dtype.itemsize,)
            and long_rows(array.shape, array.dtype))


def long_rows(shape: tuple[int, ...], dtype: np.dtype) -> bool:
    """Whether blocks of ``shape`` and ``dtype`` have rows ``has_long_rows`` takes (when
    their last axis is contiguous)."""
    return (len(shape) >= 2 and dtype.kind in _ROW_KINDS
            and shape[-1] * dtype.itemsize >= MIN_ROW_BYTES)


def _has_byte_order(dtype: np.dtype) -> bool:
    """Whether ``endian`` means something for ``dtype``, as zarr-python decides it: not for
    1-byte types, bytes and raw bytes, nor for a record whose fields are all one byte."""
    if dtype.kind == "V":
        if dtype.names is None:
            return False
        return any(dtype.fields[n][0].itemsize > 1 for n in dtype.names)
    return dtype.itemsize > 1 and dtype.kind not in "bS"


class BytesCodec(ArrayBytesCodec):
    """Serialize a chunk in C order; ``endian`` is required for multi-byte types."""

    name = "bytes"
    fixed_size = True

    def __init__(self, endian: str | None = "little") -> None:
        if endian not in ("little", "big", None):
            raise CodecError(f"bytes codec: endian must be 'little' or 'big', got {endian!r}")
        self.endian = endian

    def configuration(self) -> dict[str, Any]:
        return {} if self.endian is None else {"endian": self.endian}

    def to_json(self) -> dict[str, Any]:
        # zarr-python writes a bare {"name": "bytes"} for 1-byte types; so do we
        return {"name": self.name, **({"configuration": self.configuration()} if self.endian
                                      else {})}

    def resolve(self, spec: ChunkSpec) -> BytesCodec:
        if spec.dtype.kind in "OT":
            raise CodecError(f"bytes codec: cannot serialize variable-length {spec.dtype} "
                             "(use vlen-utf8 / vlen-bytes)")
        if not _has_byte_order(spec.dtype):
            return BytesCodec(None)  # absent for 1-byte types, as the spec writes it
        return BytesCodec(self.endian or "little")

    def serialized_limit(self, spec: ChunkSpec) -> int:
        """Exactly the chunk's bytes."""
        return spec.nbytes

    def _stored_dtype(self, dtype: np.dtype) -> np.dtype:
        if self.endian is None or dtype.itemsize == 1:
            return dtype
        return dtype.newbyteorder("<" if self.endian == "little" else ">")

    def encode(self, chunk: np.ndarray, strided_ok: bool = False
               ) -> bytes | memoryview | np.ndarray:
        """The chunk's bytes in the stored byte order (``strided_ok``: see ``raw_bytes``)."""
        stored = self._stored_dtype(chunk.dtype)
        if stored != chunk.dtype:
            chunk = chunk.astype(stored)
        return raw_bytes(chunk, strided_ok)

    def decode(self, data: bytes | memoryview, spec: ChunkSpec) -> np.ndarray:
        stored = self._stored_dtype(spec.dtype)
        expected = spec.nbytes
        if len(data) != expected:
            raise ChunkDecodeError(
                f"chunk has {len(data)} bytes, expected {expected} for shape {spec.shape} "
                f"{spec.dtype}"
            )
        arr = np.frombuffer(data, dtype=stored).reshape(spec.shape)
        if stored != spec.dtype:
            arr = arr.astype(spec.dtype)
        return arr

    @classmethod
    def from_json(cls, config: dict[str, Any], where: str) -> BytesCodec:
        unknown = sorted(set(config) - {"endian"})
        if unknown:  # as the other codecs: a key we do not know may change the bytes
            raise CodecError(f"{where}: codec 'bytes': unknown configuration key(s) "
                             f"{unknown} in {config}")
        return cls(config.get("endian"))
