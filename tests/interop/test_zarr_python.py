"""Round trips with zarr-python 3 in both directions, v3 and v2: every numeric dtype x codec
chains x layouts, fill values, attributes and dimension names; metadata compared field by
field where the two implementations should write the same document."""

from __future__ import annotations

import math

import numcodecs
import numpy as np
import pytest

import chunkstore as cs

from . import LAYOUT_SHAPES, NUMERIC, assert_same, chunk_keys, diff_fields, read_doc, sample

zarr = pytest.importorskip("zarr")
from zarr import codecs as zc  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

# -- v3 codec chains: chunkstore JSON entries and the zarr-python objects --------------------------


def _blosc(cname, shuffle):
    return ({"name": "blosc", "configuration": {"cname": cname, "clevel": 5, "shuffle": shuffle}},
            lambda: zc.BloscCodec(cname=cname, clevel=5, shuffle=shuffle))


CHAINS = {
    # name: (filters?, endian, [(chunkstore json, zarr factory)] compressors)
    "none": (False, "little", []),
    "blosc-lz4-shuffle": (False, "little", [_blosc("lz4", "shuffle")]),
    "blosc-zstd-bitshuffle": (False, "little", [_blosc("zstd", "bitshuffle")]),
    "blosc-lz4-noshuffle": (False, "little", [_blosc("lz4", "noshuffle")]),
    "gzip": (False, "little", [({"name": "gzip", "configuration": {"level": 1}},
                                lambda: zc.GzipCodec(level=1))]),
    "zstd": (False, "little", [({"name": "zstd", "configuration": {"level": 3, "checksum": False}},
                                lambda: zc.ZstdCodec(level=3, checksum=False))]),
    "crc32c": (False, "little", [({"name": "crc32c", "configuration": {}},
                                  lambda: zc.Crc32cCodec())]),
    "transpose": (True, "little", [({"name": "zstd", "configuration": {"level": 1,
                                                                        "checksum": False}},
                                    lambda: zc.ZstdCodec(level=1, checksum=False))]),
    "big-endian": (False, "big", [({"name": "gzip", "configuration": {"level": 1}},
                                   lambda: zc.GzipCodec(level=1))]),
}


def _order(ndim):
    return list(range(ndim))[::-1]


def cs_codecs(chain, ndim):
    transpose, endian, comps = CHAINS[chain]
    out = []
    if transpose and ndim:
        out.append({"name": "transpose", "configuration": {"order": _order(ndim)}})
    out.append({"name": "bytes", "configuration": {"endian": endian}})
    return out + [c for c, _ in comps]


def zarr_codec_kwargs(chain, ndim):
    transpose, endian, comps = CHAINS[chain]
    return {
        "filters": [zc.TransposeCodec(order=_order(ndim))] if transpose and ndim else None,
        "serializer": zc.BytesCodec(endian=endian),
        "compressors": [f() for _, f in comps] or None,
    }


KEY_ENCODINGS = {
    "default": None,
    "default-dot": {"name": "default", "separator": "."},
    "v2-dot": {"name": "v2", "separator": "."},
    "v2-slash": {"name": "v2", "separator": "/"},
}


def _zarr_key_encoding(enc):
    if enc is None:
        return None
    return {"name": enc["name"], "configuration": {"separator": enc["separator"]}}


def write_v3(who, path, data, chain="none", keys="default", fill_value=None, region=Ellipsis,
             **extra):
    shape, chunks = extra.pop("shape", data.shape), extra.pop("chunks")
    if who == "cs":
        a = cs.create_array(str(path), shape=shape, chunks=chunks, dtype=data.dtype,
                            codecs=cs_codecs(chain, len(shape)), fill_value=fill_value,
                            chunk_key_encoding=KEY_ENCODINGS[keys], **extra)
    else:
        kw = {"chunk_key_encoding": _zarr_key_encoding(KEY_ENCODINGS[keys])} \
            if KEY_ENCODINGS[keys] else {}
        a = zarr.create_array(store=str(path), shape=shape, chunks=chunks, dtype=data.dtype,
                              fill_value=fill_value, zarr_format=3,
                              **zarr_codec_kwargs(chain, len(shape)), **kw, **extra)
    a[region] = data
    return a


def read(who, path):
    if who == "cs":
        return cs.open_array(str(path), mode="r")[...]
    return zarr.open_array(str(path), mode="r")[...]


OTHER = {"cs": "zarr", "zarr": "cs"}
DIRECTIONS = ["cs", "zarr"]  # the writer; the other one reads


