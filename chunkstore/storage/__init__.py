"""Key-value stores: the byte layer under arrays and groups."""

from .base import ByteRange, Store, validate_key
from .local import LocalStore
from .memory import MemoryStore

__all__ = ["ByteRange", "Store", "LocalStore", "MemoryStore", "validate_key"]
