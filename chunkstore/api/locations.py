"""Where a node is or goes: a ``store=``/``path=`` pair resolved as the entry points
resolve it (for layers above, such as the Dask layer, that take the same arguments)."""

from __future__ import annotations

from typing import Any

from chunkstore.group.group import Group
from chunkstore.metadata import join_path
from chunkstore.nodes.paths import normalize_path
from chunkstore.storage.base import Store
from chunkstore.storage.resolve import resolve_store


def in_group(store: Any, path: str | None) -> tuple[Any, str | None]:
    """``(store, path)`` with a Group given as the store resolved to its own store and
    the member path below it; anything else as given."""
    if isinstance(store, Group):
        rel = normalize_path(path)
        return store.store, join_path(store.path, rel) if rel else store.path
    return store, path


def resolve_location(store: Any, path: str | None = None, *,
                     storage_options: dict | None = None) -> tuple[Store, str]:
    """The Store and normalised path that ``store``/``path`` name: a Group (``path``
    below it), a directory path, ``*.zip``, an fsspec URL (with ``storage_options``), a
    Store or a mapping; InvalidStoreError (or ValueError for a bad path) otherwise."""
    store, path = in_group(store, path)
    return resolve_store(store, storage_options=storage_options), normalize_path(path)
