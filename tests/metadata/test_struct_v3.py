"""The v3 ``struct`` data type (zarr-extensions), ``raw_bytes`` and unit-less
datetime64 / timedelta64: documents parsed and written exactly, hostile ones refused with
the field named, fill values bit for bit (interop: tests/interop/test_zarr_dtypes_34.py)."""

from __future__ import annotations

import base64
import copy

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import MetadataError, UnsupportedError
from chunkstore.metadata import ArrayMetadataV2, ArrayMetadataV3
from chunkstore.metadata.dtypes import (
    dtype_from_v3,
    fill_value_to_json,
    normalize_fill_value,
    parse_fill_value,
)

WHERE = "x.zarr/zarr.json"
POINT = np.dtype([("a", "<i4"), ("b", "<f8")])
STRUCT = {"name": "struct", "configuration": {"fields": [
    {"name": "a", "data_type": "int32"}, {"name": "b", "data_type": "float64"}]}}
DOC = {"zarr_format": 3, "node_type": "array", "shape": [5], "data_type": STRUCT,
       "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
       "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
       "fill_value": {"a": 7, "b": "NaN"},
       "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
       "attributes": {}}


def bits(value, dtype) -> bytes:
    return np.array(value, dtype=dtype).tobytes()


def with_changes(**changes):
    doc = copy.deepcopy(DOC)
    doc.update(changes)
    return doc


def test_struct_document_round_trips_exactly():
    meta = ArrayMetadataV3.from_json(with_changes(), WHERE)
    assert meta.dtype == POINT and not meta.legacy_struct
    assert bits(meta.fill_value, POINT) == bits((7, np.nan), POINT)
    assert meta.to_json() == DOC


def test_struct_fill_keeps_nan_payloads_and_signs():
    fill = {"a": -1, "b": "0x7ff8000000000001"}
    meta = ArrayMetadataV3.from_json(with_changes(fill_value=fill), WHERE)
    raw = np.frombuffer(bits(meta.fill_value, POINT)[4:], np.uint64)[0]
    assert raw == 0x7FF8000000000001
    assert meta.to_json()["fill_value"] == fill
    meta = ArrayMetadataV3.from_json(with_changes(fill_value={"a": 0, "b": -0.0}), WHERE)
    assert bits(meta.fill_value, POINT) == bits((0, -0.0), POINT)


def test_nested_struct_fill_and_base64_fill_both_read():
    nested = np.dtype([("p", [("x", "<f4"), ("t", "<M8[s]")]), ("r", "V2"), ("s", "S3")])
    fill = {"p": {"x": 1.5, "t": -9223372036854775808}, "r": "AQI=", "s": "YWI="}
    value = parse_fill_value(fill, nested, WHERE)
    assert bits(value, nested) == bits(((1.5, np.datetime64("NaT", "s")), b"\x01\x02", b"ab"), nested)
    assert fill_value_to_json(value, nested, struct_fields=True) == fill
    legacy = base64.b64encode(bits(value, nested)).decode()  # also read for "struct"
    assert bits(parse_fill_value(legacy, nested, WHERE), nested) == bits(value, nested)
    assert fill_value_to_json(value, nested) == legacy  # v2 and legacy v3


@pytest.mark.parametrize(("fill", "match"), [
    ({"a": 1}, r"missing \['b'\]"),
    ({"a": 1, "b": 2, "c": 3}, r"unknown \['c'\]"),
    ({"a": True, "b": 2}, r"struct field 'a'.*not an integer"),
    ({"a": 1, "b": "1.5"}, r"struct field 'b'"),
    ({"a": 2**31, "b": 0}, r"struct field 'a'.*out of range"),
    (5, "fill_value"),
    ("AAAA", "3 bytes"),
])
def test_bad_struct_fill_values_name_the_field(fill, match):
    with pytest.raises(MetadataError, match=match) as info:
        ArrayMetadataV3.from_json(with_changes(fill_value=fill), WHERE)
    assert WHERE in str(info.value)


@pytest.mark.parametrize(("data_type", "error"), [
    ({"name": "struct", "configuration": {"fields": [{"name": "a"}]}}, MetadataError),
    ({"name": "struct", "configuration": {"fields": [
        {"name": "a", "data_type": "int32", "offset": 4}]}}, MetadataError),
    ({"name": "struct", "configuration": {"fields": [{"name": 1, "data_type": "int32"}]}},
     MetadataError),
    ({"name": "struct", "configuration": {"fields": [
        {"name": "a", "data_type": "int32"}, {"name": "a", "data_type": "int8"}]}},
     MetadataError),
    ({"name": "struct", "configuration": {"fields": [], "packed": False}}, MetadataError),
    ({"name": "struct", "configuration": {"fields": []}}, MetadataError),
    ({"name": "struct"}, MetadataError),
    ({"name": "struct", "configuration": {"fields": [
        {"name": "s", "data_type": "string"}]}}, UnsupportedError),
    ({"name": "raw_bytes", "configuration": {"length_bytes": 0}}, MetadataError),
    ({"name": "raw_bytes", "configuration": {"length_bytes": True}}, MetadataError),
    ({"name": "raw_bytes", "configuration": {"length_bytes": 2**31}}, MetadataError),
    ({"name": "raw_bytes", "configuration": {}}, MetadataError),
    ({"name": "numpy.timedelta64", "configuration": {"unit": "generic", "scale_factor": 3}},
     MetadataError),
])
def test_bad_data_types_are_refused(data_type, error):
    with pytest.raises(error, match="zarr.json"):
        dtype_from_v3(data_type, WHERE)


