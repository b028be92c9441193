"""FsspecStore: any fsspec filesystem (s3fs, gcsfs, local, memory)."""

from chunkstore.storage.fsspec.store import FsspecStore

__all__ = ["FsspecStore"]
