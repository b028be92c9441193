"""Hostile metadata documents raise MetadataError naming the document and the field.

Deeply nested JSON, sizes beyond int64, item sizes beyond NumPy's and huge datetime
scale factors once escaped as RecursionError, OverflowError or TypeError.
"""

from __future__ import annotations

import json

import pytest

import chunkstore as cs
from chunkstore.errors import MetadataError
from chunkstore.metadata import parse_node
from chunkstore.metadata.json_io import MAX_JSON_DEPTH, load_json

V3 = {"zarr_format": 3, "node_type": "array", "shape": [6], "data_type": "float32",
      "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
      "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
      "fill_value": 0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]}
V2 = {"zarr_format": 2, "shape": [6], "chunks": [4], "dtype": "<f4", "compressor": None,
      "fill_value": 0, "order": "C", "filters": None}


def _v3(**changes):
    return parse_node({"zarr.json": json.dumps({**V3, **changes}).encode()}, "x.zarr")


def _v2(**changes):
    return parse_node({".zarray": json.dumps({**V2, **changes}).encode()}, "x.zarr")


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH, 5000, 200_000])
def test_deeply_nested_json(depth):
    raw = b'{"zarr_format": 3, "node_type": "group", "attributes": {"a": ' + _nested(depth) + b"}}"
    with pytest.raises(MetadataError, match=r"x\.zarr/zarr\.json: field 'attributes' nests JSON "
                                            rf"deeper than {MAX_JSON_DEPTH} levels"):
        parse_node({"zarr.json": raw}, "x.zarr")
    with pytest.raises(MetadataError, match=r"x\.zarr/\.zattrs.*deeper"):
        parse_node({".zattrs": b'{"a": ' + _nested(depth) + b"}",
                    ".zarray": json.dumps(V2).encode()}, "x.zarr")


def test_nesting_within_the_limit_loads():
    doc = load_json(b'{"a": ' + _nested(MAX_JSON_DEPTH - 2) + b"}", "doc")
    assert list(doc) == ["a"]
    with pytest.raises(MetadataError, match="doc: nests JSON deeper"):
        load_json(_nested(100_000), "doc")


@pytest.mark.parametrize("field, value, message", [
    ("shape", [2**70], r"field 'shape': entry \d+ does not fit an int64"),
    ("shape", [2**40, 2**40], r"field 'shape': .* more than 2\*\*63 - 1 elements"),
    ("chunk_grid", {"name": "regular", "configuration": {"chunk_shape": [2**70]}},
     r"field 'chunk_grid.chunk_shape': entry \d+ does not fit"),
    ("chunk_grid", {"name": "regular", "configuration": {"chunk_shape": [2**62]}},
     r"field 'chunk_grid.chunk_shape': a chunk of .* larger than 2\*\*63 - 1 bytes"),
    ("data_type", {"name": "fixed_length_utf32", "configuration": {"length_bytes": 4 * 10**12}},
     r"field 'data_type': length_bytes 4000000000000 of fixed_length_utf32"),
    ("data_type", {"name": "null_terminated_bytes", "configuration": {"length_bytes": 2**31}},
     r"field 'data_type': length_bytes 2147483648 of null_terminated_bytes"),
    ("data_type", {"name": "numpy.datetime64",
                   "configuration": {"unit": "ns", "scale_factor": 10**20}},
     r"field 'data_type': bad unit/scale_factor"),
    ("data_type", {"name": "numpy.timedelta64",
                   "configuration": {"unit": "s", "scale_factor": 2**31}},
     r"field 'data_type': bad unit/scale_factor"),
])
def test_v3_sizes_beyond_limits(field, value, message):
    with pytest.raises(MetadataError, match=r"x\.zarr/zarr\.json: " + message):
        _v3(**{field: value})


@pytest.mark.parametrize("field, value, message", [
    ("shape", [2**70], r"field 'shape': entry \d+ does not fit an int64"),
    ("shape", [2**40, 2**40], r"field 'shape': .* more than 2\*\*63 - 1 elements"),
    ("chunks", [2**62], r"field 'chunks': a chunk of .* larger than 2\*\*63 - 1 bytes"),
    ("dtype", "<U99999999999", r"field 'dtype': invalid dtype"),
    ("dtype", "|S" + "9" * 30, r"field 'dtype': invalid dtype"),
    ("dtype", "<M8[99999999999999999999ns]", r"field 'dtype': invalid dtype"),
])
def test_v2_sizes_beyond_limits(field, value, message):
    extra = {"chunks": [4, 4]} if value == [2**40, 2**40] else {}
    with pytest.raises(MetadataError, match=r"x\.zarr/\.zarray: " + message):
        _v2(**{field: value, **extra}, fill_value=None)


@pytest.mark.parametrize("kwargs", [
    {"shape": (2**70,), "chunks": (10,)},
    {"shape": (2**40, 2**40), "chunks": (10, 10)},
    {"shape": (10,), "dtype": "<U99999999999"},
    {"shape": (10,), "dtype": "M8[99999999999999999999ns]"},
])
def test_python_api_sizes_beyond_limits(kwargs):
    with pytest.raises(MetadataError):
        cs.create_array(None, **{"dtype": "i4", **kwargs})
