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
from .group import Group
from .group_api import consolidate_metadata, group, open_group
from .saving import (
    copy,
    create,
    create_group,
    from_array,
    load,
    open_consolidated,
    open_like,
    save,
    save_array,
    save_group,
)
from .storage import FsspecStore, LocalStore, MemoryStore, Store, ZipStore
from .sync import ProcessSynchronizer, ThreadSynchronizer

__version__ = "0.1.0"

__all__ = [
    "Array", "Group", "consolidate_metadata", "copy", "create", "create_group", "from_array",
    "group", "load", "open_consolidated", "open_group", "open_like", "save", "save_array",
    "save_group",
    "ChunkDecodeError", "ChunkstoreError", "CodecError", "ContainsArrayError",
    "ContainsGroupError", "FsspecStore", "InvalidKeyError", "LocalStore", "MemoryStore",
    "MetadataError", "ZipStore",
    "NodeNotFoundError", "NodeTypeError", "ProcessSynchronizer", "ReadOnlyError", "Store",
    "ThreadSynchronizer", "UnsupportedError", "array",
    "create_array", "empty", "empty_like", "full", "full_like", "ones", "ones_like", "open",
    "open_array", "zeros", "zeros_like",
]


def __getattr__(name: str):
    # ``cs.dask`` without importing dask/distributed at ``import chunkstore`` time
    if name == "dask":
        import importlib
        return importlib.import_module(".dask", __name__)
    raise AttributeError(f"module 'chunkstore' has no attribute {name!r}")
