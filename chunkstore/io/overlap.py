"""Whether two arrays of two stores occupy the same place: writing one would destroy the
other (a rechunk, transpose or copy onto its own source with ``overwrite=True`` would
delete the source before reading it).

A store's ``location()`` is ``(kind, root, ...)``; where the root is a path (a resolved
directory, a bucket and prefix), the place of an array is that path joined with the
array's path, so a store rooted at ``g.zarr/arr`` and a store rooted at ``g.zarr`` with
path ``arr`` are the same place, and ``g.zarr`` contains both.
"""

from __future__ import annotations

from typing import Any

from ..errors import SameLocationError
from ..storage.base import Store

_OPAQUE = {"memory", "zip"}  # roots that are identities, not paths


def _parts(path: str) -> list[str]:
    return [p for p in path.replace("\\", "/").split("/") if p]


def place(store: Store, path: str) -> tuple[Any, list[str]]:
    """``(namespace, components)``: two places overlap when their namespaces are equal
    and one component list starts with the other."""
    loc = store.location()
    if len(loc) >= 2 and isinstance(loc[1], str) and loc[0] not in _OPAQUE:
        return (loc[0], *loc[2:]), _parts(loc[1]) + _parts(path)
    return loc, _parts(path)


def overlaps(store_a: Store, path_a: str, store_b: Store, path_b: str) -> bool:
    """True when one array's place is the other's or lies below it."""
    (ns_a, a), (ns_b, b) = place(store_a, path_a), place(store_b, path_b)
    if ns_a != ns_b:
        return False
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def refuse_onto_itself(source: Any, store: Store, path: str, what: str) -> None:
    """Raise SameLocationError when writing ``store``/``path`` would overwrite the Array
    ``source`` (or the array under it)."""
    if overlaps(source.store, source.path, store, path):
        raise SameLocationError(
            f"{what}: the target {path or '/'!r} in {store!r} is the source array "
            f"{source.name!r} of {source.store!r}, contains it or lies inside it (the same "
            "place); writing it would destroy the source before it is read. Write to a new "
            "path (or store), then remove or rename the old one")
