"""chunkstore: chunked, compressed N-d arrays in the Zarr format (v2 and v3), with
Dask-scale rechunk and transpose on a laptop or a distributed cluster."""

from chunkstore.api.consolidation import consolidate_metadata
from chunkstore.api.copying import copy
from chunkstore.api.creation import (
    array,
    create,
    create_array,
    empty,
    empty_like,
    from_array,
    full,
    full_like,
    ones,
    ones_like,
    zeros,
    zeros_like,
)
from chunkstore.api.opening import (
    create_group,
    group,
    open,
    open_array,
    open_consolidated,
    open_group,
    open_like,
)
from chunkstore.api.persistence import load, save, save_array, save_group
from chunkstore.array.array import Array
from chunkstore.config import config
from chunkstore.errors import (
    ChunkDecodeError,
    ChunkstoreError,
    CodecError,
    ConcurrentWriteError,
    ConditionalWritesWarning,
    ContainsArrayError,
    ContainsGroupError,
    ExternalDataError,
    InvalidKeyError,
    MetadataError,
    NodeNotFoundError,
    NodeTypeError,
    ReadOnlyError,
    StaleConsolidatedMetadataWarning,
    SynchronizerRequiredError,
    UnsupportedError,
)
from chunkstore.group.group import Group
from chunkstore.runtime.sync import ProcessSynchronizer, ThreadSynchronizer
from chunkstore.storage import FsspecStore, LocalStore, MemoryStore, Store, ZipStore

__version__ = "0.1.0"

__all__ = [
    "Array", "ChunkDecodeError", "ChunkstoreError", "CodecError", "ConcurrentWriteError",
    "ConditionalWritesWarning", "ContainsArrayError", "ContainsGroupError", "ExternalDataError",
    "FsspecStore", "Group", "InvalidKeyError",
    "LocalStore", "MemoryStore", "MetadataError", "NodeNotFoundError", "NodeTypeError",
    "ProcessSynchronizer", "ReadOnlyError", "StaleConsolidatedMetadataWarning", "Store",
    "SynchronizerRequiredError", "ThreadSynchronizer", "UnsupportedError",
    "ZipStore", "array", "config", "consolidate_metadata", "copy", "create", "create_array",
    "create_group", "empty", "empty_like", "from_array", "full", "full_like", "group", "load",
    "ones", "ones_like", "open", "open_array", "open_consolidated", "open_group", "open_like",
    "save", "save_array", "save_group", "zeros", "zeros_like",
]


def __getattr__(name: str):
    # ``cs.dask`` / ``cs.xarray`` without importing dask/distributed or xarray at
    # ``import chunkstore`` time
    if name in ("dask", "xarray"):
        import importlib
        return importlib.import_module(".dask" if name == "dask" else ".xarray_io", __name__)
    raise AttributeError(f"module 'chunkstore' has no attribute {name!r}")
