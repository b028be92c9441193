"""Uncompressed chunks that are strided views of the written value (blocks of a larger
array, reversed or Fortran-ordered values) are stored as their exact C-ordered bytes."""

import os

import numpy as np
import pytest

import chunkstore as cs


@pytest.mark.parametrize("shape,chunks,dtype", [
    ((64, 2048), (16, 512), "f8"),          # rows of 4 KB
    ((8, 64, 512), (4, 16, 512), "i4"),     # whole trailing rows: pieces of 2 planes
    ((8, 64, 600), (4, 16, 300), "f4"),     # 3-d, rows of 1.2 KB
    ((100, 1000), (7, 333), "u2"),          # rows too small: copied
    ((5000, 300), (4000, 300), "f4"),       # contiguous chunk: no pieces needed
])
def test_strided_views_written_as_c_ordered_chunks(tmp_path, shape, chunks, dtype):
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
