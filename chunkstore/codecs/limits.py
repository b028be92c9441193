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
  highly compressible string chunks with :func:`set_decode_limits` (the config keys
  ``codecs.vlen_min_bytes`` and ``codecs.vlen_ratio``) or the environment variables
  ``CHUNKSTORE_VLEN_MIN_BYTES`` and ``CHUNKSTORE_VLEN_RATIO``.

What metadata declares is bounded too: :func:`memory_limit` is the most memory the
process could ever hold, checked before allocating a shard index.

The same bounds, taken outwards, say how large a stored chunk may legitimately be
(``Pipeline.stored_bound``): the engines pass that to the store as ``max_bytes``, so an
object larger than any encoding of the chunk (a sparse file, a hostile upload) is
refused before it is read, not after.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from chunkstore.config import config
from chunkstore.runtime import current

MiB = 2**20


def memory_limit() -> int | None:
    """The most memory this process could ever hold: the machine's physical memory, or
    its address-space limit (``RLIMIT_AS``) when lower; None when neither is known."""
    found = []
    try:
        found.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):  # not a POSIX system
        pass
    try:
        import resource
    except ImportError:  # Windows
        return min(found) if found else None
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    if soft != resource.RLIM_INFINITY and soft > 0:
        found.append(soft)
    return min(found) if found else None


@dataclass(frozen=True)
class DecodeLimits:
    """Caps on the decoded size of chunks whose size the metadata does not fix."""

    #: variable-length chunks may always decode to this many bytes
    vlen_min_bytes: int = 64 * MiB
    #: ... or to this many times their stored size, when that is more
    vlen_ratio: int = 64


def decode_limits() -> DecodeLimits:
    """The limits in force (the Runtime's budgets: ``chunkstore.config``, else the
    environment, else the defaults)."""
    budgets = current().budgets
    return DecodeLimits(budgets.vlen_min_bytes, budgets.vlen_ratio)


def set_decode_limits(*, vlen_min_bytes: int | None = None,
                      vlen_ratio: int | None = None) -> DecodeLimits:
    """Change the caps on variable-length chunks (process-wide: the config keys
    ``codecs.vlen_min_bytes`` and ``codecs.vlen_ratio``); returns the old limits so that
    a caller can restore them."""
    old = decode_limits()
    changes = {k: int(v) for k, v in (("vlen_min_bytes", vlen_min_bytes),
                                       ("vlen_ratio", vlen_ratio)) if v is not None}
    if any(v < 1 for v in changes.values()):
        raise ValueError(f"decode limits must be positive, got {changes}")
    config.set({f"codecs.{k}": v for k, v in changes.items()})
    return old


def variable_cap(stored_nbytes: int) -> int:
    """The most a variable-length chunk stored in ``stored_nbytes`` may decode to."""
    budgets = current().budgets
    return max(budgets.vlen_min_bytes, budgets.vlen_ratio * stored_nbytes)


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