# -- v3: dtype x chain ------------------------------------------------------------------------
@pytest.mark.parametrize("chain", list(CHAINS))
@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("writer", DIRECTIONS)
def test_v3_dtype_codec(tmp_path, writer, dtype, chain):
    data = sample(dtype, (13, 7), seed=len(chain))
    write_v3(writer, tmp_path / "a.zarr", data, chain, chunks=(4, 3))
    assert_same(read(OTHER[writer], tmp_path / "a.zarr"), data)
    assert_same(read(writer, tmp_path / "a.zarr"), data)


# -- v3: layout x chain (two dtypes) ------------------------------------------------------------
LAYOUT_KEYS = [(layout, "default") for layout in LAYOUT_SHAPES] + [
    (layout, keys) for keys in KEY_ENCODINGS if keys != "default"
    for layout in ("edge", "0-d", "3-d")]


@pytest.mark.parametrize(("layout", "keys"), LAYOUT_KEYS)
@pytest.mark.parametrize("chain", ["none", "transpose", "blosc-lz4-shuffle"])
@pytest.mark.parametrize("writer", DIRECTIONS)
def test_v3_layouts(tmp_path, writer, chain, layout, keys):
    shape, chunks = LAYOUT_SHAPES[layout]
    data = sample("float32" if writer == "cs" else "uint16", shape)
    path = tmp_path / "a.zarr"
    write_v3(writer, path, data, chain, keys, chunks=chunks)
    assert_same(read(OTHER[writer], path), data)
    # both write the same chunk keys for the same data
    other_path = tmp_path / "b.zarr"
    write_v3(OTHER[writer], other_path, data, chain, keys, chunks=chunks)
    assert chunk_keys(path) == chunk_keys(other_path)


def test_v3_zero_d_key_names(tmp_path):
    write_v3("cs", tmp_path / "d.zarr", np.array(2.5), chunks=())
    write_v3("cs", tmp_path / "v.zarr", np.array(2.5), keys="v2-dot", chunks=())
    assert chunk_keys(tmp_path / "d.zarr") == {"c"}
    assert chunk_keys(tmp_path / "v.zarr") == {"0"}


# -- v3: fill values -----------------------------------------------------------------------------
FILLS = [("float16", np.nan), ("float32", np.inf), ("float64", -np.inf), ("float64", np.nan),
         ("float32", -0.0), ("complex64", complex(np.nan, np.inf)),
         ("complex128", complex(-np.inf, 0.5)), ("int64", -(2**63)), ("uint64", 2**64 - 1),
         ("bool", True), ("int8", -7)]


@pytest.mark.parametrize(("dtype", "fill"), FILLS, ids=lambda v: str(v))
@pytest.mark.parametrize("writer", DIRECTIONS)
def test_v3_fill_values(tmp_path, writer, dtype, fill):
    path = tmp_path / "a.zarr"
    data = sample(dtype, (6, 5))
    a = write_v3(writer, path, data[:2], chain="zstd", fill_value=fill, shape=(6, 5),
                 chunks=(2, 5), region=slice(0, 2))
    assert a.shape == (6, 5)
    expect = np.full((6, 5), fill, dtype=dtype)
    expect[:2] = data[:2]
    assert_same(read(OTHER[writer], path), expect)
    ours = cs.open_array(str(path), mode="r").fill_value
    theirs = zarr.open_array(str(path), mode="r").fill_value
    assert np.asarray(ours).tobytes() == np.asarray(theirs, dtype=dtype).tobytes()
    # both libraries encode the fill value the same way
    other = tmp_path / "b.zarr"
    write_v3(OTHER[writer], other, data[:2], chain="zstd", fill_value=fill, shape=(6, 5),
             chunks=(2, 5), region=slice(0, 2))
    assert read_doc(path)["fill_value"] == read_doc(other)["fill_value"]


def test_v3_reads_hex_nan_fill(tmp_path):
    import json
    path = tmp_path / "a.zarr"
    write_v3("zarr", path, np.zeros(3, "f4"), chunks=(2,), fill_value=np.nan)
    doc = read_doc(path)
    doc["fill_value"] = "0x7fc00001"
    (path / "zarr.json").write_text(json.dumps(doc))
    a = cs.open_array(str(path), mode="r")
    assert np.asarray(a.fill_value, "<f4").view("<u4") == 0x7FC00001


