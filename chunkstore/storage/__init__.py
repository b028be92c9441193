"""Key-value stores: the byte layer under arrays and groups."""

from chunkstore.storage.base import ByteRange, Store, validate_key
from chunkstore.storage.capabilities import Capabilities
from chunkstore.storage.errors import (
           BadArchiveError,
           InvalidStoreError,
           MissingBackendError,
           StoreError,
)
from chunkstore.storage.fsspec.store import FsspecStore
from chunkstore.storage.local.store import LocalStore
from chunkstore.storage.memory import MemoryStore
from chunkstore.storage.wrappers import LatencyStore, MetricsStore, WrapperStore
from chunkstore.storage.zip.store import ZipStore

__all__ = ["BadArchiveError", "ByteRange", "Capabilities", "FsspecStore", "InvalidStoreError",
           "LatencyStore", "LocalStore", "MemoryStore", "MetricsStore", "MissingBackendError",
           "Store", "StoreError", "WrapperStore", "ZipStore", "validate_key"]
