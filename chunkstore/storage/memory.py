"""MemoryStore: a dict of bytes, for tests, scratch arrays and small data."""

from __future__ import annotations

import threading
from collections.abc import Iterator, MutableMapping, Sequence
from typing import Any

from chunkstore.storage.base import (
    ABSENT,
    ANY,
    CHANGED,
    ByteRange,
    BytesLike,
    Commit,
    Store,
    normalize_prefix,
    slice_range,
    validate_key,
    validate_prefix,
)
from chunkstore.storage.bounds import too_large, wrong_size
from chunkstore.storage.capabilities import Capabilities


class MemoryStore(Store):
    """Keys and values held in a Python dict.

    Pickling copies the contents (a memory store cannot be shared across processes).
    Pass ``data`` to wrap an existing dict-like mapping of str -> bytes.
    """

    #: values are handed out in place (``get_views``): a few elements of a large raw
    #: chunk are copied out of it, and its size is checked as on local files
    capabilities = Capabilities(
        partial_reads=True, zero_copy_views=True, request_cost_bytes=4096,
        conditional_writes=True, conditional_delete=True, conditional_writes_ignored=False,
        writes_arrays=False, reads_arrays=False, snapshot_ranges=True, remote=False,
        process_local=True, blocking_commits=False, write_batch_bytes=None,
        cache_tokens=True, timestamped_tokens=False)

    def __init__(self, data: MutableMapping[str, bytes] | None = None, read_only: bool = False):
        super().__init__(read_only)
        self._data: MutableMapping[str, bytes] = {} if data is None else data
        # every write holds it, so a generation check and its write are one step; a
        # value's generation is the stored bytes object itself (held by the token, so its
        # identity cannot be reused)
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _description(self) -> tuple[Any, ...]:
        return (dict(self._data), self._read_only)

    def with_read_only(self, read_only: bool = True) -> MemoryStore:
        """A view of the same data (not a copy) with the given read-only flag."""
        clone = type(self).__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone._read_only = bool(read_only)
        return clone

    def __repr__(self) -> str:
        return f"MemoryStore(<{len(self._data)} keys>)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MemoryStore) and other._data is self._data

    def __hash__(self) -> int:
        return id(self._data)

    def __dask_tokenize__(self) -> tuple[Any, ...]:
        return ("MemoryStore", id(self._data))

    def _value(self, key: str, max_bytes: int | None) -> Any:
        """The stored object at ``key`` (None if missing), refused when larger than
        ``max_bytes`` (its ``len``, before any copy)."""
        value = self._data.get(validate_key(key))
        if value is not None and max_bytes is not None:
            size = memoryview(value).nbytes
            if size > max_bytes:
                raise too_large(self, key, size, max_bytes)
        return value

    def get(self, key: str, byte_range: ByteRange | None = None,
            max_bytes: int | None = None) -> bytes | None:
        value = self._value(key, None if byte_range else max_bytes)
        if value is None:
            return None
        return slice_range(bytes(value), byte_range) if byte_range else bytes(value)

    def get_many(self, keys: Sequence[str], max_bytes: int | None = None
                 ) -> list[bytes | None]:
        """The values (ObjectSizeError for one larger than ``max_bytes``, checked before
        any is copied); each read through ``get``."""
        if max_bytes is not None:
            for key in keys:
                self._value(key, max_bytes)
        return [self.get(k) for k in keys]

    def get_views(self, keys: Sequence[str], max_bytes: int | None = None
                  ) -> list[BytesLike | None]:
        """The stored ``bytes`` objects themselves (immutable: no copy); a snapshot of a
        mutable value a user's mapping holds."""
        out: list[BytesLike | None] = []
        for key in keys:
            value = self._value(key, max_bytes)
            out.append(value if value is None or type(value) is bytes else bytes(value))
        return out

    def get_ranges(self, requests: Sequence[tuple[str, ByteRange | None]],
                   object_size: int | None = None) -> list[bytes | None]:
        """Each key is looked up once for all of its ranges (one version of its value);
        with ``object_size``, a value of another size is an ObjectSizeError."""
        values: dict[str, bytes | None] = {}
        out = []
        for key, byte_range in requests:
            if key not in values:
                values[key] = value = self._data.get(validate_key(key))
                if value is not None and object_size is not None and (
                        memoryview(value).nbytes != object_size):
                    raise wrong_size(self, key, memoryview(value).nbytes, object_size)
            value = values[key]
            out.append(None if value is None else slice_range(bytes(value), byte_range))
        return out

    def get_versioned_ranges(self, requests: Sequence[tuple[str, ByteRange | None, Any]]
                             ) -> list[tuple[bytes | None, Any]]:
        """Each key is looked up once for all of its ranges; its generation is the one
        ``get_versioned_many`` gives, and a range pinned to another reads as
        ``(None, CHANGED)``."""
        found: dict[str, tuple[Any, Any]] = {}
        out: list[tuple[bytes | None, Any]] = []
        for key, byte_range, pinned in requests:
            if key not in found:
                value = self._data.get(validate_key(key))
                found[key] = (value, ABSENT if value is None else _Gen(
                    value if isinstance(value, bytes) else bytes(value)))
            value, generation = found[key]
            if pinned is not ANY and (value is None or not (
                    isinstance(pinned, _Gen) and pinned.matches(value))):
                out.append((None, CHANGED))
            elif value is None:
                out.append((None, ABSENT))
            else:
                out.append((slice_range(bytes(value), byte_range), generation))
        return out

    def cache_tokens(self, keys: Sequence[str]) -> list[Any]:
        """What identifies the stored version of each key, for the decoded-chunk cache:
        the stored value itself, None when missing. A ``bytes`` value (every chunkstore
        write stores a new one) stands for its version by identity; a mutable one a
        user's mapping may hold (bytearray, ndarray, mmap) does not, and the cache does
        not keep chunks read from it (``chunkstore.io.cache.chunk_cache``)."""
        data = self._data
        return [data.get(validate_key(key)) for key in keys]

    def set(self, key: str, value: BytesLike) -> None:
        self._check_writable(key)
        value = bytes(value)
        with self._lock:
            self._data[validate_key(key)] = value
        if not self.capabilities.cache_tokens:  # a subclass without them: say so
            self._notify_written([key])

    def delete(self, key: str) -> None:
        self._check_writable(key)
        with self._lock:
            self._data.pop(validate_key(key), None)
        if not self.capabilities.cache_tokens:
            self._notify_written([key])

    def get_versioned_many(self, keys: Sequence[str], max_bytes: int | None = None
                           ) -> list[tuple[bytes | None, Any]]:
        found = []
        for key in keys:
            value = self._value(key, max_bytes)
            if value is None:
                found.append((None, ABSENT))
                continue
            data = bytes(value)
            # a bytes value is its own generation; a mutable one can change in place under
            # the same identity, so its generation is the content read
            found.append((data, _Gen(value if isinstance(value, bytes) else data)))
        return found

    def commit_many(self, items: Sequence[Commit]) -> list[bool]:
        done = []
        for key, value, generation in items:
            self._check_writable(key)
            key = validate_key(key)
            new = None if value is None else bytes(value)
            with self._lock:
                current = self._data.get(key)
                if generation is ANY or (current is None if generation is ABSENT else (
                        isinstance(generation, _Gen) and generation.matches(current))):
                    if new is None:
                        self._data.pop(key, None)
                    else:
                        self._data[key] = new
                    done.append(True)
                else:
                    done.append(False)
        if not self.capabilities.cache_tokens:
            self._notify_written([key for key, _, _ in items])
        return done

    def location(self) -> Any:
        return ("memory", id(self._data))

    def exists(self, key: str) -> bool:
        return validate_key(key) in self._data

    def getsize(self, key: str) -> int | None:
        value = self._data.get(validate_key(key))
        return None if value is None else len(value)

    def list_prefix(self, prefix: str) -> Iterator[str]:
        validate_prefix(prefix)
        return iter([k for k in list(self._data) if k.startswith(prefix)])

    def list_dir(self, prefix: str) -> Iterator[str]:
        base = normalize_prefix(prefix)
        names = {k[len(base):].split("/", 1)[0] for k in list(self._data) if k.startswith(base)}
        return iter(sorted(names))


class _Gen:
    """The generation of a stored value: the value object itself when it is bytes (else
    a bytes copy of what was read). It matches the same object (a dict keeps it) or, for
    a mapping that hands out a fresh object on every read (an fsspec mapper, a custom
    mapping) or a mutable value, equal bytes: replacing a value by an equal one is
    harmless to a read-modify-write, while a bytearray changed in place no longer
    matches."""

    __slots__ = ("value",)

    def __init__(self, value: bytes) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Gen) and self.matches(other.value)

    __hash__ = None  # type: ignore[assignment]  (equal by content: not hashable cheaply)

    def matches(self, current: bytes | None) -> bool:
        """Whether ``current`` is still the value this generation was read as."""
        if current is self.value or current is None:
            return current is not None
        if isinstance(current, bytes):
            return current == self.value
        try:  # by content (``bytes == ndarray`` would compare elements)
            return bytes(current) == self.value
        except (TypeError, ValueError):
            return False
