"""Round trips with tensorstore (zarr3 and zarr v2 drivers) in both directions: every
numeric dtype x codec chains x layouts, fill values, attributes and dimension names."""

from __future__ import annotations

import json

import numpy as np
import pytest

import chunkstore as cs

from . import LAYOUT_SHAPES, NUMERIC, assert_same, chunk_keys, diff_fields, read_doc, sample

ts = pytest.importorskip("tensorstore")

BLOSC = {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle"}}
CHAINS = {
    "none": [],
    "blosc-lz4-shuffle": [BLOSC],
    "blosc-zstd-bitshuffle": [{"name": "blosc", "configuration": {
        "cname": "zstd", "clevel": 3, "shuffle": "bitshuffle"}}],
    "gzip": [{"name": "gzip", "configuration": {"level": 1}}],
    "zstd": [{"name": "zstd", "configuration": {"level": 2, "checksum": False}}],
    "crc32c": [{"name": "crc32c"}],
    "transpose": "transpose",
    "big-endian": "big",
}


def codecs_for(chain, dtype, ndim):
    """The v3 ``codecs`` list both libraries get (the spec's JSON form)."""
    spec = CHAINS[chain]
    endian = "big" if spec == "big" else "little"
    out = []
    if spec == "transpose" and ndim:
        out.append({"name": "transpose", "configuration": {"order": list(range(ndim))[::-1]}})
    out.append({"name": "bytes", "configuration": {"endian": endian}}
               if np.dtype(dtype).itemsize > 1 else {"name": "bytes"})
    if isinstance(spec, list):
        out += spec
    elif spec == "transpose":
        out.append({"name": "zstd", "configuration": {"level": 1, "checksum": False}})
    else:
        out.append({"name": "gzip", "configuration": {"level": 1}})
    return out


def _kv(path):
    return {"driver": "file", "path": str(path)}


def ts_write_v3(path, data, codecs, chunks, fill_value=None, keys=None, region=Ellipsis,
                shape=None, **meta):
    shape = data.shape if shape is None else shape
    metadata = {"shape": list(shape), "data_type": str(np.dtype(data.dtype)),
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
                "codecs": codecs, **meta}
    if fill_value is not None:
        metadata["fill_value"] = fill_value
    if keys is not None:
        metadata["chunk_key_encoding"] = keys
    store = ts.open({"driver": "zarr3", "kvstore": _kv(path), "metadata": metadata},
                    create=True).result()
    store[region].write(data).result()


def ts_read(path, driver="zarr3"):
    store = ts.open({"driver": driver, "kvstore": _kv(path)}, open=True, read=True).result()
    return store.read().result()


def cs_write_v3(path, data, codecs, chunks, fill_value=None, keys=None, region=Ellipsis,
                shape=None, **meta):
    shape = data.shape if shape is None else shape
    a = cs.create_array(str(path), shape=shape, chunks=chunks, dtype=data.dtype, codecs=codecs,
                        fill_value=fill_value, chunk_key_encoding=keys, **meta)
    a[region] = data
    return a


# -- v3: dtype x chain -----------------------------------------------------------------------
@pytest.mark.parametrize("chain", list(CHAINS))
@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("writer", ["cs", "ts"])
def test_v3_dtype_codec(tmp_path, writer, dtype, chain):
    data = sample(dtype, (11, 6), seed=3)
    codecs = codecs_for(chain, dtype, 2)
    path = tmp_path / "a.zarr"
    if writer == "cs":
        cs_write_v3(path, data, codecs, (4, 4))
        got = ts_read(path)
    else:
        ts_write_v3(path, data, codecs, (4, 4))
        got = cs.open_array(str(path), mode="r")[...]
    assert_same(got, data)


# -- v3: layouts ---------------------------------------------------------------------------------
KEYS = {"default": None, "v2-dot": {"name": "v2", "configuration": {"separator": "."}},
        "v2-slash": {"name": "v2", "configuration": {"separator": "/"}},
        "default-dot": {"name": "default", "configuration": {"separator": "."}}}
LAYOUT_KEYS = [(layout, "default") for layout in LAYOUT_SHAPES] + [
    (layout, keys) for keys in KEYS if keys != "default" for layout in ("edge", "0-d")]


@pytest.mark.parametrize(("layout", "keys"), LAYOUT_KEYS)
@pytest.mark.parametrize("chain", ["none", "transpose"])
@pytest.mark.parametrize("writer", ["cs", "ts"])
def test_v3_layouts(tmp_path, writer, chain, layout, keys):
    shape, chunks = LAYOUT_SHAPES[layout]
    data = sample("int16", shape, seed=5)
    codecs = codecs_for(chain, "int16", len(shape))
    a, b = tmp_path / "a.zarr", tmp_path / "b.zarr"
    if writer == "cs":
        cs_write_v3(a, data, codecs, chunks, keys=KEYS[keys])
        assert_same(ts_read(a), data)
        ts_write_v3(b, data, codecs, chunks, keys=KEYS[keys])
    else:
        ts_write_v3(a, data, codecs, chunks, keys=KEYS[keys])
        assert_same(cs.open_array(str(a), mode="r")[...], data)
        cs_write_v3(b, data, codecs, chunks, keys=KEYS[keys])
    assert chunk_keys(a) == chunk_keys(b)


# -- v3: fill values, attributes, dimension names ---------------------------------------------------
FILLS = [("float32", "NaN"), ("float64", "Infinity"), ("float16", "-Infinity"),
         ("float32", "0x7fc00001"), ("complex64", ["NaN", "Infinity"]), ("uint64", 2**64 - 1),
         ("int32", -17), ("bool", True)]


@pytest.mark.parametrize(("dtype", "fill"), FILLS, ids=str)
@pytest.mark.parametrize("writer", ["cs", "ts"])
def test_v3_fill_values(tmp_path, writer, dtype, fill):
    path = tmp_path / "a.zarr"
    data = sample(dtype, (2, 5))
    codecs = codecs_for("zstd", dtype, 2)
    if writer == "ts":
        ts_write_v3(path, data, codecs, (2, 5), fill_value=fill, region=np.s_[:2], shape=(6, 5))
        a = cs.open_array(str(path), mode="r")
        got, fill_value = a[...], a.fill_value
    else:
        from chunkstore.metadata.dtypes import parse_fill_value
        value = parse_fill_value(fill, np.dtype(dtype), "test")
        cs_write_v3(path, data, codecs, (2, 5), fill_value=value, region=slice(0, 2),
                    shape=(6, 5))
        assert read_doc(path)["fill_value"] == fill  # written exactly as the spec encodes it
        store = ts.open({"driver": "zarr3", "kvstore": _kv(path)}, open=True).result()
        got, fill_value = store.read().result(), np.asarray(store.fill_value)
    assert_same(got[:2], data)
    expect_fill = np.asarray(fill_value, dtype=dtype)
    # the unwritten rows are the fill value, bit for bit (a NaN payload included)
    assert got[2:].tobytes() == np.full((4, 5), expect_fill, dtype=dtype).tobytes()
    if fill == "0x7fc00001":
        assert np.asarray(fill_value, "<f4").view("<u4") == 0x7FC00001


@pytest.mark.parametrize("writer", ["cs", "ts"])
def test_v3_attributes_and_dimension_names(tmp_path, writer):
    path = tmp_path / "a.zarr"
    data = np.arange(12, dtype="f8").reshape(3, 4)
    attrs = {"units": "m", "list": [1, None, "x"]}
    codecs = codecs_for("gzip", "f8", 2)
    if writer == "cs":
        cs_write_v3(path, data, codecs, (2, 2), attributes=attrs, dimension_names=["y", "x"])
        store = ts.open({"driver": "zarr3", "kvstore": _kv(path)}, open=True).result()
        assert list(store.domain.labels) == ["y", "x"]
        assert_same(store.read().result(), data)
    else:
        ts_write_v3(path, data, codecs, (2, 2), attributes=attrs, dimension_names=["y", "x"])
        a = cs.open_array(str(path), mode="r")
        assert dict(a.attrs) == attrs and a.dimension_names == ("y", "x")
        assert_same(a[...], data)


V3_FIELDS = ["zarr_format", "node_type", "shape", "data_type", "chunk_grid", "fill_value",
             "codecs", "attributes", "dimension_names"]


@pytest.mark.parametrize("chain", list(CHAINS))
def test_v3_metadata_documents_agree(tmp_path, chain):
    data = sample("float32", (5, 4))
    codecs = codecs_for(chain, "float32", 2)
    cs_write_v3(tmp_path / "cs.zarr", data, codecs, (2, 3), fill_value=np.nan,
                dimension_names=["a", "b"], attributes={"k": 1})
    ts_write_v3(tmp_path / "ts.zarr", data, codecs, (2, 3), fill_value="NaN",
                dimension_names=["a", "b"], attributes={"k": 1})
    ours, theirs = read_doc(tmp_path / "cs.zarr"), read_doc(tmp_path / "ts.zarr")
    for doc in (ours, theirs):  # blosc's derived typesize/blocksize: compared below
        for c in doc["codecs"]:
            if c["name"] == "blosc":
                assert c["configuration"].pop("typesize") == 4
                c["configuration"].pop("blocksize", None)
    assert diff_fields(ours, theirs, V3_FIELDS) == []
    # tensorstore omits the default key encoding; the meaning is the same
    assert ours["chunk_key_encoding"] == {"name": "default", "configuration": {"separator": "/"}}
    assert theirs.get("chunk_key_encoding", {"name": "default"})["name"] == "default"


# -- v2 (tensorstore's "zarr" driver) --------------------------------------------------------------
V2_COMPRESSORS = {
    "none": None,
    "blosc": {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0},
    "zstd": {"id": "zstd", "level": 1},
    "zlib": {"id": "zlib", "level": 1},
}


V2_CASES = [(c, ".", "C") for c in V2_COMPRESSORS] + [
    ("blosc", sep, order) for sep, order in ((".", "F"), ("/", "C"), ("/", "F"))]


@pytest.mark.parametrize(("compressor", "sep", "order"), V2_CASES)
@pytest.mark.parametrize("dtype", ["<f8", ">i4", "|u1", "<c8", ">f2", "|b1"])
@pytest.mark.parametrize("writer", ["cs", "ts"])
def test_v2(tmp_path, writer, dtype, compressor, sep, order):
    data = sample(dtype, (9, 5), seed=7)
    path = tmp_path / "a.zarr"
    comp = V2_COMPRESSORS[compressor]
    if writer == "cs":
        cs.create_array(str(path), shape=data.shape, chunks=(4, 3), dtype=dtype, zarr_format=2,
                        compressors=comp, order=order, dimension_separator=sep)[...] = data
        got = ts_read(path, "zarr")
    else:
        metadata = {"shape": list(data.shape), "chunks": [4, 3], "dtype": dtype,
                    "compressor": comp, "order": order, "dimension_separator": sep,
                    "fill_value": None, "filters": None}
        store = ts.open({"driver": "zarr", "kvstore": _kv(path), "metadata": metadata},
                        create=True).result()
        store.write(data).result()
        assert json.loads((path / ".zarray").read_text())["dtype"] == dtype
        got = cs.open_array(str(path), mode="r")[...]
    assert_same(got, data)