def test_field_types_spelled_as_objects_without_configuration():
    """The struct schema allows a field's type as ``{"name": "float64"}``."""
    spec = {"name": "struct", "configuration": {"fields": [
        {"name": "a", "data_type": {"name": "int32"}},
        {"name": "b", "data_type": {"name": "float64", "configuration": {}}}]}}
    assert dtype_from_v3(spec, WHERE) == POINT
    with pytest.raises(UnsupportedError):
        dtype_from_v3({"name": "int32", "configuration": {"bits": 8}}, WHERE)


def test_legacy_structured_kept_new_struct_written():
    legacy = with_changes(
        data_type={"name": "structured", "configuration": {"fields": [
            ["a", "int32"], ["b", "float64"]]}},
        fill_value=base64.b64encode(bits((7, 0.5), POINT)).decode())
    meta = ArrayMetadataV3.from_json(legacy, WHERE)
    assert meta.legacy_struct and meta.to_json() == legacy
    assert meta.replace(shape=(6,)).to_json()["data_type"] == legacy["data_type"]
    made = cs.create_array(None, shape=(5,), chunks=(2,), dtype=POINT, fill_value=(7, 0.5))
    assert made.metadata.to_json()["data_type"] == STRUCT
    assert made.metadata.to_json()["fill_value"] == {"a": 7, "b": 0.5}


def test_raw_bytes_documents_and_fill_values():
    doc = with_changes(data_type={"name": "raw_bytes", "configuration": {"length_bytes": 5}},
                       fill_value="AQIDBAU=", codecs=[{"name": "bytes", "configuration": {}}])
    meta = ArrayMetadataV3.from_json(doc, WHERE)
    assert meta.dtype == np.dtype("V5") and meta.fill_value.tobytes() == b"\x01\x02\x03\x04\x05"
    assert meta.to_json() == doc
    v2 = {"zarr_format": 2, "shape": [5], "chunks": [2], "dtype": "|V5",
          "fill_value": "AQIDBAU=", "order": "C", "filters": None,
          "dimension_separator": ".", "compressor": None}
    assert ArrayMetadataV2.from_json(v2, ".zarray").to_json() == v2
    with pytest.raises(MetadataError, match="4 bytes"):
        ArrayMetadataV3.from_json({**doc, "fill_value": "AQIDBA=="}, WHERE)
    V5 = np.dtype("V5")
    assert normalize_fill_value(b"\x01", V5).tobytes() == b"\x01\0\0\0\0"  # as NumPy, zarr
    assert normalize_fill_value(np.void(b"abcde"), V5).tobytes() == b"abcde"
    for bad in (b"123456", 0, "abcde"):
        with pytest.raises(MetadataError, match="fill_value"):
            normalize_fill_value(bad, V5)


def test_unit_less_times_and_their_fill_values():
    for code, name in (("m8", "numpy.timedelta64"), ("M8", "numpy.datetime64")):
        a = cs.create_array(None, shape=(4,), chunks=(2,), dtype=code, fill_value=5)
        doc = a.metadata.to_json()
        assert doc["data_type"] == {"name": name, "configuration": {"unit": "generic",
                                                                    "scale_factor": 1}}
        assert doc["fill_value"] == 5
        data = np.arange(3, dtype=np.int64).view(code)
        a[:3] = data
        assert a[...].view(np.int64).tolist() == [0, 1, 2, 5]
        default = cs.create_array(None, shape=(2,), chunks=(2,), dtype=code)
        assert default.metadata.to_json()["fill_value"] == -2**63  # NaT
        assert np.isnat(default[...]).all()
    with pytest.raises(MetadataError, match="int64"):
        normalize_fill_value(2**63, np.dtype("m8"))


def test_minus_zero_record_chunks_are_stored_not_taken_for_the_fill(tmp_path):
    """A chunk of records equal to the fill only as numbers (-0.0 vs 0.0, another NaN) is
    stored: it reads back bit for bit; one equal in every bit is not stored."""
    zero = cs.create_array(None, shape=(4,), chunks=(2,), dtype=POINT, fill_value=(0, 0.0))
    odd = np.array([(0, -0.0), (0, -0.0)], POINT)
    zero[:2] = odd
    assert zero[:2].tobytes() == odd.tobytes()  # was read back as +0.0: never stored
    a = cs.create_array(str(tmp_path / "r.zarr"), shape=(4,), chunks=(2,), dtype=POINT,
                        fill_value=(0, np.nan), compressors=None)
    nan = np.array([(0, np.nan)] * 2, POINT)
    other_nan = nan.copy()
    other_nan.view(np.uint8).reshape(2, 12)[:, 4] = 1  # a NaN with another payload
    a[:2] = other_nan
    a[2:] = nan
    assert (tmp_path / "r.zarr" / "c" / "0").exists()
    assert not (tmp_path / "r.zarr" / "c" / "1").exists()  # all fill: not stored
    assert a[...].tobytes() == np.concatenate([other_nan, nan]).tobytes()
    raw = cs.create_array(None, shape=(4,), chunks=(2,), dtype="V3", fill_value=b"abc")
    raw[:] = np.array([b"abc", b"abc", b"abd", b"abc"], "V3")
    assert raw.nchunks_initialized == 1
    assert raw[...].tobytes() == b"abcabcabdabc"
