"""Turn a ``store=`` argument into a Store."""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from typing import Any

from .base import Store
from .fsspec_store import FsspecStore
from .local import LocalStore
from .memory import MemoryStore
from .zip import ZipStore

_ZIP_MODES = {"r": "r", "w": "w"}  # every other mode appends


def _is_url(path: str) -> bool:
    return "://" in path or "::" in path


def resolve_store(store: Any, *, mode: str = "a", storage_options: dict | None = None) -> Store:
    """The Store a ``store=`` argument names.

    * None -> a new MemoryStore
    * a Store -> itself (a read-only view of it in mode ``"r"``)
    * a URL (``s3://``, ``gs://``, ``memory://``, ``file://``, ``zip::...``) -> FsspecStore,
      with ``storage_options``
    * a path ending in ``.zip`` -> ZipStore (mode ``"r"`` -> ``"r"``, ``"w"`` -> ``"w"``,
      anything else -> ``"a"``)
    * any other path -> LocalStore
    * a dict-like mapping of str -> bytes -> a MemoryStore on that mapping

    >>> type(resolve_store("data.zarr")).__name__
    'LocalStore'
    """
    read_only = mode == "r"
    if isinstance(store, os.PathLike):
        store = os.fspath(store)
    if storage_options and not (isinstance(store, str) and _is_url(store)):
        raise TypeError(f"storage_options only apply to URL stores (e.g. 's3://...'), "
                        f"not to store {store!r}")
    if store is None:
        return MemoryStore()
    if isinstance(store, Store):
        return store.with_read_only(True) if read_only and not store.read_only else store
    if isinstance(store, str):
        if _is_url(store):
            return FsspecStore(store, storage_options, read_only=read_only)
        if store.lower().endswith(".zip"):
            return ZipStore(store, mode=_ZIP_MODES.get(mode, "a"))
        return LocalStore(store, read_only=read_only)
    if isinstance(store, MutableMapping):
        return MemoryStore(store, read_only=read_only)
    if isinstance(store, Mapping):
        return MemoryStore(store, read_only=True)  # type: ignore[arg-type]
    raise TypeError(f"store must be None, a path, a URL, a Store or a dict-like mapping, "
                    f"got {type(store).__name__}: {store!r}")
