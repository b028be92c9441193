"""zarr-python's store objects where chunkstore takes a store, recognised by what they
hold (chunkstore never imports zarr): the chunkstore store on the same data.

* ``LocalStore`` (``.root``, a directory) -> :class:`LocalStore` of that directory;
* ``MemoryStore`` (``._store_dict``) -> :class:`MemoryStore` over the same dict, whose
  values zarr keeps as its ``Buffer`` objects: read as bytes, written as Buffers of the
  class zarr already uses (so both see every write);
* ``FsspecStore`` (``.fs`` and ``.path``) -> :class:`FsspecStore` of the same URL and
  options (a filesystem of its own: zarr's runs on zarr's event loop);
* ``ZipStore`` (``.path`` of its file) -> :class:`ZipStore` of that file, in mode
  "r" when zarr's store is read-only, else "a" (never truncating what zarr wrote; close
  zarr's store first, so that its writes are in the file).

The zarr store's ``read_only`` flag carries over.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, MutableMapping
from typing import Any

from chunkstore.storage.base import Store
from chunkstore.storage.errors import InvalidStoreError
from chunkstore.storage.fsspec.store import FsspecStore
from chunkstore.storage.local.store import LocalStore
from chunkstore.storage.memory import MemoryStore
from chunkstore.storage.zip.store import ZipStore

#: options of zarr's asynchronous filesystems that a synchronous one must not get
_ASYNC_OPTIONS = ("asynchronous", "loop")


def is_zarr_store(store: Any) -> bool:
    """Whether ``store`` is a zarr-python store object (by its class's module)."""
    module = getattr(type(store), "__module__", "") or ""
    return module == "zarr" or module.startswith("zarr.")


class _BufferDict(MutableMapping[str, bytes]):
    """A zarr MemoryStore's dict of ``Buffer`` values, seen as a dict of bytes."""

    def __init__(self, data: MutableMapping[str, Any]) -> None:
        self.data = data

    def __getitem__(self, key: str) -> bytes:
        value = self.data[key]
        return value.to_bytes() if hasattr(value, "to_bytes") else bytes(value)

    def __setitem__(self, key: str, value: bytes) -> None:
        self.data[key] = _zarr_buffer().from_bytes(bytes(value))

    def __delitem__(self, key: str) -> None:
        del self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self.data))

    def __len__(self) -> int:
        return len(self.data)

    def __contains__(self, key: object) -> bool:
        return key in self.data


def _zarr_buffer() -> Any:
    """The CPU ``Buffer`` class of the zarr-python that made the store (already loaded:
    its store exists), which its MemoryStore reads values as."""
    module = sys.modules.get("zarr.core.buffer.cpu")
    if module is None:
        raise InvalidStoreError("cannot write to a zarr-python MemoryStore: zarr's buffer "
                                "module (zarr.core.buffer.cpu) is not loaded")
    return module.Buffer


class ZarrMemoryStore(MemoryStore):
    """A MemoryStore on a zarr MemoryStore's dict (its identity: that dict)."""

    def location(self) -> Any:
        return ("memory", id(self._inner))

    @property
    def _inner(self) -> Any:
        return self._data.data  # type: ignore[attr-defined]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MemoryStore) and other.location() == self.location()

    def __hash__(self) -> int:
        return id(self._inner)

    def __dask_tokenize__(self) -> tuple[Any, ...]:
        return ("MemoryStore", id(self._inner))


def _fsspec_store(zarr_store: Any, read_only: bool) -> Store:
    fs = getattr(zarr_store.fs, "sync_fs", zarr_store.fs)  # (zarr wraps sync filesystems)
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    if protocol in ("file", "local"):  # confined, with conditional commits
        return LocalStore(zarr_store.path, read_only=read_only)
    options = {k: v for k, v in dict(fs.storage_options).items() if k not in _ASYNC_OPTIONS}
    return FsspecStore(fs.unstrip_protocol(zarr_store.path), options, read_only)


def from_zarr_store(store: Any, read_only: bool) -> Store | None:
    """The chunkstore store on the data of the zarr-python store ``store`` (see the
    module docstring), read-only if either says so; None when ``store`` is not a
    zarr store chunkstore knows."""
    if not is_zarr_store(store):
        return None
    read_only = read_only or bool(getattr(store, "read_only", False))
    if isinstance(getattr(store, "_store_dict", None), MutableMapping):
        return ZarrMemoryStore(_BufferDict(store._store_dict), read_only=read_only)
    if hasattr(store, "fs") and isinstance(getattr(store, "path", None), str):
        return _fsspec_store(store, read_only)
    root = getattr(store, "root", None)
    if isinstance(root, str | os.PathLike):
        return LocalStore(os.fspath(root), read_only=read_only)
    path = getattr(store, "path", None)
    if type(store).__name__ == "ZipStore" and isinstance(path, str | os.PathLike):
        return ZipStore(path, mode="r" if read_only else "a")
    return None
