"""How many bytes decoding one chunk may produce.

A stored chunk is untrusted: a few kilobytes of zstd or gzip can expand to gigabytes,
and a variable-length header can claim billions of items. Every decoding stage is
therefore given the most it may produce *before* it runs, and refuses a payload whose
headers (or whose output, for codecs that cannot tell in advance) exceed it:

* the array->bytes stage of a fixed-size data type needs exactly the chunk's bytes;
* a bytes->bytes stage in front of another may produce at most what that stage's
  encoder can output for its bound (:func:`compressed_bound`, a checksum's 4 bytes...);
* chunks of variable-length items (strings, bytes, objects) have no exact size: their
  serialized form is capped by :func:`variable_cap`, ``max(min_bytes, ratio x stored
  size)`` — 64 MiB, or 64 times the stored payload when that is more. Raise it for
  highly compressible string chunks with :func:`set_decode_limits` or the environment
  variables ``CHUNKSTORE_VLEN_MIN_BYTES`` and ``CHUNKSTORE_VLEN_RATIO``.

The same bounds, taken outwards, say how large a stored chunk may legitimately be
(:func:`stored_bound`): the engines pass that to the store as ``max_bytes``, so an
object larger than any encoding of the chunk (a sparse file, a hostile upload) is
refused before it is read, not after.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

MiB = 2**20


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    try:
        return max(1, int(value)) if value else default
    except ValueError:
        return default


@dataclass(frozen=True)
class DecodeLimits:
    """Caps on the decoded size of chunks whose size the metadata does not fix."""

    #: variable-length chunks may always decode to this many bytes
    vlen_min_bytes: int = 64 * MiB
    #: ... or to this many times their stored size, when that is more
    vlen_ratio: int = 64


_limits = DecodeLimits(_env_int("CHUNKSTORE_VLEN_MIN_BYTES", 64 * MiB),
                       _env_int("CHUNKSTORE_VLEN_RATIO", 64))


def decode_limits() -> DecodeLimits:
    """The limits in force."""
    return _limits


def set_decode_limits(*, vlen_min_bytes: int | None = None,
                      vlen_ratio: int | None = None) -> DecodeLimits:
    """Change the caps on variable-length chunks (process-wide); returns the old limits
    so that a caller can restore them."""
    global _limits
    old = _limits
    changes = {k: int(v) for k, v in (("vlen_min_bytes", vlen_min_bytes),
                                       ("vlen_ratio", vlen_ratio)) if v is not None}
    if any(v < 1 for v in changes.values()):
        raise ValueError(f"decode limits must be positive, got {changes}")
    _limits = replace(old, **changes)
    return old


def variable_cap(stored_nbytes: int) -> int:
    """The most a variable-length chunk stored in ``stored_nbytes`` may decode to."""
    return max(_limits.vlen_min_bytes, _limits.vlen_ratio * stored_nbytes)


def compressed_bound(nbytes: int) -> int:
    """An upper bound of what any supported compressor or checksum outputs for
    ``nbytes`` of input (zstd, gzip, zlib, bz2, lzma, lz4 and blosc all stay below
    ``n + n/100 + a few hundred bytes`` on incompressible data)."""
    return nbytes + nbytes // 64 + 64 * 1024



def over_cap(error: Exception) -> Exception:
    """``error`` (a stage refusing to pass the variable-length cap) with how to raise it."""
    return type(error)(f"{error} (the cap on variable-length chunks: raise it with "
                       "chunkstore.codecs.limits.set_decode_limits() or "
                       "CHUNKSTORE_VLEN_MIN_BYTES / CHUNKSTORE_VLEN_RATIO)")


def stored_bound(pipeline: Any) -> int | None:
    """The most bytes a chunk encoded by ``pipeline`` (a v3 CodecPipeline or a v2
    V2Pipeline) can be stored in, or None when that is unknown (variable-length items,
    a codec without ``encoded_bound``, a sharded chain: see :func:`shard_bound`).

    v3: the array->bytes codec's ``serialized_limit`` (exact for ``bytes``), then each
    bytes->bytes codec's ``encoded_bound``. v2: the chunk's bytes after the filters
    (when fixed), then the compressor's bound."""
    if getattr(pipeline, "zarr_format", None) == 2:
        size = getattr(pipeline, "_filtered_nbytes", None)
        compressor = getattr(pipeline, "compressor", None)
        if size is None or compressor is None:
            return size
        from .bounded import encoded_bound  # (bounded imports this module)
        return encoded_bound(compressor, size)
    array_bytes = getattr(pipeline, "array_bytes", None)
    spec = getattr(pipeline, "_bytes_spec", None)
    if array_bytes is None or spec is None:
        return None
    size = array_bytes.serialized_limit(spec)
    for codec in pipeline.bytes_bytes:
        if size is None:
            return None
        size = codec.encoded_bound(size)
    return size


def shard_bound(codec: Any) -> int | None:
    """The most bytes a shard of the resolved sharding codec ``codec`` can take: its
    index and every inner chunk at its largest (None when the inner chunks have no
    bound)."""
    inner = stored_bound(codec.inner) if codec.inner is not None else None
    if inner is None:
        return None
    return codec.index_nbytes + codec.n_inner * inner

