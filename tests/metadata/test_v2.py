"""Zarr v2 ``.zarray`` / ``.zattrs`` / ``.zgroup``: parse, validate, serialize."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import MetadataError
from chunkstore.metadata import ArrayMetadataV2, GroupMetadataV2, parse_node

WHERE = "data/x.zarr/.zarray"

BASE = {
    "zarr_format": 2,
    "shape": [10, 7],
    "chunks": [4, 3],
    "dtype": "<f8",
    "compressor": {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0},
    "fill_value": "NaN",
    "order": "C",
    "filters": [{"id": "delta", "dtype": "<f8"}],
    "dimension_separator": ".",
}


def doc(**changes):
    d = copy.deepcopy(BASE)
    for k, v in changes.items():
        if v is None and k.startswith("drop_"):
            d.pop(k[5:], None)
        else:
            d[k] = v
    return d


def test_array_round_trip_exact():
    meta = ArrayMetadataV2.from_json(doc(), WHERE, {"a": 1})
    assert meta.shape == (10, 7) and meta.chunk_shape == (4, 3)
    assert meta.dtype == np.dtype("<f8")
    assert math.isnan(meta.fill_value)
    assert meta.filters == ({"id": "delta", "dtype": "<f8"},)
    assert meta.attributes == {"a": 1}
    assert meta.to_json() == BASE
    docs = meta.documents()
    assert json.loads(docs[".zarray"]) == BASE
    assert json.loads(docs[".zattrs"]) == {"a": 1}


V2_DTYPES = ["|b1", "|i1", "|u1", "<i2", ">i2", "<i4", ">i4", "<i8", ">i8", "<u2", ">u2",
             "<u4", ">u4", "<u8", ">u8", "<f2", ">f2", "<f4", ">f4", "<f8", ">f8",
             "<c8", ">c8", "<c16", ">c16"]


@pytest.mark.parametrize("dtype_str", V2_DTYPES)
def test_every_dtype_both_byte_orders(dtype_str):
    dtype = np.dtype(dtype_str)
    fill = {"b": False, "i": -5, "u": 5, "f": "-Infinity", "c": [1.0, "NaN"]}[dtype.kind]
    d = doc(dtype=dtype_str, fill_value=fill, filters=None)
    meta = ArrayMetadataV2.from_json(d, WHERE)
    assert meta.dtype == dtype
    assert meta.dtype.str == dtype_str
    assert meta.to_json() == d


@pytest.mark.parametrize(("fill", "check"), [
    (None, lambda v: v is None),
    ("NaN", math.isnan),
    ("Infinity", lambda v: v == math.inf),
    ("-Infinity", lambda v: v == -math.inf),
    (0, lambda v: v == 0),
    (-1.25, lambda v: v == -1.25),
    (1e300, lambda v: v == 1e300),
])
def test_float_fill_values(fill, check):
    meta = ArrayMetadataV2.from_json(doc(fill_value=fill), WHERE)
    assert check(meta.fill_value)
    assert meta.to_json()["fill_value"] == fill


def test_missing_fill_value_is_null():
    d = doc()
    del d["fill_value"]
    assert ArrayMetadataV2.from_json(d, WHERE).fill_value is None


def test_null_filters_and_empty_filters():
    # `filters: []` is written back as null (LESSONS 2)
    m1 = ArrayMetadataV2.from_json(doc(filters=None), WHERE)
    m2 = ArrayMetadataV2.from_json(doc(filters=[]), WHERE)
    assert m1.filters is None and m2.filters is None
    assert m2.to_json()["filters"] is None


def test_null_compressor():
    meta = ArrayMetadataV2.from_json(doc(compressor=None), WHERE)
    assert meta.compressor is None and meta.to_json()["compressor"] is None


def test_extra_members_in_codec_configs_tolerated():
    comp = {"id": "zstd", "level": 1, "checksum": False, "future_option": 3}
    meta = ArrayMetadataV2.from_json(doc(compressor=comp), WHERE)
    assert meta.to_json()["compressor"] == comp


@pytest.mark.parametrize(("sep", "expected", "key"), [
    (".", ".", "1.2"), ("/", "/", "1/2"), (None, ".", "1.2"), ("missing", ".", "1.2")])
def test_dimension_separator(sep, expected, key):
    d = doc()
    if sep == "missing":
        del d["dimension_separator"]
    else:
        d["dimension_separator"] = sep
    meta = ArrayMetadataV2.from_json(d, WHERE)
    assert meta.dimension_separator == expected
    assert meta.chunk_key((1, 2)) == key
    assert meta.to_json()["dimension_separator"] == expected


def test_zero_d_chunk_key():
    meta = ArrayMetadataV2.from_json(doc(shape=[], chunks=[]), WHERE)
    assert meta.chunk_key(()) == "0"


@pytest.mark.parametrize("order", ["C", "F"])
def test_order(order):
    meta = ArrayMetadataV2.from_json(doc(order=order), WHERE)
    assert meta.order == order
    assert meta.to_json()["order"] == order


@pytest.mark.parametrize(("changes", "field"), [
    ({"zarr_format": 3}, "zarr_format"),
    ({"shape": [10, -7]}, "shape"),
    ({"shape": None}, "shape"),
    ({"chunks": [4, 0]}, "chunks"),
    ({"chunks": [4]}, "chunks"),
    ({"dtype": "<q4"}, "dtype"),
    ({"dtype": "|V0"}, "dtype"),
    ({"dtype": [["a", "<i4", [2]]]}, "dtype"),  # a sub-array field
    ({"order": "K"}, "order"),
    ({"dimension_separator": "-"}, "dimension_separator"),
    ({"filters": {"id": "delta"}}, "filters"),
    ({"filters": [None]}, "filters"),
    ({"filters": [{"dtype": "<f8"}]}, "filters"),
    ({"compressor": "blosc"}, "compressor"),
    ({"fill_value": "nan"}, "fill_value"),
    ({"fill_value": [1, 2]}, "fill_value"),
])
def test_validation_errors_name_document_and_field(changes, field):
    with pytest.raises(MetadataError, match=r"data/x\.zarr/\.zarray") as info:
        ArrayMetadataV2.from_json(doc(**changes), WHERE)
    assert field in str(info.value)


def test_int_fill_out_of_range():
    with pytest.raises(MetadataError, match=r"\.zarray.*fill_value"):
        ArrayMetadataV2.from_json(doc(dtype="|u1", fill_value=300, filters=None), WHERE)


def test_group_documents():
    meta = GroupMetadataV2.from_json({"zarr_format": 2}, ".zgroup", {"t": "x"})
    docs = meta.documents()
    assert json.loads(docs[".zgroup"]) == {"zarr_format": 2}
    assert json.loads(docs[".zattrs"]) == {"t": "x"}
    with pytest.raises(MetadataError, match=r"\.zgroup.*zarr_format"):
        GroupMetadataV2.from_json({"zarr_format": 3}, ".zgroup")


def test_parse_node_v2_with_attrs():
    raw = {".zarray": json.dumps(BASE).encode(), ".zattrs": b'{"units": "K"}'}
    node = parse_node(raw, "x.zarr")
    assert isinstance(node, ArrayMetadataV2)
    assert node.attributes == {"units": "K"}
    with pytest.raises(MetadataError, match=r"x\.zarr/\.zattrs.*malformed"):
        parse_node({**raw, ".zattrs": b"{"}, "x.zarr")
    with pytest.raises(MetadataError, match=r"x\.zarr/\.zarray.*malformed"):
        parse_node({".zarray": b"nope"}, "x.zarr")
    assert isinstance(parse_node({".zgroup": b'{"zarr_format": 2}'}, ""), GroupMetadataV2)
    assert parse_node({}, "x") is None


def test_v2_documents_on_disk(tmp_path):
    cs.create_array(str(tmp_path / "x.zarr"), shape=(5, 6), chunks=(2, 4), dtype=">i2",
                    fill_value=None, zarr_format=2, compressors=None, order="F",
                    dimension_separator="/", attributes={"k": 1})
    zarray = json.loads((tmp_path / "x.zarr" / ".zarray").read_text())
    assert zarray == {"zarr_format": 2, "shape": [5, 6], "chunks": [2, 4], "dtype": ">i2",
                      "compressor": None, "fill_value": None, "order": "F", "filters": None,
                      "dimension_separator": "/"}
    assert json.loads((tmp_path / "x.zarr" / ".zattrs").read_text()) == {"k": 1}


def test_v2_null_fill_survives_round_trip(tmp_path):
    path = tmp_path / "x.zarr"
    a = cs.create_array(str(path), shape=(4,), chunks=(2,), dtype="<f4", zarr_format=2,
                        compressors=None)
    d = json.loads((path / ".zarray").read_text())
    d["fill_value"] = None
    (path / ".zarray").write_text(json.dumps(d))
    b = cs.open_array(str(path), mode="r+")
    assert b.fill_value is None
    b.attrs["touched"] = True  # rewrites the metadata
    assert json.loads((path / ".zarray").read_text())["fill_value"] is None
    assert a.fill_value == 0  # the first handle keeps its own metadata


def test_open_local_error_names_path_and_field(tmp_path):
    root = tmp_path / "data" / "x.zarr"
    cs.create_array(str(root), name="arr", shape=(4,), chunks=(2,), dtype="<i2", zarr_format=2)
    d = json.loads((root / "arr" / ".zarray").read_text())
    d["order"] = "Z"
    (root / "arr" / ".zarray").write_text(json.dumps(d))
    with pytest.raises(MetadataError) as info:
        cs.open_array(str(root), path="arr", mode="r")
    assert "data/x.zarr/arr/.zarray" in str(info.value) and "'order'" in str(info.value)
    (root / "arr" / ".zarray").write_text("{}")
    (root / "arr" / ".zattrs").write_text("[1]")
    with pytest.raises(MetadataError, match=r"data/x\.zarr/arr/\.zattrs"):
        cs.open_array(str(root), path="arr", mode="r")


@pytest.mark.parametrize(("dtype", "fill", "expected"), [
    ("<f4", np.array([0x7FC00001], "<u4").view("<f4")[0], "NaN"),
    ("<c8", complex(np.array([0x7FC00001], "<u4").view("<f4")[0], 1.0), ["NaN", 1]),
    ("<f8", np.nan, "NaN"),
])
def test_nan_payload_written_without_hex(dtype, fill, expected):
    """The hex form is v3-only: zarr-python's v2 reader rejects it."""
    meta = ArrayMetadataV2(shape=(2,), dtype=np.dtype(dtype), chunk_shape=(2,),
                           fill_value=np.array(fill, dtype=dtype)[()])
    assert meta.to_json()["fill_value"] == expected
