"""The three codec kinds of Zarr v3 behind one small base.

* ``ArrayArrayCodec``: ndarray -> ndarray (transpose, delta, ...)
* ``ArrayBytesCodec``: ndarray -> bytes, exactly one per chain (bytes, sharding)
* ``BytesBytesCodec``: bytes -> bytes (compressors, checksums)

Each codec knows its v3 JSON form (``to_json`` / ``from_json``) and is *resolved*
against the spec of the chunk it will see (shape and dtype), which lets e.g. blosc
pick its typesize and transpose check its permutation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np


@dataclass(frozen=True)
class ChunkSpec:
    """What a codec sees: the shape and dtype of one (decoded) chunk, and the fill value
    as it reaches the codec (after the array->array codecs before it; None: unknown).
    A codec that stores only part of its input (sharding leaves out inner chunks of
    nothing but fill) needs it; it takes no part in comparisons."""

    shape: tuple[int, ...]
    dtype: np.dtype
    fill_value: Any = field(default=None, compare=False, repr=False)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


class Codec:
    """Common base: a v3 name and a JSON configuration."""

    name: ClassVar[str]

    def configuration(self) -> dict[str, Any]:
        return {}

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "configuration": self.configuration()}

    @classmethod
    def from_json(cls, config: dict[str, Any], where: str) -> Codec:
        return cls(**config)

    def resolve(self, spec: ChunkSpec) -> Codec:
        """A copy of this codec with parameters derived from the chunk spec filled in."""
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.configuration().items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.to_json() == self.to_json()

    def __hash__(self) -> int:
        return hash(repr(self))


class ArrayArrayCodec(Codec):
    def output_spec(self, spec: ChunkSpec) -> ChunkSpec:
        return spec

    def output_fill(self, spec: ChunkSpec) -> Any:
        """The fill value of this codec's output for an input of ``spec`` (by default
        the input's own, as zarr-python carries it through codecs that do not say)."""
        return spec.fill_value

    def fill_round_trip_error(self, spec: ChunkSpec) -> str | None:
        """Why the fill value of ``spec`` would not come back through this codec as it
        went in (a lossy codec: ``cast_value``), None when it does."""
        return None

    def encode(self, chunk: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def decode(self, chunk: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        """Inverse of encode; ``spec`` is this codec's *input* spec."""
        raise NotImplementedError


class ArrayBytesCodec(Codec):
    #: encoded size is a pure function of the spec (enables ranged partial reads)
    fixed_size: ClassVar[bool] = False

    def bytes_spec(self, spec: ChunkSpec) -> ChunkSpec:
        """The spec the following bytes->bytes codecs resolve against (e.g. blosc typesize)."""
        return spec

    def serialized_limit(self, spec: ChunkSpec) -> int | None:
        """The most bytes a chunk of ``spec`` serializes to — exactly that many when
        ``fixed_size`` — or None when it depends on the items (variable-length data)."""
        return None

    def encode(self, chunk: np.ndarray) -> bytes | memoryview:
        raise NotImplementedError

    def decode(self, data: bytes | memoryview, spec: ChunkSpec) -> np.ndarray:
        raise NotImplementedError


class BytesBytesCodec(Codec):
    #: ``encode`` always returns new bytes, never a view of its input (compressors):
    #: the input may then be a reused buffer
    fresh_output = False

    def encode(self, data: bytes | memoryview) -> bytes | memoryview:
        raise NotImplementedError

    def decode(self, data: bytes | memoryview, out: memoryview | None = None,
               limit: int | None = None) -> bytes | memoryview:
        """Decode ``data``; write into ``out`` when given (the output must fill it
        exactly), returning it. ``limit``: the most bytes the output may have; a payload
        that would decode to more is refused (ChunkDecodeError) before it is decoded."""
        raise NotImplementedError

    def encoded_bound(self, nbytes: int) -> int | None:
        """The most bytes ``nbytes`` of input encode to; None when unknown."""
        return None
