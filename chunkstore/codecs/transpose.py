"""The v3 ``transpose`` codec: permute a chunk's axes before serialization."""

from __future__ import annotations

from typing import Any

import numpy as np

from chunkstore.codecs.base import ArrayArrayCodec, ChunkSpec
from chunkstore.errors import CodecError


class TransposeCodec(ArrayArrayCodec):
    name = "transpose"

    def __init__(self, order: list[int] | tuple[int, ...]) -> None:
        if isinstance(order, str):
            raise CodecError(f"transpose codec: order must be a permutation list, got {order!r}")
        self.order = tuple(int(i) for i in order)
        if sorted(self.order) != list(range(len(self.order))):
            raise CodecError(f"transpose codec: order {list(self.order)} is not a permutation")
        self._inverse = tuple(int(i) for i in np.argsort(self.order))

    def configuration(self) -> dict[str, Any]:
        return {"order": list(self.order)}

    def resolve(self, spec: ChunkSpec) -> TransposeCodec:
        if len(self.order) != len(spec.shape):
            raise CodecError(
                f"transpose codec: order {list(self.order)} does not match a "
                f"{len(spec.shape)}-d chunk"
            )
        return self

    def output_spec(self, spec: ChunkSpec) -> ChunkSpec:
        return ChunkSpec(tuple(spec.shape[i] for i in self.order), spec.dtype)

    def encode(self, chunk: np.ndarray) -> np.ndarray:
        return chunk.transpose(self.order)

    def decode(self, chunk: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        return chunk.transpose(self._inverse)

    @classmethod
    def from_json(cls, config: dict[str, Any], where: str) -> TransposeCodec:
        if "order" not in config:
            raise CodecError(f"{where}: transpose codec needs 'order'")
        return cls(config["order"])
