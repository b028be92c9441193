"""The byte-level key-value Store interface every backend implements.

Keys are ``/``-separated relative paths (``"x/zarr.json"``, ``"x/c/0/1"``). Values are
bytes. A missing key reads as ``None``; it is never an error at this layer.

Byte ranges are ``(start, stop)`` half-open pairs: ``stop=None`` means "to the end",
a negative ``start`` with ``stop=None`` means "the last ``-start`` bytes".

Bounded reads: the whole-value reads (``get``, ``get_many``, ``get_views``,
``get_versioned_many``) take an optional ``max_bytes``, the largest value the caller
can use (a chunk engine: the largest legitimate encoding of a chunk or shard). A store
refuses a larger value with :class:`ObjectSizeError` before reading it where it learns
the size first (a file's ``fstat``, a dict's ``len``, a zip entry's header, an HTTP
response's headers) and otherwise reads at most ``max_bytes + 1`` bytes of it.
``get_ranges`` takes an optional ``object_size``: every value read must have exactly
that size (the ranges of an uncompressed chunk). Without them a read is unbounded.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from chunkstore.errors import InvalidKeyError, ReadOnlyError
from chunkstore.runtime.writes import WRITE_LISTENERS
from chunkstore.storage.bounds import (
    bounded_get,
    bounded_get_many,
    check_sizes,
    wrong_size,
)
from chunkstore.storage.capabilities import Capabilities

ByteRange = tuple[int, int | None]
BytesLike = bytes | bytearray | memoryview


class Reader:
    """Reads of one operation (``Store.read_session``); this default calls the store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def get(self, key: str, max_bytes: int | None = None) -> BytesLike | None:
        """The value at ``key`` (None if missing); larger than ``max_bytes``: refused
        (ObjectSizeError)."""
        return bounded_get(self.store, key, max_bytes)

    def read_into(self, key: str, array: np.ndarray) -> bool:
        """Fill the writeable ``array`` with the value at ``key`` (its C-ordered bytes):
        True; False when the key is missing; ObjectSizeError when the value is not
        ``array.nbytes`` long. ``reads_arrays`` stores read straight into the array;
        this gets the value and copies it in."""
        value = self.get(key, array.nbytes)
        if value is None:
            return False
        size = memoryview(value).nbytes
        if size != array.nbytes:
            raise wrong_size(self.store, key, size, array.nbytes)
        array[...] = np.frombuffer(value, array.dtype).reshape(array.shape)
        return True


