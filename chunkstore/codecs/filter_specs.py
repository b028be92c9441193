"""The chunk a numcodecs filter encodes to: its shape and data type, from the config.

A filter may change the data type (``delta``, ``fixedscaleoffset``, ``quantize``,
``categorize`` to ``astype``; ``astype`` to ``encode_dtype``) or the size (``packbits``
packs n booleans into ``1 + ceil(n / 8)`` bytes, a padding count then the bits). The
v3 pipeline resolves the following codecs against this spec, and both pipelines take
the exact size of a decoded chunk from it — as zarr-python does for v3 (``packbits``
gives a 1-d ``uint8`` chunk, the others keep the shape).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from chunkstore.codecs.base import ChunkSpec

_TO_ASTYPE = frozenset({"delta", "fixedscaleoffset", "quantize", "categorize"})
_SAME = frozenset({"bitround"})


def filter_output_spec(codec: Any, spec: ChunkSpec) -> ChunkSpec | None:
    """The spec of what the numcodecs filter ``codec`` encodes a chunk of ``spec`` to;
    None for filters whose output size is not known in advance (object codecs,
    third-party filters)."""
    cid = getattr(codec, "codec_id", None)
    n = math.prod(spec.shape)
    if cid == "packbits":
        return ChunkSpec((1 + math.ceil(n / 8),), np.dtype("u1"))
    if cid in _TO_ASTYPE:
        return ChunkSpec(spec.shape, np.dtype(codec.astype))
    if cid == "astype":
        return ChunkSpec(spec.shape, np.dtype(codec.encode_dtype))
    if cid in _SAME:
        return spec
    if cid == "shuffle":  # a v2 filter over the raw bytes
        return ChunkSpec((spec.nbytes,), np.dtype("u1"))
    return None
