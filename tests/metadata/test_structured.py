"""Structured (record, void) dtypes as zarr-python 3 stores them.

v2: ``"dtype": [["a", "<i4"], ["b", "<f8"]]`` (nested lists for nested records, the
fields' own byte order), fill value base64 of one value's raw bytes (zeros by default).
v3: ``{"name": "struct", "configuration": {"fields": [{"name": "a", "data_type": "int32"},
...]}}`` with the fields little-endian and a fill value per field (zarr-python >= 3.2);
the legacy ``{"name": "structured", ... [["a", "int32"], ...]}`` with a base64 fill
(zarr-python 3.1) is read and kept. Checked field by field against what the installed
zarr-python writes, and data both ways (zarr-python writes, chunkstore reads; chunkstore
writes, zarr-python reads). More cases: tests/interop/test_zarr_dtypes_34.py.
"""

from __future__ import annotations

import base64
import json
import warnings

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import MetadataError, UnsupportedError
from chunkstore.metadata import ArrayMetadataV2, ArrayMetadataV3
from chunkstore.metadata.dtypes import (
    default_fill_value,
    dtype_from_v2,
    dtype_from_v3,
    fill_value_to_json,
    normalize_fill_value,
    parse_fill_value,
    v2_str_of,
    v3_name_of,
)
from chunkstore.metadata.dtypes_extra import user_dtype
from chunkstore.nodes.documents import write_node

zarr = pytest.importorskip("zarr")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning",  # zarr: "unstable" v3 dtype
                                        "ignore::FutureWarning")

WHERE = "x.zarr/.zarray"
#: zarr-python >= 3.2 writes and reads v3 ``struct``; 3.1 only the legacy ``structured``
ZARR_STRUCT = tuple(int(p) for p in zarr.__version__.split(".")[:2]) >= (3, 2)
NO_STRUCT = pytest.mark.skipif(not ZARR_STRUCT, reason=f"zarr-python {zarr.__version__} "
                               "(< 3.2) does not read the v3 'struct' chunkstore writes")
POINT = np.dtype([("a", "<i4"), ("b", "<f8")])
NESTED = np.dtype([("id", "<u2"), ("pos", [("x", "<f4"), ("y", "<f4")]), ("tag", "S3")])
MIXED = np.dtype([("when", "<M8[s]"), ("name", "<U2"), ("z", "<c8"), ("ok", "?"),
                  ("n", "u1")])
BIG = np.dtype([("a", ">i4"), ("b", ">f8")])
DTYPES = {"point": POINT, "nested": NESTED, "mixed": MIXED}


def records(dtype: np.dtype, n: int) -> np.ndarray:
    """``n`` distinct values of ``dtype`` (every field differs from row to row)."""
    out = np.zeros(n, dtype=dtype)
    raw = out.view(np.uint8).reshape(n, dtype.itemsize)
    rng = np.random.default_rng(dtype.itemsize)
    raw[:] = rng.integers(0, 256, raw.shape, dtype=np.uint8)
    for name in dtype.names:  # keep every field a valid, comparable value
        kind = dtype.fields[name][0].kind
        if kind in "fc":
            out[name] = np.arange(n) * 1.5
        elif kind == "b":
            out[name] = np.arange(n) % 2 == 0
        elif kind == "M":
            out[name] = np.arange(n).astype("M8[s]")
        elif kind == "U":
            out[name] = [chr(97 + i % 26) * 2 for i in range(n)]
        elif kind == "V":
            for sub in dtype.fields[name][0].names:
                out[name][sub] = np.arange(n) + 0.25
    return out


def same(a: np.ndarray, b: np.ndarray) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.astype(a.dtype).tobytes()


# -- metadata: names, parse, serialize ----------------------------------------------------------
def test_v2_dtype_field_round_trips():
    assert v2_str_of(POINT) == [["a", "<i4"], ["b", "<f8"]]
    assert v2_str_of(NESTED) == [["id", "<u2"], ["pos", [["x", "<f4"], ["y", "<f4"]]],
                                 ["tag", "|S3"]]
    assert v2_str_of(BIG) == [["a", ">i4"], ["b", ">f8"]]
    for dtype in (POINT, NESTED, MIXED, BIG):
        parsed = dtype_from_v2(json.loads(json.dumps(v2_str_of(dtype))), WHERE)
        assert parsed == dtype and parsed.descr == dtype.descr


