"""ZipStore: a zip archive, read in place and rewritten atomically."""

from chunkstore.storage.zip.store import ZipStore

__all__ = ["ZipStore"]
