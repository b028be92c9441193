"""``attrs``: a dict-like view of a node's user attributes that persists on every change."""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

from .metadata.json_io import check_json_value


class Attributes(MutableMapping[str, Any]):
    """Reads come from the node's metadata; each write rewrites the metadata document
    atomically. Values must be plain JSON (no NaN, no objects)."""

    def __init__(self, get: Callable[[], dict[str, Any]], put: Callable[[dict[str, Any]], None],
                 where: str) -> None:
        self._get, self._put, self._where = get, put, where

    def __getitem__(self, key: str) -> Any:
        return self._get()[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.update({key: value})

    def __delitem__(self, key: str) -> None:
        attrs = dict(self._get())
        del attrs[key]
        self._put(attrs)

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self._get()))

    def __len__(self) -> int:
        return len(self._get())

    def _checked(self, new: dict[Any, Any]) -> dict[str, Any]:
        for key in new:
            if not isinstance(key, str):
                raise TypeError(f"{self._where}: attribute names must be str, got {key!r}")
        return check_json_value(new, f"{self._where}: attributes")

    def update(self, *args: Any, **kwargs: Any) -> None:  # one document write for many keys
        checked = self._checked(dict(*args, **kwargs))
        self._put({**self._get(), **checked})

    def clear(self) -> None:  # one document write, not one per key
        self._put({})

    def put(self, attrs: dict[str, Any]) -> None:
        """Replace all attributes at once."""
        self._put(self._checked(dict(attrs)))

    def asdict(self) -> dict[str, Any]:
        """A plain-dict copy of the attributes."""
        return dict(self._get())

    def __repr__(self) -> str:
        return f"Attributes({self._get()!r})"