def test_v3_data_type_round_trips_little_endian():
    assert v3_name_of(POINT) == {"name": "struct", "configuration": {"fields": [
        {"name": "a", "data_type": "int32"}, {"name": "b", "data_type": "float64"}]}}
    assert v3_name_of(POINT, legacy_struct=True) == {"name": "structured", "configuration": {
        "fields": [["a", "int32"], ["b", "float64"]]}}
    assert v3_name_of(BIG) == v3_name_of(POINT)  # v3 fields carry no byte order
    nested = v3_name_of(NESTED)["configuration"]["fields"]
    assert nested[1] == {"name": "pos", "data_type": {"name": "struct", "configuration": {
        "fields": [{"name": "x", "data_type": "float32"},
                   {"name": "y", "data_type": "float32"}]}}}
    assert nested[2] == {"name": "tag", "data_type": {"name": "null_terminated_bytes",
                                                      "configuration": {"length_bytes": 3}}}
    legacy = v3_name_of(NESTED, legacy_struct=True)["configuration"]["fields"]
    assert legacy[1] == ["pos", {"name": "structured", "configuration": {
        "fields": [["x", "float32"], ["y", "float32"]]}}]
    for dtype in (POINT, NESTED, MIXED):
        for legacy in (False, True):
            parsed = dtype_from_v3(v3_name_of(dtype, legacy_struct=legacy), "zarr.json")
            assert parsed == dtype
            assert all(parsed.fields[n][0].byteorder in "<|=" for n in parsed.names)


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("name", list(DTYPES))
def test_names_and_fills_equal_zarr_python(tmp_path, fmt, name):
    """The dtype and fill_value fields chunkstore writes are zarr-python's, byte for byte."""
    dtype = DTYPES[name]
    fill = records(dtype, 3)[2]
    z = zarr.create_array(str(tmp_path / "z.zarr"), shape=(4,), chunks=(2,), dtype=dtype,
                          zarr_format=fmt, fill_value=fill, compressors=None)
    zdoc = json.loads(json.dumps(z.metadata.to_dict()))
    key = "dtype" if fmt == 2 else "data_type"
    fields = fmt == 3 and ZARR_STRUCT  # a fill value per field, else base64
    ours = v2_str_of(dtype) if fmt == 2 else v3_name_of(dtype, legacy_struct=not ZARR_STRUCT)
    assert json.loads(json.dumps(ours)) == zdoc[key]
    assert json.loads(json.dumps(fill_value_to_json(fill, dtype, fields))) == zdoc["fill_value"]
    same(parse_fill_value(zdoc["fill_value"], dtype, WHERE), fill)
    zero = fill_value_to_json(default_fill_value(dtype), dtype, fields)
    if fields:
        assert zero == {n: fill_value_to_json(np.zeros((), dtype[n])[()], dtype[n], True)
                        for n in dtype.names}
    else:
        assert zero == base64.b64encode(bytes(dtype.itemsize)).decode()


def test_fill_values_from_what_users_give():
    want = np.array((1, 2.5), dtype=POINT)[()]
    for given in ((1, 2.5), [1, 2.5], want, np.array((1, 2.5), dtype=POINT),
                  np.array((1, 2.5), dtype=POINT).tobytes()):
        same(normalize_fill_value(given, POINT), want)
    same(normalize_fill_value(0, POINT), np.zeros((), POINT)[()])
    for bad in ("abc", b"\x00" * 3, (1, 2, 3), {"a": 1}):
        with pytest.raises(MetadataError):
            normalize_fill_value(bad, POINT)


@pytest.mark.parametrize("bad", [7, "not base64!", base64.b64encode(b"\x00" * 11).decode()])
def test_bad_fill_json_names_the_field(bad):
    with pytest.raises(MetadataError, match=r"x\.zarr/\.zarray.*fill_value"):
        parse_fill_value(bad, POINT, WHERE)


def test_v2_document_round_trips():
    doc = {"zarr_format": 2, "shape": [5], "chunks": [2], "dtype": [["a", "<i4"], ["b", "<f8"]],
           "fill_value": "AQAAAAAAAAAAAARA", "order": "C", "filters": None,
           "dimension_separator": ".", "compressor": {"id": "zstd", "level": 0}}
    meta = ArrayMetadataV2.from_json(doc, WHERE)
    assert meta.dtype == POINT
    same(meta.fill_value, np.array((1, 2.5), dtype=POINT)[()])
    assert meta.to_json() == doc


