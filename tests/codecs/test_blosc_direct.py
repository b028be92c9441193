"""The bytes+blosc fast decode path (straight into the output) against NumPy."""

from __future__ import annotations

import numcodecs
import numpy as np
import pytest

import chunkstore as cs
from chunkstore.codecs.compressors import blosc_decode_into
from chunkstore.errors import ChunkDecodeError, CodecError

DTYPES = ["int32", "float16", "complex128", "bool", "datetime64[ns]", ">i4"]


def _data(dtype: str, shape=(30, 24)) -> np.ndarray:
    rng = np.random.default_rng(1)
    raw = rng.integers(0, 1000, shape)
    if dtype == "bool":
        return raw % 3 == 0
    if dtype.startswith("datetime64"):
        return raw.astype("datetime64[ns]")
    if dtype == "complex128":
        return (raw + 1j * raw[::-1]).astype(dtype)
    return raw.astype(dtype)


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("chunks", [(4, 5), (3, 24), (64, 64)])
def test_tiny_and_large_chunks_roundtrip(tmp_path, zarr_format, dtype, chunks):
    data = _data(dtype)
    a = cs.create_array(str(tmp_path / "a.zarr"), shape=data.shape, dtype=data.dtype,
                        chunks=chunks, compressors=numcodecs.Blosc("lz4", 5, 1),
                        fill_value=0 if data.dtype.kind != "M" else None,
                        zarr_format=zarr_format)
    a[...] = data
    b = cs.open_array(str(tmp_path / "a.zarr"), mode="r")
    np.testing.assert_array_equal(b[...], data)  # (3, 24) chunks: contiguous output views
    np.testing.assert_array_equal(b[5:17, 3:20], data[5:17, 3:20])
    np.testing.assert_array_equal(b[::-2, 1], data[::-2, 1])


def test_decode_into_checks_header_and_accepts_buffers():
    data = np.arange(100, dtype="int32")
    codec = numcodecs.Blosc("lz4", 5, 1)
    blob = codec.encode(data)
    for buf in (blob, bytearray(blob), memoryview(blob), np.frombuffer(blob, np.uint8)):
        out = np.zeros(100, "int32")
        blosc_decode_into(codec, buf, out, copy=True)
        np.testing.assert_array_equal(out, data)
        out = np.zeros(100, "int32")
        blosc_decode_into(codec, buf, out, copy=False)
        np.testing.assert_array_equal(out, data)
    with pytest.raises(CodecError, match="compressed bytes"):
        blosc_decode_into(codec, blob[:-3], np.zeros(100, "int32"))
    with pytest.raises(CodecError, match="expected 396"):
        blosc_decode_into(codec, blob, np.zeros(99, "int32"))
    with pytest.raises(CodecError, match="shorter than a blosc header"):
        blosc_decode_into(codec, blob[:10], np.zeros(100, "int32"))


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_damaged_tiny_chunk_names_the_key(tmp_path, zarr_format):
    path = tmp_path / "d.zarr"
    a = cs.create_array(str(path), shape=(40, 40), dtype="int32", chunks=(20, 20),
                        compressors=numcodecs.Blosc("lz4", 5, 1), fill_value=0,
                        zarr_format=zarr_format)
    a[...] = np.arange(1600, dtype="int32").reshape(40, 40)
    key = "1.0" if zarr_format == 2 else "c/1/0"
    f = path / key
    f.write_bytes(f.read_bytes()[:-5])
    b = cs.open_array(str(path), mode="r")
    with pytest.raises(ChunkDecodeError, match=key.replace(".", r"\.")):
        b[...]
    np.testing.assert_array_equal(b[:20], np.arange(800, dtype="int32").reshape(20, 40))