class _Token:
    """A named sentinel generation token (``ANY``, ``ABSENT``)."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name

    def __reduce__(self):
        return self._name  # pickles as the module-level singleton


#: commit without a check (whole-object writes: last writer wins)
ANY = _Token("ANY")
#: commit only if the key does not exist yet (the generation of a missing key)
ABSENT = _Token("ABSENT")
#: what a pinned range reads as (``get_versioned_ranges``) when its object is no longer
#: at the generation it was pinned to (replaced or deleted meanwhile)
CHANGED = _Token("CHANGED")
#: an item of ``commit_many``: (key, new value or None to delete, expected generation)
Commit = tuple[str, "BytesLike | None", Any]


def validate_key(key: str) -> str:
    """Return ``key`` if it is a safe relative store key, else raise InvalidKeyError.

    Rejected: empty keys, absolute paths, backslashes, empty segments (``a//b``),
    ``.`` and ``..`` segments, NUL bytes.
    """
    if not isinstance(key, str):
        raise InvalidKeyError(f"store key must be a str, got {type(key).__name__}: {key!r}")
    if not key:
        raise InvalidKeyError("store key is empty")
    if "\\" in key or "\x00" in key:
        raise InvalidKeyError(f"store key {key!r} contains a backslash or NUL byte")
    if key.startswith("/") or (len(key) > 1 and key[1] == ":"):
        raise InvalidKeyError(f"store key {key!r} is an absolute path")
    for part in key.split("/"):
        if part in ("", ".", ".."):
            raise InvalidKeyError(f"store key {key!r} has an empty, '.' or '..' segment")
    return key


def validate_prefix(prefix: str) -> str:
    """Return ``prefix`` if it is a safe key prefix (for ``list_prefix``), else raise
    InvalidKeyError: everything up to its last ``/`` must be a valid key (or nothing),
    and the rest a partial segment without backslashes or NUL bytes."""
    if not isinstance(prefix, str):
        raise InvalidKeyError(f"store prefix must be a str, got {type(prefix).__name__}: "
                              f"{prefix!r}")
    head, _, tail = prefix.rpartition("/")
    if prefix.startswith("/") or "\\" in tail or "\x00" in tail:
        raise InvalidKeyError(f"store prefix {prefix!r} is absolute or contains a backslash "
                              "or NUL byte")
    if head:
        try:
            validate_key(head)
        except InvalidKeyError:
            raise InvalidKeyError(f"store prefix {prefix!r} is not inside the store (empty, "
                                  "'.' or '..' segment, or absolute)") from None
    return prefix


def normalize_prefix(prefix: str) -> str:
    """Turn a directory-like prefix into ``"a/b/"`` form (``""`` stays the root)."""
    prefix = prefix.strip("/")
    if prefix:
        validate_key(prefix)
        return prefix + "/"
    return ""


def unversioned_ranges(store: Store, requests: Sequence[tuple[str, ByteRange | None, Any]],
                       read: Callable[[list[tuple[str, ByteRange | None]]], list[Any]]
                       ) -> list[tuple[Any, Any]]:
    """``Store.get_versioned_ranges`` of a store without versions to pin to: the ranges
    read by ``read`` (its ``get_ranges``), each with ``ANY`` (``ABSENT`` when missing); a
    request pinned to a generation is a ValueError (it cannot be checked)."""
    for key, _, pinned in requests:
        if pinned is not ANY:
            raise ValueError(f"{store!r} has no versions to pin a read of {key!r} to "
                             f"(generation {pinned!r})")
    values = read([(k, r) for k, r, _ in requests])
    return [(v, ABSENT if v is None else ANY) for v in values]


def slice_range(data: bytes, byte_range: ByteRange | None) -> bytes:
    """Apply a byte range to an in-memory value."""
    if byte_range is None:
        return data
    start, stop = byte_range
    if start < 0 and stop is None:
        return data[start:] if -start <= len(data) else data
    return data[start:stop]


class Store(ABC):
    """A key-value store of bytes.

    Subclasses implement ``get``, ``set``, ``delete``, ``list_prefix`` and ``list_dir``
    and ``_description`` (what pickling sends, so a worker can re-open the store), and
    declare their :class:`Capabilities`; batched calls default to loops and are
    overridden where a backend can do better (thread pool for files, concurrent
    requests for remote stores). A store without ``capabilities.cache_tokens`` calls
    :meth:`_notify_written` after each of its writes (also a failed one: part of it may
    have landed), so caches above forget what it touched.
    """

    #: what the store can do (see :class:`Capabilities`); every store declares its own
    capabilities: Capabilities = Capabilities()

    def __init__(self, read_only: bool = False) -> None:
        self._read_only = bool(read_only)

    # -- identity ----------------------------------------------------------------
    @property
    def read_only(self) -> bool:
        """True when the store refuses writes."""
        return self._read_only

    @abstractmethod
    def _description(self) -> tuple[Any, ...]:
        """Positional arguments that rebuild an equivalent store."""

    def __reduce__(self):
        return (type(self)._from_description, self._description())

    @classmethod
    def _from_description(cls, *args: Any) -> Store:
        return cls(*args)

    def __dask_tokenize__(self) -> tuple[Any, ...]:
        """Identity of the data location (not of the read-only flag), for Dask names."""
        return (type(self).__name__, repr(self))

    def with_read_only(self, read_only: bool = True) -> Store:
        """A store on the same data with the given read-only flag."""
        fn, args = self.__reduce__()
        clone = fn(*args)
        clone._read_only = bool(read_only)
        return clone

    def sibling(self, suffix: str) -> Store | None:
        """A new, separate store next to this one (its root name + ``suffix``), or None
        when the backend has no notion of a neighbouring location. Used for scratch
        data that must not live inside this store, e.g. rechunk intermediates of a
        root array."""
        return None

    def remove_root(self) -> None:
        """Remove the (empty) container of the store itself, where that means anything."""

    def _check_writable(self, key: str) -> None:
        if self._read_only:
            raise ReadOnlyError(f"cannot write key {key!r}: {self!r} is read-only")

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release resources (files, sessions). Further use may re-open lazily."""

    def _notify_written(self, keys: Iterable[str] | None = None,
                        prefix: str | None = None) -> None:
        """Tell the process's write listeners (``runtime.writes``: the decoded-chunk
        cache) that ``keys`` (or everything below the directory ``prefix``, "" for all)
        may have changed. Called after the write, so that a read started before it
        cannot be kept as current."""
        WRITE_LISTENERS.notify(self, None if keys is None else list(keys), prefix)

    def cache_tokens(self, keys: Sequence[str]) -> list[Any]:
        """What identifies the stored version of each key (``capabilities.cache_tokens``
        stores only)."""
        raise NotImplementedError(f"{type(self).__name__} has no cache tokens")

    def timestamp_probe(self) -> Any:
        """How fine the timestamps of the cache tokens are (``capabilities.
        timestamped_tokens`` stores only); None when unknown."""
        return None

    # -- single-key operations -----------------------------------------------------
    @abstractmethod
    def get(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        """The value at ``key`` (or the given byte range of it), or None if missing."""

    @abstractmethod
    def set(self, key: str, value: BytesLike) -> None:
        """Store ``value`` at ``key``, replacing any old value atomically where possible."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove ``key``; a missing key is not an error."""

    # -- versioned reads and conditional commits -------------------------------------
    def get_versioned(self, key: str) -> tuple[bytes | None, Any]:
        """``(value, generation)``: the value (None if missing) and an opaque token that
        ``commit_many`` compares with the object's state at commit time. A missing key's
        generation is ``ABSENT``."""
        return self.get_versioned_many([key])[0]

    def get_versioned_many(self, keys: Sequence[str], max_bytes: int | None = None
                           ) -> list[tuple[bytes | None, Any]]:
        """``get_versioned`` of several keys as one batch (``max_bytes``: see the module
        docstring). Default (no conditional support): plain values, each with the
        generation ``ANY`` (or ``ABSENT``)."""
        values = bounded_get_many(self, keys, max_bytes)
        return [(v, ABSENT if v is None else ANY) for v in values]

    def commit_many(self, items: Sequence[Commit]) -> list[bool]:
        """Apply ``(key, value, generation)`` items as one batch: store ``value`` at
        ``key`` (delete it when ``value`` is None) only if the key's current generation
        is ``generation`` (``ANY``: always; ``ABSENT``: only if the key is missing).
        Each item is atomic on its own; returns, per item, whether it was applied.

        The default (``capabilities.conditional_writes`` False) applies every item without
        checking."""
        self._check_writable(items[0][0] if items else "")
        to_set = [(k, v) for k, v, _ in items if v is not None]
        to_delete = [k for k, v, _ in items if v is None]
        if to_set:
            self.set_many(to_set)
        if to_delete:
            self.delete_many(to_delete)
        return [True] * len(items)

    @contextmanager
    def commit_session(self) -> Iterator[Callable[[Sequence[Commit]], list[bool]]]:
        """A ``commit_many`` for the many commits of one operation (one array write),
        from any number of threads, valid inside the ``with`` block. A store may keep
        what they share open meanwhile (a local store: its directories); the default is
        ``commit_many`` itself."""
        yield self.commit_many

    def set_if(self, key: str, value: BytesLike | None, generation: Any) -> bool:
        """``commit_many`` of one item."""
        return self.commit_many([(key, value, generation)])[0]

    def location(self) -> Any:
        """A hashable identity of the place the data lives (the resolved directory,
        bucket and prefix, the dict of a memory store): two stores with equal locations
        show the same keys. Used to refuse or stage a copy of an array onto itself."""
        return (type(self).__name__, repr(self))

    def exists(self, key: str) -> bool:
        """True if a value is stored at ``key``."""
        return self.get(key) is not None

    def getsize(self, key: str) -> int | None:
        """Size in bytes of the value at ``key``, or None if missing."""
        value = self.get(key)
        return None if value is None else len(value)

    # -- listing -------------------------------------------------------------------
    @abstractmethod
    def list_prefix(self, prefix: str) -> Iterator[str]:
        """Every key that starts with ``prefix`` (a plain string prefix)."""

    @abstractmethod
    def list_dir(self, prefix: str) -> Iterator[str]:
        """Names of the immediate children (keys and sub-directories) below ``prefix``."""

    def list(self) -> Iterator[str]:
        """Every key in the store."""
        return self.list_prefix("")

    # -- batched operations ----------------------------------------------------------
    def get_many(self, keys: Sequence[str], max_bytes: int | None = None
                 ) -> list[bytes | None]:
        """Values of ``keys`` in order (None for missing ones), fetched as one batch; a
        value larger than ``max_bytes`` is an ObjectSizeError naming its key (the default
        checks after reading: stores that learn sizes first override it)."""
        values = [self.get(k) for k in keys]
        check_sizes(self, keys, values, max_bytes)
        return values

    def get_ranges(self, requests: Sequence[tuple[str, ByteRange | None]],
                   object_size: int | None = None) -> list[bytes | None]:
        """Byte ranges of several keys, in order, as one batch. With ``object_size``,
        every key found must hold exactly that many bytes (else ObjectSizeError naming
        it; the default asks ``getsize`` of each key found)."""
        values = [self.get(k, r) for k, r in requests]
        if object_size is not None:
            found = {k for (k, _), v in zip(requests, values, strict=True) if v is not None}
            for key in sorted(found):
                size = self.getsize(key)
                if size is not None and size != object_size:
                    raise wrong_size(self, key, size, object_size)
        return values

    def get_versioned_ranges(self, requests: Sequence[tuple[str, ByteRange | None, Any]]
                             ) -> list[tuple[bytes | None, Any]]:
        """Byte ranges of several keys as one batch, each ``(bytes, generation)``: the
        generation (as ``get_versioned`` gives it) of the object the range was read from,
        ``(None, ABSENT)`` for a missing key. The third item of a request pins it: ``ANY``
        reads whatever is stored; a generation reads the range only from that version of
        the object, and ``(None, CHANGED)`` when it was replaced or deleted meanwhile (S3:
        a GET with ``If-Match: <ETag>``, and the ETag of the answer checked). A reader of
        one object in several calls (a shard's index, then its inner chunks) so reads one
        version of it, whatever other writers do in between.

        The default (a store without versions to pin to) reads with ``get_ranges`` and
        answers ``ANY`` as every generation (``ABSENT`` when missing); its ranges of one
        key in one call come from one version only with ``capabilities.snapshot_ranges``.
        Only a generation this call returned may pin a request: a store that answers
        ``ANY`` cannot check one (ValueError)."""
        return unversioned_ranges(self, requests, self.get_ranges)

    def get_views(self, keys: Sequence[str], max_bytes: int | None = None
                  ) -> list[BytesLike | None]:
        """Values of ``keys`` as read-only buffers, as one batch (None for missing ones;
        ``max_bytes`` as for ``get_many``).

        A view shows the value stored when it was looked up (writes replace values, they
        do not change a view handed out). Only ``capabilities.zero_copy_views`` stores avoid copies;
        the default is ``get_many``.
        """
        return bounded_get_many(self, keys, max_bytes)

    @contextmanager
    def read_session(self) -> Iterator[Reader]:
        """A :class:`Reader` for the reads of one operation (one array read), from any
        number of threads, valid inside the ``with`` block. A store may keep what they
        share open meanwhile (a local store: its directories)."""
        yield Reader(self)

    def set_many(self, items: Mapping[str, BytesLike] | Iterable[tuple[str, BytesLike]]) -> None:
        """Store several values as one batch (each key replaced atomically)."""
        pairs = items.items() if isinstance(items, Mapping) else items
        for key, value in pairs:
            self.set(key, value)

    def delete_many(self, keys: Iterable[str]) -> None:
        """Delete several keys as one batch; missing keys are ignored."""
        for key in keys:
            self.delete(key)

    def delete_prefix(self, prefix: str) -> None:
        """Delete every key under the directory ``prefix`` (``""`` clears the store)."""
        self.delete_many(list(self.list_prefix(normalize_prefix(prefix))))