def test_v3_document_round_trips():
    doc = {"zarr_format": 3, "node_type": "array", "shape": [5],
           "data_type": {"name": "structured", "configuration": {
               "fields": [["a", "int32"], ["b", "float64"]]}},
           "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
           "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
           "fill_value": "AQAAAAAAAAAAAARA", "codecs": [{"name": "bytes", "configuration": {}}],
           "attributes": {}}
    meta = ArrayMetadataV3.from_json(doc, "zarr.json")
    assert meta.dtype == POINT
    assert meta.to_json()["data_type"] == doc["data_type"]
    assert meta.to_json()["fill_value"] == doc["fill_value"]


@pytest.mark.parametrize(("spec", "error"), [
    ({"name": "structured", "configuration": {}}, MetadataError),
    ({"name": "structured", "configuration": {"fields": []}}, MetadataError),
    ({"name": "structured", "configuration": {"fields": [["a", "string"]]}}, UnsupportedError),
    ({"name": "structured", "configuration": {"fields": [["a", "int32"], ["a", "int8"]]}},
     MetadataError),
    ({"name": "structured", "configuration": {"fields": [["a", "int32", [2]]]}},
     UnsupportedError),
    ({"name": "structured", "configuration": {"fields": [["a", "int99"]]}}, UnsupportedError),
])
def test_v3_bad_structured_data_types(spec, error):
    with pytest.raises(error, match="zarr.json"):
        dtype_from_v3(spec, "zarr.json")


def test_user_dtypes():
    assert user_dtype(POINT) == POINT
    aligned = np.dtype([("a", "u1"), ("b", "<i8")], align=True)
    packed = user_dtype(aligned)  # padding cannot be described: stored packed, as zarr
    assert packed.itemsize == 9 and packed.names == ("a", "b")
    assert user_dtype([("a", "<i4"), ("b", "<f8")]) == POINT
    assert user_dtype("V8") == np.dtype("V8")  # raw bytes (v3 raw_bytes, v2 "|V8")
    assert user_dtype([("a", "V4")]) == np.dtype([("a", "V4")])  # a raw-bytes field
    for bad in ("V0", np.dtype([("a", "<i4", (2,))]), np.dtype([("a", "O")]),
                np.dtype(("<i4", (2,))), np.dtype([("p", [("q", "O")])])):
        with pytest.raises(UnsupportedError):
            user_dtype(bad)


# -- data both ways ---------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("name", list(DTYPES))
def test_zarr_python_writes_chunkstore_reads(tmp_path, fmt, name):
    dtype = DTYPES[name]
    data = records(dtype, 7)
    fill = records(dtype, 9)[8]
    path = str(tmp_path / "z.zarr")
    # zarr-python cannot compress records with datetime fields (the buffer protocol)
    comp = None if name == "mixed" else "auto"
    z = zarr.create_array(path, shape=(10,), chunks=(4,), dtype=dtype, zarr_format=fmt,
                          fill_value=fill, compressors=comp)
    z[:7] = data
    a = cs.open_array(path, mode="r")
    assert a.dtype == dtype and a.zarr_format == fmt
    same(a.fill_value, fill)
    same(a[:], z[:])
    same(a[:7], data)
    same(a[7:], np.array([fill] * 3, dtype=dtype))  # chunk 2 partly, never-written 9
    same(a.oindex[[6, 0, 9]], z.oindex[[6, 0, 9]])
    same(a.vindex[[1, 8]], z.vindex[[1, 8]])
    if fmt == 2 and name == "nested" and not ZARR_STRUCT:  # 3.1 cannot read what it wrote
        return
    same(zarr.open_array(path)[:], a[:])


@NO_STRUCT
@pytest.mark.parametrize("name", ["point", "nested",
                                  "mixed"])
def test_chunkstore_writes_v3_zarr_python_reads(tmp_path, name):
    dtype = DTYPES[name]
    data = records(dtype, 7)
    fill = records(dtype, 9)[8]
    path = str(tmp_path / "c.zarr")
    a = cs.create_array(path, shape=(10,), chunks=(4,), dtype=dtype, fill_value=fill)
    a[:7] = data
    a[2] = data[5]
    expect = np.concatenate([data, [fill] * 3]).astype(dtype)
    expect[2] = data[5]
    z = zarr.open_array(path, mode="r")
    assert z.dtype == dtype if hasattr(z.dtype, "names") else True
    same(z[:], expect)
    same(np.asarray(z.fill_value).reshape(()), np.asarray(fill))
    same(a[:], expect)
    doc = json.load(open(f"{path}/zarr.json"))
    assert doc["data_type"] == json.loads(json.dumps(v3_name_of(dtype)))
    # chunkstore compresses records with datetime fields too; zarr-python reads them
    assert any(c["name"] != "bytes" for c in doc["codecs"])


