"""chunkstore: chunked, compressed N-d arrays in the Zarr format (v2 and v3), with
Dask-scale rechunk and transpose on a laptop or a distributed cluster."""

from .api import (
    array,
    create_array,
    empty,
    empty_like,
    full,
    full_like,
    ones,
    ones_like,
    open,
    open_array,
    zeros,
    zeros_like,
)
from .array import Array
from .errors import (
    ChunkDecodeError,
    ChunkstoreError,
    CodecError,
    ContainsArrayError,
    ContainsGroupError,
    InvalidKeyError,
    MetadataError,
    NodeNotFoundError,
    NodeTypeError,
    ReadOnlyError,
    UnsupportedError,
)
from .storage import LocalStore, MemoryStore, Store
from .sync import ProcessSynchronizer, ThreadSynchronizer

__version__ = "0.1.0"

__all__ = [
    "Array", "ChunkDecodeError", "ChunkstoreError", "CodecError", "ContainsArrayError",
    "ContainsGroupError", "InvalidKeyError", "LocalStore", "MemoryStore", "MetadataError",
    "NodeNotFoundError", "NodeTypeError", "ProcessSynchronizer", "ReadOnlyError", "Store",
    "ThreadSynchronizer", "UnsupportedError", "array",
    "create_array", "empty", "empty_like", "full", "full_like", "ones", "ones_like", "open",
    "open_array", "zeros", "zeros_like",
]
