"""Errors of the storage layer: a store that cannot be opened or reached, named.

Each is a :class:`~chunkstore.errors.ChunkstoreError` (so the CLI prints it as one line)
and also the built-in exception that code written against plain Python expects
(``OSError`` for an unreachable store, ``ImportError`` for a missing package, ...).
"""

from __future__ import annotations

import zipfile

from chunkstore.errors import ChunkstoreError


class StoreError(ChunkstoreError, OSError):
    """A store could not be read or written (unreachable endpoint, I/O failure); the
    message names the store and the key."""


class BadArchiveError(StoreError, zipfile.BadZipFile):
    """A zip archive is not one, is truncated, or holds an entry that cannot be read
    safely (larger than declared or than the allowed size, encrypted)."""


class MissingBackendError(ChunkstoreError, ImportError):
    """A URL needs an fsspec backend package that is not installed; the message says
    which and how to install it."""


class InvalidStoreError(ChunkstoreError, ValueError):
    """A ``store=`` argument cannot name a store (unknown URL protocol, a memory size
    given where a store belongs)."""