# -- v3: attributes, dimension names, metadata documents ---------------------------------------
@pytest.mark.parametrize("writer", DIRECTIONS)
def test_v3_attributes_and_dimension_names(tmp_path, writer):
    path = tmp_path / "a.zarr"
    attrs = {"title": "t", "nested": {"list": [1, 2.5, None, "x"]}, "flag": True}
    write_v3(writer, path, np.arange(6, dtype="i4").reshape(2, 3), chunks=(1, 3),
             attributes=attrs, dimension_names=["time", None])
    if writer == "cs":
        z = zarr.open_array(str(path), mode="r")
        assert dict(z.attrs) == attrs
        assert tuple(z.metadata.dimension_names) == ("time", None)
    else:
        a = cs.open_array(str(path), mode="r")
        assert dict(a.attrs) == attrs
        assert a.dimension_names == ("time", None)


@pytest.mark.parametrize("writer", DIRECTIONS)
def test_v3_attribute_update_seen_by_peer(tmp_path, writer):
    path = tmp_path / "a.zarr"
    write_v3(writer, path, np.arange(4, dtype="i2"), chunks=(2,))
    if writer == "cs":
        cs.open_array(str(path), mode="r+").attrs["k"] = [1, 2]
        assert zarr.open_array(str(path), mode="r").attrs["k"] == [1, 2]
    else:
        zarr.open_array(str(path), mode="r+").attrs["k"] = [1, 2]
        assert cs.open_array(str(path), mode="r").attrs["k"] == [1, 2]


V3_FIELDS = ["zarr_format", "node_type", "shape", "data_type", "chunk_grid",
             "chunk_key_encoding", "fill_value", "codecs", "attributes", "dimension_names"]


@pytest.mark.parametrize("chain", list(CHAINS))
@pytest.mark.parametrize("dtype", ["uint8", "int32", "float64", "complex64", "bool"])
def test_v3_metadata_documents_agree(tmp_path, dtype, chain):
    data = sample(dtype, (5, 4))
    extra = {"attributes": {"a": 1}, "dimension_names": ["y", "x"]}
    write_v3("cs", tmp_path / "cs.zarr", data, chain, "v2-dot", chunks=(2, 3), **extra)
    write_v3("zarr", tmp_path / "z.zarr", data, chain, "v2-dot", chunks=(2, 3), **extra)
    ours, theirs = read_doc(tmp_path / "cs.zarr"), read_doc(tmp_path / "z.zarr")
    assert diff_fields(ours, theirs, V3_FIELDS) == []
    assert not theirs.get("storage_transformers")


# -- v2 ---------------------------------------------------------------------------------------------
V2_DTYPES = ["|b1", "|i1", "|u1", "<i2", ">i2", "<i4", ">i4", "<i8", ">i8", "<u2", ">u2", "<u4",
             ">u4", "<u8", ">u8", "<f2", ">f2", "<f4", ">f4", "<f8", ">f8", "<c8", ">c8",
             "<c16", ">c16"]

V2_COMPRESSORS = {
    "none": lambda: None,
    "blosc-lz4-shuffle": lambda: numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE),
    "blosc-zstd-bitshuffle": lambda: numcodecs.Blosc("zstd", 3, numcodecs.Blosc.BITSHUFFLE),
    "zstd": lambda: numcodecs.Zstd(level=1),
    "gzip": lambda: numcodecs.GZip(level=1),
    "zlib": lambda: numcodecs.Zlib(level=1),
    "crc32c": lambda: numcodecs.CRC32C(),
}


def write_v2(who, path, data, compressor="none", filters=None, sep=".", order="C",
             fill_value=None, chunks=None, shape=None, region=Ellipsis, **extra):
    shape = data.shape if shape is None else shape
    comp = V2_COMPRESSORS[compressor]()
    if who == "cs":
        a = cs.create_array(str(path), shape=shape, chunks=chunks, dtype=data.dtype,
                            zarr_format=2, compressors=comp, filters=filters, order=order,
                            dimension_separator=sep, fill_value=fill_value, **extra)
    else:
        a = zarr.create_array(store=str(path), shape=shape, chunks=chunks, dtype=data.dtype,
                              zarr_format=2, compressors=comp, filters=filters, order=order,
                              chunk_key_encoding={"name": "v2", "separator": sep},
                              fill_value=fill_value, **extra)
    a[region] = data
    return a


