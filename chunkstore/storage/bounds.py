"""Bounded reads: the errors and checks of a store refusing a value larger than the
caller's ``max_bytes`` (or not the exact ``object_size`` of a ranged read), and the
calls engines use to pass those bounds to any store (see ``base``'s module docstring).

A store subclass written before bounded reads may override ``get_many(keys)`` without
the keyword: :func:`takes` notices (once per function) and the value is then checked
after it is read, so a chunk engine never decodes more than its bound.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from chunkstore.errors import ChunkDecodeError
from chunkstore.runtime import current
from chunkstore.runtime.part import Part


class ObjectSizeError(ChunkDecodeError):
    """A stored value is larger than the caller's ``max_bytes`` (or not the exact
    ``object_size`` of a ranged read): refused before it is read or decoded. The message
    names the key and the store; ``key`` and ``size`` (None when only a lower bound is
    known) are attributes."""

    def __init__(self, message: str, key: str = "", size: int | None = None) -> None:
        super().__init__(message)
        self.key, self.size = key, size


def too_large(store: object, key: str, size: int, max_bytes: int, at_least: bool = False
              ) -> ObjectSizeError:
    """The error for ``key`` holding ``size`` (``at_least``: or more) bytes when at most
    ``max_bytes`` may be read."""
    what = f"at least {size}" if at_least else str(size)
    return ObjectSizeError(f"key {key!r} of {store!r} holds {what} bytes, more than the "
                           f"{max_bytes} its largest legitimate encoding takes", key,
                           None if at_least else size)


def wrong_size(store: object, key: str, size: int, expected: int) -> ObjectSizeError:
    """The error for ``key`` holding ``size`` bytes when exactly ``expected`` belong."""
    return ObjectSizeError(f"key {key!r} of {store!r} holds {size} bytes, expected "
                           f"{expected}", key, size)


def check_sizes(store: object, keys: Sequence[str], values: Sequence[Any],
                max_bytes: int | None) -> None:
    """Raise ObjectSizeError for the first value (None: missing) larger than ``max_bytes``
    (the check after the fact, for reads that could not refuse before)."""
    if max_bytes is None:
        return
    for key, value in zip(keys, values, strict=True):
        if value is not None and memoryview(value).nbytes > max_bytes:
            raise too_large(store, key, memoryview(value).nbytes, max_bytes)


def takes(method: Any, param: str) -> bool:
    """Whether ``method`` (a bound method of a store) accepts the keyword ``param``: a
    subclass written before bounded reads may override ``get_many(keys)`` alone (the
    answer is cached per function)."""
    func = getattr(method, "__func__", method)
    key = (func, param)
    cache = current().part(KeywordSupport)
    known = cache.get(key)
    if known is None:
        try:
            params = inspect.signature(func).parameters
        except (TypeError, ValueError):
            params = {}  # type: ignore[assignment]
        known = param in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
        cache[key] = known
    return known


class KeywordSupport(dict[tuple[Any, str], bool], Part):
    """What :func:`takes` found, by (function, keyword) (a part of the process's
    Runtime)."""


def bounded_get_many(store: Any, keys: Sequence[str], max_bytes: int | None
                      ) -> list[bytes | None]:
    """``store.get_many(keys, max_bytes=...)``, or checked after an override without it."""
    if max_bytes is None:
        return store.get_many(keys)
    if takes(store.get_many, "max_bytes"):
        return store.get_many(keys, max_bytes=max_bytes)
    values = store.get_many(keys)
    check_sizes(store, keys, values, max_bytes)
    return values


def bounded_get(store: Any, key: str, max_bytes: int | None) -> bytes | None:
    """``store.get(key, max_bytes=...)`` (checked after reading where not supported)."""
    if max_bytes is None:
        return store.get(key)
    if takes(store.get, "max_bytes"):
        return store.get(key, max_bytes=max_bytes)
    value = store.get(key)
    check_sizes(store, [key], [value], max_bytes)
    return value


def bounded_get_views(store: Any, keys: Sequence[str], max_bytes: int | None) -> list[Any]:
    """``store.get_views(keys, max_bytes=...)`` (checked after where not supported)."""
    if max_bytes is None:
        return store.get_views(keys)
    if takes(store.get_views, "max_bytes"):
        return store.get_views(keys, max_bytes=max_bytes)
    views = store.get_views(keys)
    check_sizes(store, keys, views, max_bytes)
    return views


def bounded_get_versioned(store: Any, keys: Sequence[str], max_bytes: int | None
                          ) -> list[tuple[Any, Any]]:
    """``store.get_versioned_many(keys, max_bytes=...)`` (checked after where not
    supported)."""
    if max_bytes is None:
        return store.get_versioned_many(keys)
    if takes(store.get_versioned_many, "max_bytes"):
        return store.get_versioned_many(keys, max_bytes=max_bytes)
    found = store.get_versioned_many(keys)
    check_sizes(store, keys, [value for value, _ in found], max_bytes)
    return found


def sized_get_ranges(store: Any, requests: Sequence[tuple[str, Any]],
                     object_size: int | None) -> list[Any]:
    """``store.get_ranges(requests, object_size=...)``; a store whose ``get_ranges``
    does not take it reads the ranges unchecked, as before bounded reads."""
    if object_size is not None and takes(store.get_ranges, "object_size"):
        return store.get_ranges(requests, object_size=object_size)
    return store.get_ranges(requests)
