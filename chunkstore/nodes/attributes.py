"""``attrs``: a dict-like view of a node's user attributes that persists on every change.

Every change is a read-modify-write of the *stored* attributes (through the node's
``mutate`` callback, i.e. ``nodes.documents.update_node``), never a rewrite of a cached
copy: processes setting distinct attributes of one node concurrently keep them all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any

from chunkstore.metadata.json_io import check_json_value

AttrsChange = Callable[[dict[str, Any]], dict[str, Any]]


class Attributes(MutableMapping[str, Any]):
    """User attributes of an array or group. Reads come from the node's metadata as last
    read or written; each write applies its change to the attributes as stored and
    commits atomically. Values must be plain JSON (no NaN, no objects).

    ``read()`` returns the current attributes; ``mutate(fn)`` applies ``fn(current) ->
    new`` to the stored attributes (possibly more than once, on conflicts) and returns
    the committed attributes."""

    def __init__(self, read: Callable[[], Mapping[str, Any]],
                 mutate: Callable[[AttrsChange], Mapping[str, Any]], where: str) -> None:
        self._read, self._mutate, self._where = read, mutate, where

    def __getitem__(self, key: str) -> Any:
        return self._read()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self._read()))

    def __len__(self) -> int:
        return len(self._read())

    def __contains__(self, key: object) -> bool:
        return key in self._read()

    def _checked(self, new: Mapping[Any, Any]) -> dict[str, Any]:
        for key in new:
            if not isinstance(key, str):
                raise TypeError(f"{self._where}: attribute names must be str, got {key!r}")
        return check_json_value(dict(new), f"{self._where}: attributes")

    def mutate(self, fn: AttrsChange) -> dict[str, Any]:
        """Apply ``fn(stored attributes) -> new attributes`` as one atomic update (``fn``
        gets a copy and may run again if another writer got in first); returns the
        committed attributes."""
        def change(current: dict[str, Any]) -> dict[str, Any]:
            return self._checked(fn(dict(current)))
        return dict(self._mutate(change))

    def __setitem__(self, key: str, value: Any) -> None:
        self.update({key: value})

    def __delitem__(self, key: str) -> None:
        def drop(current: dict[str, Any]) -> dict[str, Any]:
            del current[key]  # KeyError (nothing written) when it is not stored
            return current
        self.mutate(drop)

    def update(self, *args: Any, **kwargs: Any) -> None:  # one document write for many keys
        """Set several attributes with one atomic update."""
        new = self._checked(dict(*args, **kwargs))
        self.mutate(lambda current: {**current, **new})

    def clear(self) -> None:  # one document write, not one per key
        """Remove every attribute with one update."""
        self.mutate(lambda current: {})

    def put(self, attrs: Mapping[str, Any]) -> None:
        """Replace all attributes at once."""
        new = self._checked(attrs)
        self.mutate(lambda current: dict(new))

    def asdict(self) -> dict[str, Any]:
        """A plain-dict copy of the attributes."""
        return dict(self._read())

    def __repr__(self) -> str:
        return f"Attributes({dict(self._read())!r})"
