"""LocalStore: a directory of files, confined to its root, with atomic replaces and
conditional commits."""

from chunkstore.storage.local.store import LocalStore

__all__ = ["LocalStore"]
