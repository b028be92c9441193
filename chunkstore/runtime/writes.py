"""Who hears about writes made through a store's own methods.

Layers above the stores that keep data between calls (the decoded-chunk cache) add a
listener here; a store that cannot tell its readers whether a value changed (no
``capabilities.cache_tokens``: fsspec, obstore, zip, a user's own Store subclass) calls
``Store._notify_written`` after each write, which reaches them with the keys (or the
prefix) it touched.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

#: ``listener(store, keys, prefix)``: ``keys`` written or deleted (a list), or ``prefix``
#: (a directory, "" for everything) deleted; exactly one of the two is not None
Listener = Callable[[Any, "list[str] | None", "str | None"], None]


class WriteListeners:
    """The listeners of writes made through stores' own methods, in one process."""

    def __init__(self) -> None:
        self._listeners: tuple[Listener, ...] = ()
        self._lock = threading.Lock()

    def add(self, listener: Listener) -> None:
        """Call ``listener`` after every write reported by a store (once, however often
        it is added)."""
        with self._lock:
            if listener not in self._listeners:
                self._listeners += (listener,)

    def remove(self, listener: Listener) -> None:
        """Stop calling ``listener`` (not an error if it was not added)."""
        with self._lock:
            self._listeners = tuple(x for x in self._listeners if x != listener)

    def notify(self, store: Any, keys: list[str] | None = None,
               prefix: str | None = None) -> None:
        """Tell every listener that ``keys`` (or everything below ``prefix``) of ``store``
        may have changed."""
        for listener in self._listeners:
            listener(store, keys, prefix)


#: the write listeners of this process
WRITE_LISTENERS = WriteListeners()
