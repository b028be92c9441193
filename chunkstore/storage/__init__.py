"""Key-value stores: the byte layer under arrays and groups."""

from .base import ByteRange, Store, validate_key
from .errors import BadArchiveError, InvalidStoreError, MissingBackendError, StoreError
from .fsspec_store import FsspecStore
from .local import LocalStore
from .memory import MemoryStore
from .zip import ZipStore

__all__ = ["BadArchiveError", "ByteRange", "FsspecStore", "InvalidStoreError", "LocalStore",
           "MemoryStore", "MissingBackendError", "Store", "StoreError", "ZipStore",
           "validate_key"]
