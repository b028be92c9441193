"""Metadata documents: parse, validate, serialize (v3 zarr.json; v2 .zarray/.zgroup/.zattrs)."""

from .dtypes import default_fill_value, fill_equal, normalize_fill_value
from .nodes import (
    ArrayMetadata,
    GroupMetadata,
    NodeMetadata,
    is_array,
    join_path,
    load_node,
    load_nodes,
    node_keys,
    parse_node,
    try_load_node,
)
from .v2 import ArrayMetadataV2, GroupMetadataV2
from .v3 import ArrayMetadataV3, GroupMetadataV3

__all__ = [
    "ArrayMetadata", "ArrayMetadataV2", "ArrayMetadataV3", "GroupMetadata", "GroupMetadataV2",
    "GroupMetadataV3", "NodeMetadata", "default_fill_value", "fill_equal", "is_array",
    "join_path", "load_node", "load_nodes", "node_keys", "normalize_fill_value", "parse_node", "try_load_node",
]
