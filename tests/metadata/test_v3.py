"""Zarr v3 ``zarr.json``: parse, validate, serialize; must-understand rules; error paths."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import MetadataError, UnsupportedError
from chunkstore.metadata import ArrayMetadataV3, GroupMetadataV3, parse_node
from chunkstore.metadata.json_io import dump_json

WHERE = "data/x.zarr/zarr.json"

BASE = {
    "zarr_format": 3,
    "node_type": "array",
    "shape": [10, 7],
    "data_type": "float32",
    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 3]}},
    "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
    "fill_value": "NaN",
    "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
               {"name": "zstd", "configuration": {"level": 3, "checksum": False}}],
    "attributes": {"units": "m", "nested": {"a": [1, 2]}},
    "dimension_names": ["y", None],
}


def doc(**changes):
    d = copy.deepcopy(BASE)
    for k, v in changes.items():
        if v is _DROP:
            d.pop(k, None)
        else:
            d[k] = v
    return d


_DROP = object()


def test_array_round_trip_exact():
    meta = ArrayMetadataV3.from_json(doc(), WHERE)
    assert meta.shape == (10, 7)
    assert meta.dtype == np.dtype("float32")
    assert meta.chunk_shape == (4, 3)
    assert math.isnan(meta.fill_value)
    assert meta.chunk_key_encoding == ("default", "/")
    assert meta.dimension_names == ("y", None)
    assert meta.attributes == BASE["attributes"]
    assert meta.to_json() == BASE
    # serialized bytes are strict JSON and parse back to the same document
    assert json.loads(dump_json(meta.to_json())) == BASE
    again = ArrayMetadataV3.from_json(json.loads(meta.documents()["zarr.json"]), WHERE)
    assert again.to_json() == BASE and math.isnan(again.fill_value)


@pytest.mark.parametrize("name", ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16",
                                  "uint32", "uint64", "float16", "float32", "float64",
                                  "complex64", "complex128"])
def test_every_numeric_dtype_round_trip(name):
    dtype = np.dtype(name)
    fill = {"b": True, "i": -1 if dtype.kind == "i" else 1, "u": 7, "f": "-Infinity",
            "c": ["NaN", 2.5]}[dtype.kind]
    codecs = [{"name": "bytes", "configuration": {"endian": "big"}}] if dtype.itemsize > 1 \
        else [{"name": "bytes", "configuration": {}}]
    d = doc(data_type=name, fill_value=fill, codecs=codecs)
    meta = ArrayMetadataV3.from_json(d, WHERE)
    assert meta.dtype == dtype
    assert meta.to_json() == d


def test_defaults_when_optional_fields_absent():
    d = doc(chunk_key_encoding=_DROP, attributes=_DROP, dimension_names=_DROP)
    meta = ArrayMetadataV3.from_json(d, WHERE)
    assert meta.chunk_key_encoding == ("default", "/")
    assert meta.attributes == {}
    assert meta.dimension_names is None
    out = meta.to_json()
    assert "dimension_names" not in out
    assert out["chunk_key_encoding"] == {"name": "default", "configuration": {"separator": "/"}}


@pytest.mark.parametrize(("encoding", "expected", "key"), [
    ({"name": "default"}, ("default", "/"), "c/1/2"),
    ({"name": "default", "configuration": {"separator": "/"}}, ("default", "/"), "c/1/2"),
    ({"name": "default", "configuration": {"separator": "."}}, ("default", "."), "c.1.2"),
    ({"name": "v2"}, ("v2", "."), "1.2"),
    ({"name": "v2", "configuration": {"separator": "."}}, ("v2", "."), "1.2"),
    ({"name": "v2", "configuration": {"separator": "/"}}, ("v2", "/"), "1/2"),
])
def test_chunk_key_encodings(encoding, expected, key):
    meta = ArrayMetadataV3.from_json(doc(chunk_key_encoding=encoding), WHERE)
    assert meta.chunk_key_encoding == expected
    assert meta.chunk_key((1, 2)) == key
    assert meta.to_json()["chunk_key_encoding"] == {
        "name": expected[0], "configuration": {"separator": expected[1]}}


def test_zero_d_chunk_keys():
    d = doc(shape=[], chunk_grid={"name": "regular", "configuration": {"chunk_shape": []}},
            dimension_names=_DROP)
    assert ArrayMetadataV3.from_json(d, WHERE).chunk_key(()) == "c"
    d["chunk_key_encoding"] = {"name": "v2", "configuration": {"separator": "."}}
    assert ArrayMetadataV3.from_json(d, WHERE).chunk_key(()) == "0"


def test_chunk_key_encoding_errors():
    with pytest.raises(UnsupportedError, match=r"data/x\.zarr/zarr\.json.*chunk_key_encoding"):
        ArrayMetadataV3.from_json(doc(chunk_key_encoding={"name": "fancy"}), WHERE)
    with pytest.raises(MetadataError, match=r"data/x\.zarr/zarr\.json.*chunk_key_encoding"):
        ArrayMetadataV3.from_json(
            doc(chunk_key_encoding={"name": "default", "configuration": {"separator": "-"}}),
            WHERE)


def test_unknown_optional_field_kept():
    ext = {"must_understand": False, "configuration": {"x": 1}}
    d = doc(my_extension=ext)
    meta = ArrayMetadataV3.from_json(d, WHERE)
    assert meta.extra == {"my_extension": ext}
    assert meta.to_json()["my_extension"] == ext
    # kept through an update of another field
    assert meta.replace(shape=(20, 7)).to_json()["my_extension"] == ext


@pytest.mark.parametrize("value", [{"name": "x"}, {"must_understand": True}, 1, "yes"])
def test_unknown_must_understand_field_refused(value):
    with pytest.raises(UnsupportedError, match=r"data/x\.zarr/zarr\.json.*'my_extension'"):
        ArrayMetadataV3.from_json(doc(my_extension=value), WHERE)


def test_storage_transformers():
    assert ArrayMetadataV3.from_json(doc(storage_transformers=[]), WHERE).shape == (10, 7)
    with pytest.raises(UnsupportedError, match=r"data/x\.zarr/zarr\.json.*storage_transformers"):
        ArrayMetadataV3.from_json(doc(storage_transformers=[{"name": "shuffle"}]), WHERE)


@pytest.mark.parametrize(("changes", "field"), [
    ({"zarr_format": 2}, "zarr_format"),
    ({"node_type": "grop"}, "node_type"),
    ({"shape": _DROP}, "shape"),
    ({"shape": [10, -1]}, "shape"),
    ({"shape": "10"}, "shape"),
    ({"shape": [10, True]}, "shape"),
    ({"data_type": _DROP}, "data_type"),
    ({"data_type": "float128"}, "data_type"),
    ({"chunk_grid": {"name": "rectilinear", "configuration": {}}}, "chunk_grid"),
    ({"chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 0]}}},
     "chunk_shape"),
    ({"chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}}}, "chunk_grid"),
    ({"fill_value": _DROP}, "fill_value"),
    ({"fill_value": "nan"}, "fill_value"),
    ({"fill_value": "0x7fc0"}, "fill_value"),
    ({"codecs": []}, "codecs"),
    ({"codecs": _DROP}, "codecs"),
    ({"codecs": [3]}, "codecs"),
    ({"dimension_names": ["y"]}, "dimension_names"),
    ({"dimension_names": ["y", 3]}, "dimension_names"),
    ({"attributes": [1]}, "attributes"),
])
def test_validation_errors_name_document_and_field(changes, field):
    with pytest.raises(MetadataError, match=r"data/x\.zarr/zarr\.json") as info:
        ArrayMetadataV3.from_json(doc(**changes), WHERE)
    assert field in str(info.value)


def test_codec_entries_normalized():
    d = doc(codecs=["bytes", {"name": "gzip", "configuration": {"level": 1}}])
    meta = ArrayMetadataV3.from_json(d, WHERE)
    assert meta.codecs == ({"name": "bytes", "configuration": {}},
                           {"name": "gzip", "configuration": {"level": 1}})


def test_order_from_transpose():
    d = doc(codecs=[{"name": "transpose", "configuration": {"order": [1, 0]}},
                    {"name": "bytes", "configuration": {"endian": "little"}}])
    assert ArrayMetadataV3.from_json(d, WHERE).order == "F"
    assert ArrayMetadataV3.from_json(doc(), WHERE).order == "C"


# -- groups ---------------------------------------------------------------------------------
def test_group_round_trip():
    d = {"zarr_format": 3, "node_type": "group", "attributes": {"a": 1}}
    meta = GroupMetadataV3.from_json(d, WHERE)
    assert meta.attributes == {"a": 1}
    assert meta.to_json() == d
    ext = {"must_understand": False}
    assert GroupMetadataV3.from_json({**d, "ext": ext}, WHERE).to_json()["ext"] == ext
    with pytest.raises(UnsupportedError, match="'ext'"):
        GroupMetadataV3.from_json({**d, "ext": {"must_understand": True}}, WHERE)
    cons = {"kind": "inline", "must_understand": False, "metadata": {}}
    assert GroupMetadataV3.from_json({**d, "consolidated_metadata": cons},
                                     WHERE).consolidated_metadata == cons


def test_group_missing_attributes_is_empty():
    assert GroupMetadataV3.from_json({"zarr_format": 3, "node_type": "group"}, WHERE
                                     ).attributes == {}


# -- whole documents via parse_node and through stores -----------------------------------------
def test_parse_node_bad_json_names_document():
    with pytest.raises(MetadataError, match=r"pre/zarr\.json.*malformed JSON"):
        parse_node({"zarr.json": b"{not json"}, "pre")
    # bare NaN / Infinity (Python's json, so zarr-python, writes them in attributes)
    group = parse_node({"zarr.json": b'{"zarr_format": 3, "node_type": "group", '
                                     b'"attributes": {"m": NaN, "x": -Infinity}}'}, "pre")
    assert math.isnan(group.attributes["m"]) and group.attributes["x"] == -math.inf
    with pytest.raises(MetadataError, match=r"pre/zarr\.json.*node_type"):
        parse_node({"zarr.json": b'{"zarr_format": 3, "node_type": "thing"}'}, "pre")
    with pytest.raises(MetadataError, match=r"pre/zarr\.json.*JSON object"):
        parse_node({"zarr.json": b"[1, 2]"}, "pre")


def test_open_local_error_names_path_and_field(tmp_path):
    root = tmp_path / "data" / "x.zarr"
    a = cs.create_array(str(root), name="sub/arr", shape=(4,), chunks=(2,), dtype="i2")
    d = json.loads(a.store.get("sub/arr/zarr.json"))
    d["data_type"] = "int3"
    (root / "sub" / "arr" / "zarr.json").write_text(json.dumps(d))
    with pytest.raises(MetadataError) as info:
        cs.open_array(str(root), path="sub/arr", mode="r")
    msg = str(info.value)
    assert "data/x.zarr/sub/arr/zarr.json" in msg
    assert "data_type" in msg


def test_written_document_matches_metadata(tmp_path):
    a = cs.create_array(str(tmp_path / "x.zarr"), shape=(5, 6), chunks=(2, 4), dtype=">i4",
                        fill_value=-3, dimension_names=["a", "b"], attributes={"k": [1]},
                        compressors=None)
    on_disk = json.loads((tmp_path / "x.zarr" / "zarr.json").read_text())
    assert on_disk == {
        "zarr_format": 3, "node_type": "array", "shape": [5, 6], "data_type": "int32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 4]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": -3,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "attributes": {"k": [1]}, "dimension_names": ["a", "b"],
    }
    assert a.metadata.to_json() == on_disk
