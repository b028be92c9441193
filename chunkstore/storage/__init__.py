"""Key-value stores: the byte layer under arrays and groups."""

from .base import ByteRange, Store, validate_key
from .fsspec_store import FsspecStore
from .local import LocalStore
from .memory import MemoryStore
from .zip import ZipStore

__all__ = ["ByteRange", "FsspecStore", "LocalStore", "MemoryStore", "Store", "ZipStore",
           "validate_key"]
