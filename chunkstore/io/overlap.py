"""Whether two arrays of two stores occupy the same place: writing one would destroy the
other (a rechunk, transpose or copy onto its own source with ``overwrite=True`` would
delete the source before reading it).

The place of a node is its object reference (``storage.reference``): the store's
canonical root joined with the node's path, symlinked directories resolved, so a store
rooted at ``g.zarr/arr`` and a store rooted at ``g.zarr`` with path ``arr`` are the same
place (through any spelling of the root: relative, symlinked, ``file://``, ``memory://``),
and ``g.zarr`` contains both.
"""

from __future__ import annotations

from typing import Any

from chunkstore.errors import SameLocationError
from chunkstore.storage.base import Store
from chunkstore.storage.reference import node_ref, same_or_within


def place(store: Store, path: str) -> tuple[Any, list[str]]:
    """``(namespace, components)`` of the node ``path`` of ``store``: two places overlap
    when their namespaces are equal and one component list starts with the other."""
    ref = node_ref(store, path)
    return ref.namespace, list(ref.parts)


def overlaps(store_a: Store, path_a: str, store_b: Store, path_b: str) -> bool:
    """True when one array's place is the other's or lies below it."""
    return same_or_within(store_a, path_a, store_b, path_b)


def refuse_onto_itself(source: Any, store: Store, path: str, what: str) -> None:
    """Raise SameLocationError when writing ``store``/``path`` would overwrite the Array
    ``source`` (or the array under it)."""
    if overlaps(source.store, source.path, store, path):
        raise SameLocationError(
            f"{what}: the target {path or '/'!r} in {store!r} is the source array "
            f"{source.name!r} of {source.store!r}, contains it or lies inside it (the same "
            "place); writing it would destroy the source before it is read. Write to a new "
            "path (or store), then remove or rename the old one")
