"""Turn a ``store=`` argument into a Store (placeholder until zip/fsspec land)."""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from typing import Any

from .base import Store
from .local import LocalStore
from .memory import MemoryStore


def resolve_store(store: Any, *, mode: str = "a", storage_options: dict | None = None) -> Store:
    """None -> MemoryStore; Store -> itself; path -> LocalStore; mapping -> MemoryStore."""
    if store is None:
        return MemoryStore()
    if isinstance(store, Store):
        return store.with_read_only(True) if mode == "r" and not store.read_only else store
    if isinstance(store, str | os.PathLike):
        return LocalStore(store, read_only=mode == "r")
    if isinstance(store, MutableMapping):
        return MemoryStore(store, read_only=mode == "r")
    raise TypeError(f"store must be None, a path, a Store or a mapping, got {type(store).__name__}")
