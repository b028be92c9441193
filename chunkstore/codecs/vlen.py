"""The v3 ``vlen-utf8`` and ``vlen-bytes`` array->bytes codecs, through numcodecs.

The encoding (a little-endian uint32 item count, then per item a uint32 length and
the bytes) is numcodecs' ``VLenUTF8`` / ``VLenBytes``, the same bytes zarr-python
writes in v3 and, as the v2 object codec filter, in v2.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numcodecs
import numpy as np

from chunkstore.codecs.base import ArrayBytesCodec, ChunkSpec
from chunkstore.errors import ChunkDecodeError, CodecError

VLEN_IDS = frozenset({"vlen-utf8", "vlen-bytes", "vlen-array"})


def check_item_count(data: Any, n: int, name: str) -> None:
    """Check a variable-length chunk's header before numcodecs allocates its items.

    The layout is a little-endian uint32 item count, then per item a uint32 length
    and the item's bytes: the count must be the chunk's ``n`` elements, and the
    payload must be long enough to hold that many length headers.
    """
    view = memoryview(data).cast("B") if not isinstance(data, np.ndarray) else \
        memoryview(np.ascontiguousarray(data).reshape(-1).view(np.uint8))
    size = len(view)
    if size < 4:
        raise ChunkDecodeError(f"{name}: a chunk of {size} bytes has no item count")
    count = int.from_bytes(view[:4], "little")
    if count != n:
        raise ChunkDecodeError(f"{name}: chunk claims {count} items, expected {n}")
    if count > (size - 4) // 4:
        raise ChunkDecodeError(f"{name}: chunk claims {count} items, but its {size} bytes "
                               f"hold at most {(size - 4) // 4}")


class _VLenCodec(ArrayBytesCodec):
    """Common part: numcodecs does the encoding; we check types and shapes."""

    item_type: ClassVar[type]
    kinds: ClassVar[str]

    def __init__(self) -> None:
        self.codec = self._make()  # the numcodecs object (also the v2 object codec)

    @staticmethod
    def _make() -> Any:
        raise NotImplementedError

    def resolve(self, spec: ChunkSpec) -> _VLenCodec:
        if spec.dtype.kind not in self.kinds:
            raise CodecError(f"{self.name} codec: cannot encode data type {spec.dtype}")
        return self

    def bytes_spec(self, spec: ChunkSpec) -> ChunkSpec:
        """The output is a plain byte stream (blosc after it uses typesize 1)."""
        return ChunkSpec(spec.shape, np.dtype("u1"))

    def encode(self, chunk: np.ndarray) -> bytes:
        flat = np.ascontiguousarray(chunk).reshape(-1)
        if not flat.flags.writeable:  # numcodecs' VLenBytes wants a writable buffer
            flat = flat.copy()
        try:
            return bytes(self.codec.encode(flat))
        except (TypeError, ValueError) as e:
            raise CodecError(f"{self.name} codec: cannot encode the chunk's items as "
                             f"{self.item_type.__name__}: {e}") from e

    def decode(self, data: bytes | memoryview, spec: ChunkSpec) -> np.ndarray:
        n = math.prod(spec.shape)
        check_item_count(data, n, self.name)
        items = self.codec.decode(data)
        if items.size != n:
            raise ChunkDecodeError(f"{self.name}: chunk holds {items.size} items, expected {n} "
                                   f"for shape {spec.shape}")
        items = items.reshape(spec.shape)
        return items if spec.dtype.kind == "O" else items.astype(spec.dtype)

    @classmethod
    def from_json(cls, config: dict[str, Any], where: str) -> _VLenCodec:
        return cls()


class VLenUTF8Codec(_VLenCodec):
    """Variable-length UTF-8 strings (v3 ``string`` data type)."""

    name = "vlen-utf8"
    item_type = str
    kinds = "TO"

    @staticmethod
    def _make() -> Any:
        return numcodecs.VLenUTF8()


class VLenBytesCodec(_VLenCodec):
    """Variable-length bytes (v3 ``variable_length_bytes`` data type)."""

    name = "vlen-bytes"
    item_type = bytes
    kinds = "O"

    @staticmethod
    def _make() -> Any:
        return numcodecs.VLenBytes()


def vlen_codec_for(dtype: np.dtype) -> _VLenCodec | None:
    """The array->bytes codec zarr-python uses for a variable-length dtype (else None)."""
    kind = np.dtype(dtype).kind
    if kind == "T":
        return VLenUTF8Codec()
    if kind == "O":
        return VLenBytesCodec()
    return None
