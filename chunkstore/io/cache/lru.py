"""A bounded, thread-safe LRU map: the one kind of cache the IO engines keep between calls
(shard indexes today). Bounded in entries and in bytes, so a scan over a huge array
cannot make it grow without limit."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Any


class LRUCache:
    """At most ``max_entries`` values of at most ``max_bytes`` in all (``size_of`` gives
    a value's size), least recently used dropped first.

    >>> c = LRUCache(max_entries=2)
    >>> c.put("a", 1); c.put("b", 2); c.put("c", 3)
    >>> c.get("a") is None, c.get("c")
    (True, 3)
    """

    def __init__(self, max_entries: int = 4096, max_bytes: int | None = None,
                 size_of: Callable[[Any], int] | None = None) -> None:
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self._size_of = size_of or (lambda _v: 0)
        self._data: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._nbytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._data)

    @property
    def nbytes(self) -> int:
        return self._nbytes

    def get(self, key: Hashable) -> Any:
        """The value of ``key`` (now the most recently used), or None."""
        with self._lock:
            entry = self._data.get(key)
            if entry is None:
                return None
            self._data.move_to_end(key)
            return entry[0]

    def put(self, key: Hashable, value: Any) -> None:
        size = self._size_of(value)
        if self.max_bytes is not None and size > self.max_bytes:
            self.discard([key])
            return
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._nbytes -= old[1]
            self._data[key] = (value, size)
            self._nbytes += size
            while len(self._data) > self.max_entries or (
                    self.max_bytes is not None and self._nbytes > self.max_bytes):
                _, (_, dropped) = self._data.popitem(last=False)
                self._nbytes -= dropped

    def discard(self, keys: Iterable[Hashable] | None = None) -> None:
        """Forget ``keys`` (everything when None)."""
        with self._lock:
            if keys is None:
                self._data.clear()
                self._nbytes = 0
                return
            for key in keys:
                old = self._data.pop(key, None)
                if old is not None:
                    self._nbytes -= old[1]
