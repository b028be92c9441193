"""Where an array's chunks live and what they are decoded with, for the decoded-chunk
cache (``chunk_cache``): the :class:`Place` of a store's keys, the fingerprint of a
chunk's decoding, and how tokens (what names a stored version) compare."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from chunkstore.codecs.pipeline import Pipeline
from chunkstore.codecs.v2_pipeline import V2Pipeline
from chunkstore.io.cache.stamps import Unsettled
from chunkstore.storage.reference import store_ref


class Place(NamedTuple):
    """Where an array's chunks live, for the cache: the namespace and root of the store's
    object reference (``storage.reference``: the kind of store and its endpoint, or a
    memory store's dict; the canonical root path), and what the chunks are decoded with.
    A chunk is cached under (namespace, root + key), so the same object reached through
    another root (``memory://g`` + ``x/c/0`` or ``memory://g/x`` + ``c/0``, a symlinked
    or relative path to one directory) is one entry; an inner chunk of a sharded array
    under (namespace, root + shard key, inner chunk number)."""

    namespace: Any
    root: str
    fingerprint: Any

    def key(self, key: str) -> tuple[Any, str]:
        return (self.namespace, self.root + key)


def store_id(store: Any, fingerprint: Any = None) -> Place | None:
    """The :class:`Place` of ``store``'s keys (None for a store without a hashable
    location: it is then not cached)."""
    try:
        ref = store_ref(store)
        hash(ref)
    except Exception:
        return None
    return Place(ref.namespace, ref.path + "/" if ref.parts else "", fingerprint)


def fingerprint(pipeline: Pipeline, dtype: Any, chunks: Sequence[int]) -> Any:
    """What chunks are decoded with: data type, chunk shape and codec chain (an entry
    decoded with another is never served)."""
    if isinstance(pipeline, V2Pipeline):  # filters, compressor and memory order
        codecs = repr((pipeline.filters, pipeline.compressor, pipeline.order))
    else:
        codecs = json.dumps(pipeline.to_json(), sort_keys=True, default=repr)
    dt = np.dtype(dtype)
    return (dt.str, repr(dt), tuple(int(c) for c in chunks), codecs)


def keepable(token: Any) -> bool:
    """Whether ``token`` stands for one stored version for as long as it lives: not a
    buffer whose bytes can change in place (bytearray, ndarray, mmap, a memoryview, even
    a read-only one, over any of them). Only bytes are buffers that cannot. Nor an
    :class:`~chunkstore.io.cache.stamps.Unsettled` file version (its stat could come
    back after a change)."""
    if isinstance(token, Unsettled):
        return False
    if token is None or isinstance(token, bytes | tuple | int | str):
        return True
    try:
        memoryview(token)
    except TypeError:
        return True
    return False


def _same(kept: Any, now: Any) -> bool:
    """Whether the token ``now`` names the version an entry was kept for (``kept``,
    always immutable, see :meth:`ChunkCache.put`): the same object, or equal. A mutable
    buffer ``now`` is compared by content with the kept bytes (bytes == memoryview
    compares bytes, where ``bytes == ndarray`` would compare elements). An
    :class:`~chunkstore.io.cache.stamps.Unsettled` token compares as the version it
    wraps: an entry is only kept for a settled token, and any change of the file after
    that token was taken would show in its stat."""
    if isinstance(now, Unsettled):
        now = now.token
    if isinstance(kept, Unsettled):
        kept = kept.token
    if kept is now:
        return True
    try:
        if isinstance(kept, bytes) and not isinstance(now, bytes):
            view = memoryview(now)
            return view.nbytes == len(kept) and view.cast("B") == kept
        return bool(kept == now)
    except Exception:
        return False