def test_big_endian_fields_stored_little_endian_in_v3(tmp_path):
    """v3 fields have no byte order: values of a big-endian record dtype are stored
    little-endian (zarr-python 3.1 writes the raw big-endian bytes, which it then reads
    back wrong); v2 keeps the fields' own order, as zarr-python does."""
    data = np.array([(1, 1.0), (-2, 2.5)], dtype=BIG)
    path = str(tmp_path / "big3.zarr")
    a = cs.create_array(path, shape=(2,), chunks=(2,), dtype=BIG, compressors=None)
    a[:] = data
    assert a.dtype == POINT
    raw = open(f"{path}/c/0", "rb").read()
    assert raw == data.astype(POINT).tobytes()
    if ZARR_STRUCT:
        same(zarr.open_array(path)[:], data.astype(POINT))


def _write_v2(path: str, dtype: np.dtype, fill, compressor=None) -> cs.Array:
    """A v2 structured array created from its metadata (``cs.create_array`` for v2 goes
    through ``creation.build_array_metadata``, which the lead changes: see below)."""
    store = cs.LocalStore(path)
    meta = ArrayMetadataV2(shape=(10,), dtype=dtype, chunk_shape=(4,),
                           fill_value=normalize_fill_value(fill, dtype), compressor=compressor)
    write_node(store, "", meta)
    return cs.open_array(store, mode="r+")


@pytest.mark.parametrize("name", list(DTYPES) + ["big"])
def test_chunkstore_writes_v2_zarr_python_reads(tmp_path, name):
    dtype = DTYPES.get(name, BIG)
    data = records(dtype, 7)
    fill = records(dtype, 9)[8]
    path = str(tmp_path / "c2.zarr")
    # numcodecs compressors refuse records with datetime fields (as for zarr-python)
    a = _write_v2(path, dtype, fill, None if name == "mixed" else {"id": "zstd", "level": 1})
    a[:7] = data
    expect = np.concatenate([data, [fill] * 3]).astype(dtype)
    same(a[:], expect)
    doc = json.load(open(f"{path}/.zarray"))
    assert doc["dtype"] == json.loads(json.dumps(v2_str_of(dtype)))
    if name == "nested" and not ZARR_STRUCT:  # 3.1 cannot parse nested v2 records it wrote
        with pytest.raises(ValueError):
            zarr.open_array(path, mode="r")
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z = zarr.open_array(path, mode="r")
        same(z[:], expect)
        same(np.asarray(z.fill_value).reshape(()), np.asarray(fill))


def test_create_array_v2_structured(tmp_path):
    a = cs.create_array(str(tmp_path / "v2.zarr"), shape=(4,), chunks=(2,), dtype=POINT,
                        zarr_format=2, fill_value=(1, 2.5))
    a[:2] = records(POINT, 2)
    same(zarr.open_array(str(tmp_path / "v2.zarr"))[:2], records(POINT, 2))


def test_records_of_equal_size_read_alternately():
    d1 = np.dtype([("a", "<i4"), ("b", "<f4")])
    d2 = np.dtype([("x", "<f4"), ("y", "<i4")])
    v1 = np.array([(i, i + 0.5) for i in range(10)], dtype=d1)
    v2 = np.array([(i * 1.25, -i) for i in range(10)], dtype=d2)
    a = cs.create_array(None, shape=(10,), chunks=(4,), dtype=d1)
    b = cs.create_array(None, shape=(10,), chunks=(4,), dtype=d2)
    a[:], b[:] = v1, v2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = (a[1:3], b[1:3], a[5:6], b[5:6])
    same(got[0], v1[1:3])
    same(got[1], v2[1:3])
    same(got[2], v1[5:6])
    same(got[3], v2[5:6])


def test_partial_updates_and_selections_match_numpy():
    data = records(NESTED, 23).reshape(23)
    a = cs.create_array(None, shape=(23,), chunks=(5,), dtype=NESTED)
    a[:] = data
    expect = data.copy()
    a[3:8] = data[10:15]
    expect[3:8] = data[10:15]
    a.oindex[[0, 22]] = data[[1, 2]]
    expect[[0, 22]] = data[[1, 2]]
    same(a[:], expect)
    same(a[::-3], expect[::-3])
    same(a.get_mask_selection(np.arange(23) % 4 == 0), expect[np.arange(23) % 4 == 0])
    assert a[4] == expect[4]
