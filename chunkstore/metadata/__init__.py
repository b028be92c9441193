"""Metadata documents: parse, validate, serialize (v3 zarr.json; v2 .zarray/.zgroup/.zattrs).

Pure: nothing here reads or writes a store (see ``chunkstore.nodes.documents``).
"""

from chunkstore.metadata.dtypes import default_fill_value, fill_equal, normalize_fill_value
from chunkstore.metadata.nodes import (
    ArrayMetadata,
    GroupMetadata,
    NodeMetadata,
    is_array,
    join_path,
    node_keys,
    parse_node,
)
from chunkstore.metadata.v2 import ArrayMetadataV2, GroupMetadataV2
from chunkstore.metadata.v3 import ArrayMetadataV3, GroupMetadataV3

__all__ = [
    "ArrayMetadata", "ArrayMetadataV2", "ArrayMetadataV3", "GroupMetadata", "GroupMetadataV2",
    "GroupMetadataV3", "NodeMetadata", "default_fill_value", "fill_equal", "is_array",
    "join_path", "node_keys", "normalize_fill_value", "parse_node",
]
