"""Red team round 5: bounded reads must never refuse a legitimate chunk.

Every array here is written by a peer (zarr-python 3, tensorstore) with a codec chain
whose encoded size the bound (``Pipeline.stored_bound`` / ``shard_bound``) must
cover: blosc with every shuffle, zstd, gzip, lz4, bz2, lzma, zlib, numcodecs filters
that change the dtype or the size (delta/fixedscaleoffset/quantize/astype/packbits/
categorize), checksums, transpose, big-endian bytes, sharding (index at the start or
end, with and without crc32c), v2 with "/" separators and F order, vlen strings,
structured dtypes, incompressible data and edge chunks. chunkstore must read each one
exactly, and a partial write (a read-modify-write, which passes ``max_bytes`` to the
store) must succeed and be read back exactly by the peer.
"""

from __future__ import annotations

import numcodecs
import numpy as np
import pytest

import chunkstore as cs

zarr = pytest.importorskip("zarr")

SHAPE, CHUNKS = (37, 23), (10, 8)


def _data(dtype: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.integers(0, 2, SHAPE).astype(bool)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(max(info.min, -(2**62)), min(info.max, 2**62), SHAPE,
                            dtype=np.int64 if dt.kind == "i" else np.uint64).astype(dt)
    if dt.kind == "f":
        return rng.standard_normal(SHAPE).astype(dt)
    raise AssertionError(dtype)


def _zc():
    import warnings

    from zarr import codecs as zc
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import numcodecs.zarr3 as nz3
    return zc, nz3


def _v3_cases():
    zc, nz3 = _zc()
    cases = {}
    for shuffle in ("noshuffle", "shuffle", "bitshuffle"):
        for cname in ("lz4", "zstd", "blosclz", "lz4hc", "zlib"):
            cases[f"blosc-{cname}-{shuffle}"] = ("f8", dict(
                compressors=[zc.BloscCodec(cname=cname, shuffle=shuffle, typesize=8)]))
    cases["blosc-typesize-mismatch"] = ("i2", dict(
        compressors=[zc.BloscCodec(cname="lz4", shuffle="shuffle", typesize=8)]))
    cases["zstd-checksum"] = ("f4", dict(compressors=[zc.ZstdCodec(level=3, checksum=True)]))
    cases["gzip-0"] = ("u8", dict(compressors=[zc.GzipCodec(level=0)]))
    cases["gzip-9"] = ("i4", dict(compressors=[zc.GzipCodec(level=9)]))
    cases["crc32c-only"] = ("f8", dict(compressors=[zc.Crc32cCodec()]))
    cases["zstd-crc32c"] = ("f8", dict(compressors=[zc.ZstdCodec(), zc.Crc32cCodec()]))
    cases["none"] = ("i8", dict(compressors=None))
    cases["big-endian"] = ("f8", dict(serializer=zc.BytesCodec(endian="big"),
                                      compressors=None))
    cases["transpose"] = ("i4", dict(filters=[zc.TransposeCodec(order=(1, 0))],
                                     compressors=[zc.ZstdCodec()]))
    cases["nc-lz4"] = ("f4", dict(compressors=[nz3.LZ4()]))
    cases["nc-bz2"] = ("f8", dict(compressors=[nz3.BZ2(level=9)]))
    cases["nc-lzma"] = ("f8", dict(compressors=[nz3.LZMA()]))
    cases["nc-zlib"] = ("f8", dict(compressors=[nz3.Zlib(level=1)]))
    cases["nc-shuffle-zlib"] = ("f8", dict(compressors=[nz3.Shuffle(elementsize=8),
                                                        nz3.Zlib()]))
    cases["nc-fletcher32"] = ("i4", dict(compressors=[nz3.Fletcher32()]))
    cases["nc-adler32"] = ("i4", dict(compressors=[nz3.Adler32()]))
    cases["nc-crc32"] = ("i4", dict(compressors=[nz3.CRC32()]))
    cases["nc-jenkins"] = ("i4", dict(compressors=[nz3.JenkinsLookup3()]))
    cases["nc-delta-widen"] = ("i2", dict(filters=[nz3.Delta(dtype="i2", astype="i8")],
                                          compressors=[zc.ZstdCodec()]))
    cases["nc-delta-widen-raw"] = ("i2", dict(filters=[nz3.Delta(dtype="i2", astype="i8")],
                                              compressors=None))
    cases["nc-astype-widen"] = ("f4", dict(filters=[nz3.AsType(encode_dtype="f8",
                                                               decode_dtype="f4")],
                                           compressors=None))
    cases["nc-fso-widen"] = ("i2", dict(filters=[nz3.FixedScaleOffset(
        offset=0, scale=1, dtype="i2", astype="i8")], compressors=None))
    cases["nc-quantize"] = ("f8", dict(filters=[nz3.Quantize(digits=3, dtype="f8")],
                                       compressors=[zc.ZstdCodec()]))
    cases["nc-bitround"] = ("f4", dict(filters=[nz3.BitRound(keepbits=10)],
                                       compressors=[zc.ZstdCodec()]))
    cases["nc-packbits"] = ("bool", dict(filters=[nz3.PackBits()], compressors=None))
    return cases


V3_CASES = sorted(_v3_cases())


def _exact(got: np.ndarray, want: np.ndarray, lossy: bool = False) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    if lossy:
        np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("case", V3_CASES)
def test_zarr_python_v3_chains_read_and_update_exactly(tmp_path, case):
    dtype, kw = _v3_cases()[case]
    path = str(tmp_path / "a.zarr")
    data = _data(dtype)
    z = zarr.create_array(path, shape=SHAPE, chunks=CHUNKS, dtype=dtype, zarr_format=3,
                          fill_value=0, **kw)
    z[...] = data
    want = np.asarray(z[...])  # lossy filters (quantize, bitround): what zarr reads
    lossy = case in ("nc-quantize", "nc-bitround")
    a = cs.open_array(path, mode="r+", cache=0)
    _exact(a[...], want)
    _exact(a[3:27, 5:19], want[3:27, 5:19])
    chunk = a.read_chunk((3, 2))  # an edge chunk, read whole
    _exact(chunk[:7, :7], want[30:, 16:])
    new = _data(dtype, seed=1)[:4, :5]
    a[34:, 19:] = new[:3, :4]  # an edge chunk, partly: a read-modify-write
    a[1, 1] = new[0, 0]
    want = want.copy()
    want[34:, 19:] = new[:3, :4]
    want[1, 1] = new[0, 0]
    got = a[...]
    if not lossy:
        _exact(got, want)
        _exact(np.asarray(zarr.open_array(path, mode="r")[...]), want)
    else:
        _exact(got, want, lossy=True)


def test_zarr_python_v3_incompressible_edge_and_big_chunks(tmp_path):
    """Random bytes through every compressor: the largest legitimate encodings."""
    zc, nz3 = _zc()
    rng = np.random.default_rng(5)
    data = rng.integers(0, 2**63, (300, 257), dtype=np.uint64)  # 600 KiB, random
    for i, comp in enumerate([nz3.BZ2(level=1), nz3.LZMA(preset=0), nz3.LZ4(),
                              zc.GzipCodec(level=1), zc.ZstdCodec(level=-5),
                              zc.BloscCodec(cname="zstd", shuffle="noshuffle", clevel=1)]):
        path = str(tmp_path / f"r{i}.zarr")
        z = zarr.create_array(path, shape=data.shape, chunks=(256, 256), dtype="u8",
                              compressors=[comp])
        z[...] = data
        a = cs.open_array(path, mode="r+", cache=0)
        np.testing.assert_array_equal(a[...], data)
        a[0, 0] = 1
        want = data.copy()
        want[0, 0] = 1
        np.testing.assert_array_equal(np.asarray(zarr.open_array(path)[...]), want)


def _v2_cases():
    cases = {
        "zlib": ("i4", dict(compressors=numcodecs.Zlib(1))),
        "none": ("f8", dict(compressors=None)),
        "blosc-bitshuffle": ("f4", dict(compressors=numcodecs.Blosc(
            cname="zstd", shuffle=numcodecs.Blosc.BITSHUFFLE))),
        "delta-widen": ("i2", dict(filters=[numcodecs.Delta(dtype="i2", astype="i8")],
                                   compressors=numcodecs.Zstd())),
        "delta-widen-raw": ("i2", dict(filters=[numcodecs.Delta(dtype="i2", astype="i8")],
                                       compressors=None)),
        "astype-widen-raw": ("f4", dict(filters=[numcodecs.AsType(encode_dtype="f8",
                                                                  decode_dtype="f4")],
                                        compressors=None)),
        "fso-u4-raw": ("u1", dict(filters=[numcodecs.FixedScaleOffset(
            offset=0, scale=1, dtype="u1", astype="u4")], compressors=None)),
        "packbits-raw": ("bool", dict(filters=[numcodecs.PackBits()], compressors=None)),
        "packbits-gzip": ("bool", dict(filters=[numcodecs.PackBits()],
                                       compressors=numcodecs.GZip(9))),
        "shuffle-filter": ("f8", dict(filters=[numcodecs.Shuffle(elementsize=8)],
                                      compressors=numcodecs.LZ4())),
        "crc32-compressor": ("i4", dict(compressors=numcodecs.CRC32())),
        "bz2": ("f8", dict(compressors=numcodecs.BZ2(9))),
        "lzma": ("f8", dict(compressors=numcodecs.LZMA())),
    }
    return cases


V2_CASES = sorted(_v2_cases())


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("case", V2_CASES)
def test_zarr_python_v2_chains_read_and_update_exactly(tmp_path, case, order):
    dtype, kw = _v2_cases()[case]
    path = str(tmp_path / "a.zarr")
    data = _data(dtype)
    z = zarr.create_array(path, shape=SHAPE, chunks=CHUNKS, dtype=dtype, zarr_format=2,
                          fill_value=0, order=order, chunk_key_encoding={"name": "v2",
                                                                         "separator": "/"},
                          **kw)
    z[...] = data
    a = cs.open_array(path, mode="r+", cache=0)
    np.testing.assert_array_equal(a[...], data)
    np.testing.assert_array_equal(a[5:33, 2:21], data[5:33, 2:21])
    new = _data(dtype, seed=2)
    a[35, 20:] = new[0, :3]
    a[0, 0] = new[1, 1]
    want = data.copy()
    want[35, 20:] = new[0, :3]
    want[0, 0] = new[1, 1]
    np.testing.assert_array_equal(a[...], want)
    np.testing.assert_array_equal(np.asarray(zarr.open_array(path, mode="r")[...]), want)


def test_zarr_python_v2_vlen_strings(tmp_path):
    rng = np.random.default_rng(3)
    path2 = str(tmp_path / "vlen.zarr")
    text = np.array(["x" * int(n) for n in rng.integers(0, 300, SHAPE).ravel()],
                    dtype=object).reshape(SHAPE)
    z2 = zarr.create_array(path2, shape=SHAPE, chunks=CHUNKS, dtype=str, zarr_format=2)
    z2[...] = text
    b = cs.open_array(path2, mode="r+", cache=0)
    assert b[...].tolist() == text.tolist()
    b[0, 0] = "y" * 1000
    text[0, 0] = "y" * 1000
    assert np.asarray(zarr.open_array(path2)[...]).tolist() == text.tolist()


@pytest.mark.parametrize("index_location", ["start", "end"])
@pytest.mark.parametrize("index_crc", [True, False])
@pytest.mark.parametrize("compressed", [True, False])
def test_zarr_python_shards_read_and_update_exactly(tmp_path, index_location, index_crc,
                                                    compressed):
    from zarr.codecs import BytesCodec, Crc32cCodec, ShardingCodec, ZstdCodec
    inner = [BytesCodec()] + ([ZstdCodec()] if compressed else [])
    index = [BytesCodec()] + ([Crc32cCodec()] if index_crc else [])
    sharding = ShardingCodec(chunk_shape=(5, 4), codecs=inner, index_codecs=index,
                             index_location=index_location)
    path = str(tmp_path / "s.zarr")
    data = _data("f8")
    z = zarr.create_array(path, shape=SHAPE, chunks=CHUNKS, dtype="f8", serializer=sharding,
                          compressors=None, fill_value=0)
    z[...] = data
    a = cs.open_array(path, mode="r+", cache=0)
    np.testing.assert_array_equal(a[...], data)
    a[2, 3] = -1.0
    a[36, 22] = -2.0
    want = data.copy()
    want[2, 3], want[36, 22] = -1.0, -2.0
    np.testing.assert_array_equal(a[...], want)
    np.testing.assert_array_equal(np.asarray(zarr.open_array(path)[...]), want)


def test_structured_dtype_raw_and_compressed_round_trip(tmp_path):
    dt = np.dtype([("a", "<i4"), ("b", ">f8"), ("c", "S3")])
    data = np.zeros(SHAPE, dt)
    data["a"] = np.arange(np.prod(SHAPE)).reshape(SHAPE)
    data["b"] = 0.5
    data["c"] = b"xyz"
    for kw in ({"compressors": None}, {}):
        for fmt in (2, 3):
            a = cs.create_array(str(tmp_path / f"st{fmt}{len(kw)}.zarr"), shape=SHAPE,
                                chunks=CHUNKS, dtype=dt, zarr_format=fmt, cache=0,
                                **kw)
            a[...] = data
            a[3, 3] = data[0, 0]
            want = data.copy()
            want[3, 3] = data[0, 0]
            got = cs.open_array(a.store, mode="r", cache=0)[...]
            for name in dt.names:
                np.testing.assert_array_equal(got[name], want[name])


@pytest.mark.parametrize("kind", ["zarr3-sharded", "zarr3-blosc", "zarr2-blosc",
                                  "zarr3-raw", "zarr2-raw-F"])
def test_tensorstore_written_arrays_read_and_update_exactly(tmp_path, kind):
    ts = pytest.importorskip("tensorstore")
    path = str(tmp_path / "t.zarr")
    data = _data("i4")
    if kind.startswith("zarr3"):
        codecs = {
            "zarr3-sharded": [{"name": "sharding_indexed", "configuration": {
                "chunk_shape": [5, 4],
                "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                           {"name": "zstd", "configuration": {"level": 1}}],
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                                 {"name": "crc32c"}]}}],
            "zarr3-blosc": [{"name": "bytes", "configuration": {"endian": "little"}},
                            {"name": "blosc", "configuration": {
                                "cname": "lz4", "clevel": 5, "shuffle": "bitshuffle",
                                "typesize": 4, "blocksize": 0}}],
            "zarr3-raw": [{"name": "bytes", "configuration": {"endian": "big"}}],
        }[kind]
        spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": path},
                "metadata": {"shape": list(SHAPE), "data_type": "int32",
                             "chunk_grid": {"name": "regular",
                                            "configuration": {"chunk_shape": list(CHUNKS)}},
                             "codecs": codecs, "fill_value": 0},
                "create": True}
    else:
        spec = {"driver": "zarr", "kvstore": {"driver": "file", "path": path},
                "metadata": {"shape": list(SHAPE), "chunks": list(CHUNKS), "dtype": "<i4",
                             "order": "F" if kind.endswith("F") else "C",
                             "compressor": None if "raw" in kind else {
                                 "id": "blosc", "cname": "zstd", "clevel": 3,
                                 "shuffle": 2, "blocksize": 0},
                             "fill_value": 0, "dimension_separator": "/"},
                "create": True}
    t = ts.open(spec).result()
    t[...].write(data).result()
    a = cs.open_array(path, mode="r+", cache=0)
    np.testing.assert_array_equal(a[...], data)
    a[36, 0] = -5
    a[0, 22] = -6
    want = data.copy()
    want[36, 0], want[0, 22] = -5, -6
    np.testing.assert_array_equal(a[...], want)
    spec.pop("create")
    spec.pop("metadata")
    np.testing.assert_array_equal(ts.open(spec).result().read().result(), want)
