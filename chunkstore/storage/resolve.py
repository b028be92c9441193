"""Turn a ``store=`` argument into a Store."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, MutableMapping
from typing import Any

from .base import Store
from .errors import InvalidStoreError
from .fsspec_setup import protocols
from .fsspec_store import FsspecStore
from .local import LocalStore
from .memory import MemoryStore
from .zip import ZipStore

#: the environment variable choosing the default backend of s3:// URLs
BACKEND_VARIABLE = "CHUNKSTORE_S3_BACKEND"
BACKENDS = ("fsspec", "obstore")

_ZIP_MODES = {"r": "r", "w": "w"}  # every other mode appends
#: "64MB", "1 GiB", "200kb", "1.5G": what a memory size looks like
_BYTE_SIZE = re.compile(r"\s*\d+(\.\d*)?\s*([kmgtpe]i?b?|b)\s*", re.IGNORECASE)
#: fsspec wrappers that only cache what they wrap: over local files they are dropped
_CACHES = {"simplecache", "filecache", "blockcache", "cached"}


def _is_url(path: str) -> bool:
    return "://" in path or "::" in path


def looks_like_byte_size(text: str) -> bool:
    """Whether ``text`` reads as a memory size (``"64MB"``, ``"1GiB"``, ``"200KB"``)."""
    return _BYTE_SIZE.fullmatch(text) is not None


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
    """The store of a remote URL: FsspecStore, or ObstoreStore for an ``s3://`` URL whose
    ``storage_options`` say ``backend="obstore"`` (default: ``CHUNKSTORE_S3_BACKEND``,
    else fsspec). Every other scheme is fsspec's."""
    options = dict(storage_options or {})
    backend = options.pop("backend", None)
    chain = protocols(url)
    s3 = len(chain) == 1 and chain[0] in ("s3", "s3a")
    if backend is None:
        backend = (os.environ.get(BACKEND_VARIABLE) or "fsspec") if s3 else "fsspec"
    backend = str(backend).lower()
    if backend not in BACKENDS:
        raise InvalidStoreError(f"{url}: unknown storage backend {backend!r} (known: "
                                f"{', '.join(BACKENDS)})")
    if backend == "obstore":
        if not s3:
            raise InvalidStoreError(f"{url}: the obstore backend takes plain s3:// URLs only; "
                                    "other URLs use fsspec")
        from .obstore_store import ObstoreStore
        return ObstoreStore(url, options, read_only=read_only)
    return FsspecStore(url, options, read_only=read_only)


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
    * another URL (``s3://``, ``gs://``, ``memory://``, ``zip::...``) -> FsspecStore, with
      ``storage_options``; an ``s3://`` URL with ``storage_options={"backend": "obstore"}``
      (or ``CHUNKSTORE_S3_BACKEND=obstore`` in the environment) -> ObstoreStore
    * a path ending in ``.zip`` -> ZipStore (mode ``"r"`` -> ``"r"``, ``"w"`` -> ``"w"``,
      anything else -> ``"a"``)
    * any other path -> LocalStore; but a string that reads as a memory size
      (``"64MB"``) is refused as a likely mix-up of arguments (``"./64MB"`` is a path)
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
    if isinstance(store, MutableMapping):
        return MemoryStore(store, read_only=read_only)
    if isinstance(store, Mapping):
        return MemoryStore(store, read_only=True)  # type: ignore[arg-type]
    raise TypeError(f"store must be None, a path, a URL, a Store or a dict-like mapping, "
                    f"got {type(store).__name__}: {store!r}")
