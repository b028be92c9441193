"""``create_array(serializer=)``: zarr-python 3's argument for the array->bytes codec."""

import numpy as np
import pytest

import chunkstore as cs


@pytest.mark.parametrize("endian", ["little", "big"])
def test_serializer_argument_sets_the_array_bytes_codec(tmp_path, endian):
    """``serializer=`` (zarr-python 3's name) chooses the array->bytes codec."""
    import zarr
    x = np.arange(40, dtype="i4").reshape(5, 8)
    path = str(tmp_path / "s.zarr")
    a = cs.create_array(path, shape=x.shape, chunks=(5, 4), dtype="i4",
                        serializer={"name": "bytes", "configuration": {"endian": endian}},
                        compressors=None)
    a[...] = x
    assert a.metadata.codecs[0] == {"name": "bytes", "configuration": {"endian": endian}}
    raw = (tmp_path / "s.zarr" / a.chunk_key((0, 1))).read_bytes()
    assert raw == np.ascontiguousarray(x[:, 4:]).astype(">i4" if endian == "big" else "<i4").tobytes()
    np.testing.assert_array_equal(zarr.open_array(path, mode="r")[...], x)
    with pytest.raises(ValueError, match="serializer"):
        cs.create_array(cs.MemoryStore(), shape=(4,), dtype="i4", serializer="bytes",
                        codecs=[{"name": "bytes"}])
    with pytest.raises(ValueError, match="serializer"):
        cs.create_array(cs.MemoryStore(), shape=(4,), dtype="i4", zarr_format=2,
                        serializer={"name": "bytes"})
    with pytest.raises(cs.errors.CodecError, match="array->bytes"):
        cs.create_array(cs.MemoryStore(), shape=(4,), dtype="i4", serializer={"name": "zstd"})
