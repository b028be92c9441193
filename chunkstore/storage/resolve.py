"""Turn a ``store=`` argument into a Store."""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from typing import Any

from chunkstore.sizes import looks_like_byte_size
from chunkstore.storage.base import Store
from chunkstore.storage.errors import InvalidStoreError
from chunkstore.storage.fsspec.setup import protocols
from chunkstore.storage.local.store import LocalStore
from chunkstore.storage.memory import MemoryStore
from chunkstore.storage.s3_backend import s3_store
from chunkstore.storage.zarr_stores import from_zarr_store
from chunkstore.storage.zip.store import ZipStore

#: every mode but "r" appends: "w" (overwrite) replaces the node opened, not the archive;
#: the hierarchy deletes that node's keys as on a directory (``place_node``)
_ZIP_MODES = {"r": "r"}
#: fsspec wrappers that only cache what they wrap: over local files they are dropped
_CACHES = {"simplecache", "filecache", "blockcache", "cached"}


def _is_url(path: str) -> bool:
    return "://" in path or "::" in path


def _local_path(url: str, storage_options: dict | None) -> str | None:
    """The local path a ``file://`` URL names, also through caching wrappers
    (``simplecache::file://...``); None for any other URL."""
    from fsspec.implementations.local import LocalFileSystem

    chain = protocols(url)
    if chain[-1] not in ("file", "local") or not set(chain[:-1]) <= _CACHES:
        return None
    unknown = set(storage_options or {}) - _CACHES
    if unknown:
        raise TypeError(f"storage_options {sorted(unknown)} do not apply to local file URLs "
                        f"such as {url!r}")
    return LocalFileSystem._strip_protocol(url.rsplit("::", 1)[-1])


def _remote_store(url: str, storage_options: dict | None, read_only: bool) -> Store:
    """The store of a remote URL: an ObstoreStore for a plain ``s3://`` URL when obstore
    is installed and can take ``storage_options``, else an FsspecStore (which says why
    on S3); ``backend="fsspec" | "obstore"`` in ``storage_options`` (or the
    ``CHUNKSTORE_S3_BACKEND`` variable) decides instead. See ``s3_backend``."""
    options = dict(storage_options or {})
    requested = options.pop("backend", None)
    return s3_store(url, options, read_only, requested)


def _path_store(path: str, mode: str, read_only: bool) -> Store:
    if path.lower().endswith(".zip"):
        return ZipStore(path, mode=_ZIP_MODES.get(mode, "a"))
    return LocalStore(path, read_only=read_only)


def resolve_store(store: Any, *, mode: str = "a", storage_options: dict | None = None) -> Store:
    """The Store a ``store=`` argument names.

    * None -> a new MemoryStore
    * a Store -> itself (a read-only view of it in mode ``"r"``)
    * a ``file://`` URL (also behind caching wrappers such as ``simplecache::``) -> the
      store of its path (below), confined like any LocalStore
    * an ``s3://`` URL (or ``s3a://``) -> ObstoreStore when obstore is installed and can
      express ``storage_options``, else an FsspecStore whose ``backend_reason`` says why;
      ``storage_options={"backend": "fsspec"}`` (or ``"obstore"``), or the
      ``CHUNKSTORE_S3_BACKEND`` environment variable, chooses instead (``s3_backend``)
    * another URL (``gs://``, ``memory://``, ``zip::...``) -> FsspecStore, with
      ``storage_options``
    * a path ending in ``.zip`` -> ZipStore (mode ``"r"`` -> ``"r"``, anything else,
      ``"w"`` included, -> ``"a"``: overwriting a node replaces that node's entries and
      keeps the rest of the archive, as on a directory)
    * any other path -> LocalStore; but a string that reads as a memory size
      (``"64MB"``) is refused as a likely mix-up of arguments (``"./64MB"`` is a path)
    * a zarr-python store object (LocalStore, MemoryStore, FsspecStore, ZipStore) -> the
      chunkstore store on the same data (``zarr_stores``)
    * a dict-like mapping of str -> bytes -> a MemoryStore on that mapping

    >>> type(resolve_store("data.zarr")).__name__
    'LocalStore'
    """
    read_only = mode == "r"
    named_path = isinstance(store, os.PathLike)  # Path("64MB") is a path, whatever its name
    if named_path:
        store = os.fspath(store)
    if storage_options and not (isinstance(store, str) and _is_url(store)):
        raise TypeError(f"storage_options only apply to URL stores (e.g. 's3://...'), "
                        f"not to store {store!r}")
    if store is None:
        return MemoryStore()
    if isinstance(store, Store):
        return store.with_read_only(True) if read_only and not store.read_only else store
    if isinstance(store, str):
        local = _local_path(store, storage_options) if _is_url(store) else None
        if local is not None:
            return _path_store(local, mode, read_only)
        if _is_url(store):
            return _remote_store(store, storage_options, read_only)
        if not named_path and looks_like_byte_size(store):
            raise InvalidStoreError(
                f"store {store!r} looks like a memory size, not a store path (arguments in "
                "the wrong order? e.g. rechunk(source, target_chunks, store, max_mem=...)); "
                f"write './{store.strip()}' to mean a directory of that name")
        return _path_store(store, mode, read_only)
    converted = from_zarr_store(store, read_only)
    if converted is not None:
        return converted
    if isinstance(store, MutableMapping):
        return MemoryStore(store, read_only=read_only)
    if isinstance(store, Mapping):
        return MemoryStore(store, read_only=True)  # type: ignore[arg-type]
    raise TypeError(f"store must be None, a path, a URL, a Store (chunkstore's, or zarr-python's "
                    f"LocalStore, MemoryStore, FsspecStore or ZipStore) or a dict-like mapping, "
                    f"got {type(store).__name__}: {store!r}")
