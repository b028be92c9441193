"""Who hears about writes made through a store's public methods.

Layers above the stores that keep data between calls (the decoded-chunk cache) register
a listener; every ``set``, ``set_many``, ``delete``, ``delete_many``, ``delete_prefix``,
``commit_many``, ``set_if`` and ``remove_root`` of a store that cannot tell them itself
whether a value changed (a store without ``cache_tokens``: fsspec, obstore, zip, a
user's own Store subclass) calls them with the keys (or the prefix) it touched, after the
write — also when it failed half-way, since part of it may have landed. Listeners run
after the write so that a read that started before it cannot be kept as current (the
chunk cache refuses entries fetched before an invalidation).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

#: ``listener(store, keys, prefix)``: ``keys`` written or deleted (a list), or ``prefix``
#: (a directory, "" for everything) deleted; exactly one of the two is not None
Listener = Callable[[Any, "list[str] | None", "str | None"], None]
_listeners: list[Listener] = []


def add_listener(listener: Listener) -> None:
    """Call ``listener`` after every write of a store without ``cache_tokens``."""
    if listener not in _listeners:
        _listeners.append(listener)


def notify(store: Any, keys: list[str] | None = None, prefix: str | None = None) -> None:
    """Tell every listener that ``keys`` (or everything below ``prefix``) of ``store``
    may have changed."""
    for listener in list(_listeners):
        listener(store, keys, prefix)


def _pairs(items: Any) -> list[tuple[str, Any]]:
    return list(items.items()) if isinstance(items, Mapping) else list(items)


def _keyed(method: Callable, touched: Callable[[Any], list[str]]) -> Callable:
    """``method(self, first, *rest)`` that notifies ``touched(first)`` afterwards
    (``first`` is materialized first when it is an iterator, so both see all of it)."""
    @functools.wraps(method)
    def wrapper(self: Any, first: Any, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(first, str | Mapping | list | tuple):
            first = list(first)
        try:
            return method(self, first, *args, **kwargs)
        finally:
            notify(self, keys=touched(first))

    wrapper._notifies = True  # type: ignore[attr-defined]
    return wrapper


def _prefixed(method: Callable, fixed: str | None = None) -> Callable:
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        finally:
            notify(self, prefix=fixed if fixed is not None else str(args[0] if args else
                                                                     kwargs["prefix"]))

    wrapper._notifies = True  # type: ignore[attr-defined]
    return wrapper


def _keys_of_items(items: Iterable[Any]) -> list[str]:
    return [item[0] for item in _pairs(items)]


_KEYED: dict[str, Callable[[Any], list[str]]] = {
    "set": lambda key: [key],
    "delete": lambda key: [key],
    "set_if": lambda key: [key],
    "set_many": _keys_of_items,
    "commit_many": _keys_of_items,
    "delete_many": lambda keys: [keys] if isinstance(keys, str) else list(keys),
}


def instrument(cls: type) -> None:
    """Make the write methods of the store class ``cls`` notify the listeners (once per
    method; a subclass's own override is wrapped too)."""
    if getattr(cls, "cache_tokens", None) is not None:
        return  # its readers see every change through the tokens
    for name, touched in _KEYED.items():
        method = getattr(cls, name, None)
        if method is not None and not getattr(method, "_notifies", False):
            setattr(cls, name, _keyed(method, touched))
    for name, fixed in (("delete_prefix", None), ("remove_root", "")):
        method = getattr(cls, name, None)
        if method is not None and not getattr(method, "_notifies", False):
            setattr(cls, name, _prefixed(method, fixed))