@pytest.mark.parametrize("compressor", ["none", "blosc-lz4-shuffle"])
@pytest.mark.parametrize("dtype", V2_DTYPES)
@pytest.mark.parametrize("writer", DIRECTIONS)
def test_v2_dtype_byte_orders(tmp_path, writer, dtype, compressor):
    data = sample(dtype, (9, 4))
    path = tmp_path / "a.zarr"
    write_v2(writer, path, data, compressor, chunks=(4, 3))
    got = read(OTHER[writer], path)
    assert_same(got, data)
    assert read_doc(path, ".zarray")["dtype"] == dtype
    if writer == "zarr":
        assert got.dtype == np.dtype(dtype)  # chunkstore keeps the stored byte order


@pytest.mark.parametrize("compressor", list(V2_COMPRESSORS))
@pytest.mark.parametrize("dtype", ["<f8", ">i4"])
@pytest.mark.parametrize("writer", DIRECTIONS)
def test_v2_compressors(tmp_path, writer, dtype, compressor):
    data = sample(dtype, (9, 4))
    write_v2(writer, tmp_path / "a.zarr", data, compressor, chunks=(4, 3))
    assert_same(read(OTHER[writer], tmp_path / "a.zarr"), data)


@pytest.mark.parametrize("filters", [
    [numcodecs.Delta(dtype="<i4")],
    [numcodecs.Delta(dtype="<i4"), numcodecs.Shuffle(elementsize=4)],
    [numcodecs.FixedScaleOffset(offset=0, scale=1, dtype="<i4", astype="<i2")],
], ids=["delta", "delta-shuffle", "fixedscaleoffset"])
@pytest.mark.parametrize("writer", DIRECTIONS)
def test_v2_filters(tmp_path, writer, filters):
    data = (np.arange(36, dtype="<i4").reshape(9, 4) * 7) % 300 - 150
    write_v2(writer, tmp_path / "a.zarr", data, "zstd", filters=filters, chunks=(4, 3))
    assert_same(read(OTHER[writer], tmp_path / "a.zarr"), data)


@pytest.mark.parametrize(("sep", "order"), [(".", "C"), ("/", "C"), (".", "F")])
@pytest.mark.parametrize("layout", list(LAYOUT_SHAPES))
@pytest.mark.parametrize("writer", DIRECTIONS)
def test_v2_layouts(tmp_path, writer, layout, sep, order):
    shape, chunks = LAYOUT_SHAPES[layout]
    data = sample("<f8" if writer == "cs" else ">u2", shape)
    path = tmp_path / "a.zarr"
    write_v2(writer, path, data, "blosc-lz4-shuffle", sep=sep, order=order, chunks=chunks)
    assert_same(read(OTHER[writer], path), data)
    other = tmp_path / "b.zarr"
    write_v2(OTHER[writer], other, data, "blosc-lz4-shuffle", sep=sep, order=order,
             chunks=chunks)
    assert chunk_keys(path) == chunk_keys(other)
    if layout == "0-d":
        assert chunk_keys(path) == {"0"}


@pytest.mark.parametrize(("dtype", "fill"), [
    ("<f8", None), ("<f4", np.nan), (">f8", np.inf), ("<f2", -np.inf), ("<i4", 0),
    ("<i8", -5), ("<c16", complex(np.nan, 2)), ("|b1", True), ("<f8", 1.5)], ids=str)
@pytest.mark.parametrize("writer", DIRECTIONS)
def test_v2_fill_values(tmp_path, writer, dtype, fill):
    data = sample(dtype, (6, 5))
    path = tmp_path / "a.zarr"
    write_v2(writer, path, data[:2], "zlib", fill_value=fill, shape=(6, 5), chunks=(2, 5),
             region=slice(0, 2))
    got = read(OTHER[writer], path)
    assert_same(got[:2], data[:2])
    if fill is not None:
        assert_same(got[2:], np.full((4, 5), fill, dtype=dtype))
    other = tmp_path / "b.zarr"
    write_v2(OTHER[writer], other, data[:2], "zlib", fill_value=fill, shape=(6, 5),
             chunks=(2, 5), region=slice(0, 2))
    ours = read_doc(path if writer == "cs" else other, ".zarray")
    theirs = read_doc(other if writer == "cs" else path, ".zarray")
    if fill is None and ours["fill_value"] != theirs["fill_value"]:
        # zarr-python writes a type default for fill_value=None; chunkstore writes 0
        assert theirs["fill_value"] in (0, 0.0, None, False)
        return
    assert ours["fill_value"] == theirs["fill_value"]
    if isinstance(fill, float) and math.isnan(fill):
        assert ours["fill_value"] == "NaN"


V2_FIELDS = ["zarr_format", "shape", "chunks", "dtype", "compressor", "fill_value", "order",
             "filters", "dimension_separator"]


