"""Chunks equal to the fill value are not stored, and compared bit for bit: a chunk of
-0.0 over a fill of 0.0, or of a NaN with another payload over a NaN fill, is stored and
reads back as written (NumPy's result); a chunk of the fill itself is still not stored."""

from __future__ import annotations

import numpy as np
import pytest

import chunkstore as cs


def _stored_keys(a):
    return sorted(k for k in a.store.list() if not k.endswith(("zarr.json", ".zarray",
                                                                ".zattrs")))


@pytest.mark.parametrize("dtype", ["<f2", "<f4", ">f4", "<f8", ">f8", "<c8", ">c16"])
@pytest.mark.parametrize("shards", [None, (8,)])
def test_negative_zero_over_zero_fill_is_stored(dtype, shards):
    a = cs.create_array(cs.MemoryStore(), shape=(8,), chunks=(4,), shards=shards,
                        dtype=dtype, fill_value=0)
    v = np.zeros(8, dtype)
    v[:4] = -v[:4] if np.dtype(dtype).kind == "f" else complex(0.0, -0.0)
    a[:] = v
    got = a[:]
    parts = (got.real, got.imag) if got.dtype.kind == "c" else (got,)
    want = (v.real, v.imag) if v.dtype.kind == "c" else (v,)
    for g, w in zip(parts, want, strict=True):
        np.testing.assert_array_equal(np.signbit(g), np.signbit(w))
    assert _stored_keys(a), "the -0.0 chunk was not stored"
    a[:4] = 0  # back to the fill: nothing is stored any more
    assert _stored_keys(a) == []


@pytest.mark.parametrize("dtype", ["<f4", ">f8"])
def test_nan_payloads_read_back_bit_for_bit(dtype):
    a = cs.create_array(cs.MemoryStore(), shape=(8,), chunks=(4,), dtype=dtype,
                        fill_value=np.nan)
    bits = np.dtype(f"u{np.dtype(dtype).itemsize}").newbyteorder(np.dtype(dtype).byteorder)
    v = np.full(8, np.nan, dtype)
    odd = v[:4].view(bits)
    odd |= 1  # a NaN of another payload (still NaN)
    odd[0] ^= np.array(1, bits) << (8 * np.dtype(dtype).itemsize - 1)  # and a -NaN
    assert np.isnan(v).all()
    a[:] = v
    native = np.dtype(dtype).newbyteorder("=")
    same = bits.newbyteorder("=")
    np.testing.assert_array_equal(a[:].astype(native).view(same), v.astype(native).view(same))
    assert _stored_keys(a) == ["c/0"]  # the chunk of the fill's own NaN is not stored
