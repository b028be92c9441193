"""Wrapper stores: behaviour that cuts across backends, put around any store.

* :class:`WrapperStore` forwards every call to the store it wraps (its ``inner``) and
  shows the same data, location, capabilities and read-only flag: a subclass overrides
  only the calls it adds something to.
* :class:`MetricsStore` counts the calls made to it and the bytes they moved (what a
  test or a benchmark asserts about requests: one batched call counts once, as one
  round trip of a remote store would).
* :class:`LatencyStore` waits a fixed time in every call, as a remote store's round trip
  would (a local directory that behaves like S3 at 20 ms per request).

Wrappers pickle as their inner store plus their options, so Dask workers re-open them.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from chunkstore.storage.base import ByteRange, BytesLike, Commit, Reader, Store
from chunkstore.storage.capabilities import Capabilities


class WrapperStore(Store):
    """A store that forwards every call to ``inner`` (see the module docstring)."""

    def __init__(self, inner: Store) -> None:
        if not isinstance(inner, Store):
            raise TypeError(f"{type(self).__name__} wraps a chunkstore Store, got "
                            f"{type(inner).__name__}")
        super().__init__(inner.read_only)
        self.inner = inner

    # -- identity: the inner store's ----------------------------------------------------
    @property
    def capabilities(self) -> Capabilities:  # type: ignore[override]
        """The inner store's capabilities."""
        return self.inner.capabilities

    @property
    def read_only(self) -> bool:
        """The inner store's read-only flag."""
        return self.inner.read_only

    def _options(self) -> tuple[Any, ...]:
        """The constructor arguments after ``inner`` (pickling, ``with_read_only``)."""
        return ()

    def _description(self) -> tuple[Any, ...]:
        return (self.inner, *self._options())

    def with_read_only(self, read_only: bool = True) -> Store:
        """The same wrapper around the inner store with the given read-only flag."""
        return type(self)(self.inner.with_read_only(read_only), *self._options())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"

    def __dask_tokenize__(self) -> tuple[Any, ...]:
        return (type(self).__name__, self.inner.__dask_tokenize__(), self._options())

    def location(self) -> Any:
        return self.inner.location()

    def sibling(self, suffix: str) -> Store | None:
        inner = self.inner.sibling(suffix)
        return None if inner is None else type(self)(inner, *self._options())

    def remove_root(self) -> None:
        self.inner.remove_root()

    def close(self) -> None:
        self.inner.close()

    def cache_tokens(self, keys: Sequence[str]) -> list[Any]:
        return self.inner.cache_tokens(keys)

    def timestamp_probe(self) -> Any:
        return self.inner.timestamp_probe()

    # -- calls --------------------------------------------------------------------------
    def _call(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run one call of the inner store (``name`` is the Store method): the hook that
        subclasses wrap."""
        return fn(*args, **kwargs)

    def get(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        return self._call("get", self.inner.get, key, byte_range)

    def set(self, key: str, value: BytesLike) -> None:
        self._call("set", self.inner.set, key, value)

    def delete(self, key: str) -> None:
        self._call("delete", self.inner.delete, key)

    def get_versioned_many(self, keys: Sequence[str], max_bytes: int | None = None
                           ) -> list[tuple[bytes | None, Any]]:
        return self._call("get_versioned_many", self.inner.get_versioned_many, keys, max_bytes)

    def commit_many(self, items: Sequence[Commit]) -> list[bool]:
        return self._call("commit_many", self.inner.commit_many, items)

    @contextmanager
    def commit_session(self) -> Iterator[Callable[[Sequence[Commit]], list[bool]]]:
        with self.inner.commit_session() as commit:
            yield lambda items: self._call("commit_many", commit, items)

    def exists(self, key: str) -> bool:
        return self._call("exists", self.inner.exists, key)

    def getsize(self, key: str) -> int | None:
        return self._call("getsize", self.inner.getsize, key)

    def list_prefix(self, prefix: str) -> Iterator[str]:
        return self._call("list_prefix", self.inner.list_prefix, prefix)

    def list_dir(self, prefix: str) -> Iterator[str]:
        return self._call("list_dir", self.inner.list_dir, prefix)

    def get_many(self, keys: Sequence[str], max_bytes: int | None = None
                 ) -> list[bytes | None]:
        return self._call("get_many", self.inner.get_many, keys, max_bytes)

    def get_ranges(self, requests: Sequence[tuple[str, ByteRange | None]],
                   object_size: int | None = None) -> list[bytes | None]:
        return self._call("get_ranges", self.inner.get_ranges, requests, object_size)

    def get_versioned_ranges(self, requests: Sequence[tuple[str, ByteRange | None, Any]]
                             ) -> list[tuple[bytes | None, Any]]:
        return self._call("get_versioned_ranges", self.inner.get_versioned_ranges, requests)

    def get_views(self, keys: Sequence[str], max_bytes: int | None = None
                  ) -> list[BytesLike | None]:
        return self._call("get_views", self.inner.get_views, keys, max_bytes)

    @contextmanager
    def read_session(self) -> Iterator[Reader]:
        with self.inner.read_session() as reader:
            yield _WrappedReader(self, reader)

    def set_many(self, items: Mapping[str, BytesLike] | Iterable[tuple[str, BytesLike]]) -> None:
        self._call("set_many", self.inner.set_many, items)

    def delete_many(self, keys: Iterable[str]) -> None:
        self._call("delete_many", self.inner.delete_many, keys)

    def delete_prefix(self, prefix: str) -> None:
        self._call("delete_prefix", self.inner.delete_prefix, prefix)


def unwrapped(store: Store) -> Store:
    """The store under any wrappers (``WrapperStore.inner``, repeatedly): the one whose
    data, keys and files they all show."""
    while isinstance(store, WrapperStore):
        store = store.inner
    return store


class _WrappedReader(Reader):
    """The inner store's reader, its calls passed through the wrapper's hook."""

    def __init__(self, wrapper: WrapperStore, reader: Reader) -> None:
        super().__init__(wrapper)
        self._wrapper = wrapper
        self._reader = reader

    def get(self, key: str, max_bytes: int | None = None) -> BytesLike | None:
        return self._wrapper._call("get", self._reader.get, key, max_bytes)

    def read_into(self, key: str, array: Any) -> bool:
        return self._wrapper._call("read_into", self._reader.read_into, key, array)


def _moved(value: Any) -> int:
    """Bytes in a call's result (values, lists of values, (value, generation) pairs);
    a value is any buffer: bytes, a view, a memory map, an array."""
    if value is None or isinstance(value, bool | int):
        return 0
    if isinstance(value, tuple):
        return _moved(value[0])
    if isinstance(value, list):
        return sum(_moved(v) for v in value)
    try:
        with memoryview(value) as view:  # released at once: a map stays closable
            return view.nbytes
    except TypeError:
        return 0


class _Counts:
    """What a MetricsStore counted, shared with its read-only views."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: Counter[str] = Counter()
        self.bytes_read = 0


class MetricsStore(WrapperStore):
    """Counts the calls made to it (``calls["get_many"]``...) and the bytes the reads
    returned (``bytes_read``); a call the inner store makes up of other calls counts
    once. ``reset()`` starts again. Thread-safe. Its ``with_read_only`` views (what
    ``open_array(..., mode="r")`` reads through) count into the same counters; a
    pickled copy (a Dask worker's) counts its own."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self._counts = _Counts()

    def with_read_only(self, read_only: bool = True) -> Store:
        """The same counters around the inner store with the given read-only flag."""
        clone = super().with_read_only(read_only)
        clone._counts = self._counts  # type: ignore[attr-defined]
        return clone

    @property
    def calls(self) -> Counter[str]:
        """The number of calls made, by Store method name."""
        return self._counts.calls

    @property
    def bytes_read(self) -> int:
        """Bytes the reads returned."""
        return self._counts.bytes_read

    def reset(self) -> None:
        """Forget what was counted."""
        counts = self._counts
        with counts.lock:
            counts.calls.clear()
            counts.bytes_read = 0

    @property
    def requests(self) -> int:
        """All calls counted."""
        return sum(self.calls.values())

    def _call(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        out = fn(*args, **kwargs)
        moved = _moved(out) if name.startswith("get") else 0
        if name == "read_into" and out:
            moved = args[1].nbytes
        counts = self._counts
        with counts.lock:
            counts.calls[name] += 1
            counts.bytes_read += moved
        return out


class LatencyStore(WrapperStore):
    """Waits ``seconds`` in every call before making it (a remote store's round trip);
    batched calls wait once, as one round trip of concurrent requests would."""

    def __init__(self, inner: Store, seconds: float) -> None:
        super().__init__(inner)
        if not seconds >= 0:
            raise ValueError(f"LatencyStore: seconds must be >= 0, got {seconds!r}")
        self.seconds = float(seconds)

    def _options(self) -> tuple[Any, ...]:
        return (self.seconds,)

    def __repr__(self) -> str:
        return f"LatencyStore({self.inner!r}, {self.seconds!r})"

    def _call(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        time.sleep(self.seconds)
        return fn(*args, **kwargs)