@pytest.mark.parametrize("compressor", list(V2_COMPRESSORS))
@pytest.mark.parametrize("order", ["C", "F"])
def test_v2_metadata_documents_agree(tmp_path, compressor, order):
    # finite data in whole chunks: a NaN or inf (in the data, or the NaN fill padding an
    # edge chunk) spoils delta's running difference, and chunkstore refuses such chunks
    data = np.nan_to_num(sample(">f4", (4, 6)), posinf=1e30, neginf=-1e30)
    filters = [numcodecs.Delta(dtype=">f4")]
    for who in DIRECTIONS:
        write_v2(who, tmp_path / f"{who}.zarr", data, compressor, filters=filters, sep="/",
                 order=order, fill_value=np.nan, chunks=(2, 3), attributes={"a": [1]})
    ours, theirs = read_doc(tmp_path / "cs.zarr", ".zarray"), read_doc(tmp_path / "zarr.zarr",
                                                                       ".zarray")
    assert diff_fields(ours, theirs, V2_FIELDS) == []
    assert read_doc(tmp_path / "cs.zarr", ".zattrs") == read_doc(tmp_path / "zarr.zarr",
                                                                 ".zattrs")


# -- v3: numcodecs.<id> codecs as zarr-python writes them ----------------------------------------
NUMCODECS_V3 = {
    "delta": ("filters", {"dtype": "<i4"}),
    "fixedscaleoffset": ("filters", {"offset": 5, "scale": 1, "dtype": "<i4", "astype": "<i2"}),
    "zlib": ("compressors", {"level": 1}),
    "lzma": ("compressors", {}),
    "shuffle": ("compressors", {"elementsize": 4}),
    "adler32": ("compressors", {}),
}


@pytest.mark.parametrize("cid", list(NUMCODECS_V3))
@pytest.mark.parametrize("writer", DIRECTIONS)
def test_v3_numcodecs_codecs(tmp_path, writer, cid):
    from zarr.codecs import numcodecs as zn
    cls = {"delta": zn.Delta, "fixedscaleoffset": zn.FixedScaleOffset, "zlib": zn.Zlib,
           "lzma": zn.LZMA, "shuffle": zn.Shuffle, "adler32": zn.Adler32}[cid]
    kind, config = NUMCODECS_V3[cid]
    data = (np.arange(63, dtype="<i4").reshape(9, 7) * 13) % 1000 - 400
    path = tmp_path / "a.zarr"
    if writer == "zarr":
        kw = {"filters": None, "compressors": None, kind: [cls(**config)]}
        z = zarr.create_array(store=str(path), shape=data.shape, chunks=(4, 3), dtype="<i4",
                              zarr_format=3, **kw)
        z[...] = data
    else:
        codec = {"name": f"numcodecs.{cid}", "configuration": config}
        codecs = [codec, "bytes"] if kind == "filters" else ["bytes", codec]
        cs.create_array(str(path), shape=data.shape, chunks=(4, 3), dtype="<i4",
                        codecs=codecs)[...] = data
    assert [c["name"] for c in read_doc(path)["codecs"]] == (
        [f"numcodecs.{cid}", "bytes"] if kind == "filters" else ["bytes", f"numcodecs.{cid}"])
    assert_same(read(OTHER[writer], path), data)


# -- defaults of each library ------------------------------------------------------------------
@pytest.mark.parametrize("zarr_format", [3, 2])
@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("writer", DIRECTIONS)
def test_default_settings(tmp_path, writer, dtype, zarr_format):
    data = sample(dtype, (10, 6), seed=11)
    path = tmp_path / "a.zarr"
    if writer == "cs":
        cs.create_array(str(path), shape=data.shape, chunks=(4, 4), dtype=dtype,
                        zarr_format=zarr_format)[...] = data
    else:
        zarr.create_array(store=str(path), shape=data.shape, chunks=(4, 4), dtype=dtype,
                          zarr_format=zarr_format)[...] = data
    assert_same(read(OTHER[writer], path), data)


def test_v2_nan_payload_fill_readable(tmp_path):
    nan = np.array([0x7FC00001], "<u4").view("<f4")[0]
    path = tmp_path / "a.zarr"
    cs.create_array(str(path), shape=(3,), chunks=(2,), dtype="<f4", zarr_format=2,
                    fill_value=nan)
    assert read_doc(path, ".zarray")["fill_value"] == "NaN"
    assert np.isnan(read("zarr", path)).all()
