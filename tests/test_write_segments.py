"""Uncompressed chunks that are strided views of the written value go to LocalStore as
their contiguous pieces (``Segments``, written with ``writev``): same bytes as a copy."""

import os

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.io.chunk_codec import ChunkCodec
from chunkstore.storage.local_temp import Segments, write_temp


@pytest.mark.parametrize("shape,chunks,dtype", [
    ((64, 2048), (16, 512), "f8"),          # rows of 4 KB
    ((8, 64, 512), (4, 16, 512), "i4"),     # whole trailing rows: pieces of 2 planes
    ((8, 64, 600), (4, 16, 300), "f4"),     # 3-d, rows of 1.2 KB
    ((100, 1000), (7, 333), "u2"),          # rows too small: copied
    ((5000, 300), (4000, 300), "f4"),       # contiguous chunk: no pieces needed
])
def test_views_written_as_pieces_read_back(tmp_path, shape, chunks, dtype):
    rng = np.random.default_rng(0)
    x = (rng.random(shape) * 1000).astype(dtype)
    a = cs.create_array(str(tmp_path / "a.zarr"), shape=shape, chunks=chunks, dtype=dtype,
                        compressors=None)
    a[...] = x
    np.testing.assert_array_equal(a[...], x)
    a[...] = x[::-1][::-1]  # a view with negative-then-positive strides
    np.testing.assert_array_equal(a[...], x)
    flipped = np.ascontiguousarray(x[::-1])
    a[...] = flipped[::-1]  # negative leading strides
    np.testing.assert_array_equal(a[...], x)
    a[...] = np.asfortranarray(x)  # not row-contiguous: copied
    np.testing.assert_array_equal(a[...], x)
    # the files hold exactly the C-ordered chunk bytes
    key = a.chunk_key((0,) * len(shape))
    raw = open(os.path.join(tmp_path, "a.zarr", key), "rb").read()
    assert raw == np.ascontiguousarray(x[tuple(slice(0, c) for c in chunks)]).tobytes()


def test_encode_segments_only_for_raw_native_strided_views():
    a = cs.create_array(cs.MemoryStore(), shape=(64, 2048), chunks=(16, 512), dtype="f8",
                        compressors=None)
    codec: ChunkCodec = a._engine.codec
    x = np.arange(64 * 2048, dtype="f8").reshape(64, 2048)
    parts = codec.encode_segments(x[16:32, 512:1024])
    assert isinstance(parts, Segments) and len(parts) == 16
    assert parts.tobytes() == np.ascontiguousarray(x[16:32, 512:1024]).tobytes()
    assert codec.encode_segments(np.zeros((16, 512))) is None  # all fill
    b = cs.create_array(cs.MemoryStore(), shape=(64, 2048), chunks=(16, 512), dtype="f8")
    assert not isinstance(b._engine.codec.encode_segments(x[16:32, 512:1024]), Segments)


def test_more_pieces_than_one_writev_takes(tmp_path):
    pieces = [bytes([i % 251]) * 1024 for i in range(3000)]  # > IOV_MAX (1024)
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        name = write_temp(fd, Segments(pieces))
    finally:
        os.close(fd)
    assert open(tmp_path / name, "rb").read() == b"".join(pieces)
