"""The convenience functions of zarr-python 3, by job: creating arrays (``creation``),
opening nodes by mode (``opening``), saving and loading (``persistence``), copying
(``copying``) and consolidating metadata (``consolidation``)."""

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
from chunkstore.api.persistence import LoadedGroup, load, save, save_array, save_group

__all__ = [
    "LoadedGroup", "array", "consolidate_metadata", "copy", "create", "create_array",
    "create_group", "empty", "empty_like", "from_array", "full", "full_like", "group", "load",
    "ones", "ones_like", "open", "open_array", "open_consolidated", "open_group", "open_like",
    "save", "save_array", "save_group", "zeros", "zeros_like",
]
