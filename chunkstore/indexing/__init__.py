"""Pure selection math: a selection -> the chunks it touches and where data goes.

No IO here. Every indexer yields ``ChunkProjection``s: for each touched chunk, the part
of the chunk (``chunk_selection``) and the part of the output (``out_selection``) that
correspond, and whether the chunk is covered entirely (so a write needs no read).

``axes`` (one selection item along one axis), ``projections`` (the indexers),
``numpy_rules`` (which indexer gives NumPy's answer), ``blocks`` (block selections).
"""

from chunkstore.indexing.axes import Selection, expand_ellipsis, normalize_int
from chunkstore.indexing.blocks import block_selection_to_basic
from chunkstore.indexing.numpy_rules import BASIC, COORDINATE, ORTHOGONAL, numpy_selection
from chunkstore.indexing.projections import (
           BasicIndexer,
           ChunkProjection,
           CoordinateIndexer,
           OrthogonalIndexer,
)

__all__ = ["BASIC", "COORDINATE", "ORTHOGONAL", "BasicIndexer", "ChunkProjection",
           "CoordinateIndexer", "OrthogonalIndexer", "Selection",
           "block_selection_to_basic", "expand_ellipsis",
           "normalize_int", "numpy_selection"]
