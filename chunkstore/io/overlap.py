"""Whether two arrays of two stores occupy the same place: writing one would destroy the
other (a rechunk, transpose or copy onto its own source with ``overwrite=True`` would
delete the source before reading it)."""

from __future__ import annotations

from typing import Any

from ..errors import SameLocationError
from ..storage.base import Store


def _parts(path: str) -> list[str]:
    return [p for p in path.strip("/").split("/") if p]


def overlaps(store_a: Store, path_a: str, store_b: Store, path_b: str) -> bool:
    """True when both name the same store location and one path is the other or lies
    below it (paths compared by components, after resolving each store's location)."""
    if store_a.location() != store_b.location():
        return False
    a, b = _parts(path_a), _parts(path_b)
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def refuse_onto_itself(source: Any, store: Store, path: str, what: str) -> None:
    """Raise SameLocationError when writing ``store``/``path`` would overwrite the Array
    ``source`` (or the array under it)."""
    if overlaps(source.store, source.path, store, path):
        raise SameLocationError(
            f"{what}: the target {path or '/'!r} in {store!r} is the source array "
            f"{source.name!r} or contains it (same store location); writing it would destroy "
            "the source before it is read. Write to a new path (or store), then remove or "
            "rename the old one")
