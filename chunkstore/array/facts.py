"""What the modules around ``Array`` need of it, as Protocols (``array.Array`` imports
them, so they cannot import it): where an array is stored, and the facts of its grid."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from chunkstore.io.layout import ChunkLayout
from chunkstore.metadata import ArrayMetadata
from chunkstore.storage.base import Store


class Placed(Protocol):
    """Where an Array is stored: what tells whether a value reads it."""

    @property
    def store(self) -> Store: ...
    @property
    def path(self) -> str: ...


class ArrayFacts(Placed, Protocol):
    """An Array's name, shape, dtype, metadata and chunk layout, besides where it is
    stored."""

    @property
    def name(self) -> str: ...
    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def ndim(self) -> int: ...
    @property
    def dtype(self) -> np.dtype: ...
    @property
    def metadata(self) -> ArrayMetadata: ...
    @property
    def layout(self) -> ChunkLayout: ...
