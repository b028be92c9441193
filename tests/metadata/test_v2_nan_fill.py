"""Issue 30 item 9: a v2 NaN fill value with a payload or a sign (``-np.nan``,
``0x7fc00001``) is stored as "NaN" (v2 has no other spelling for floats), so every
reader sees the canonical NaN. The writing handle used to keep the user's bits and drop
chunks equal to them as fill: every reopen then read the canonical NaN (8 of 8 elements
came back with other bits). Now the v2 handle's fill value is the one stored, from the
start: chunks of another NaN are kept and read back bit for bit. v3 keeps the bits in
the document (hex)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import chunkstore as cs


def _nan(bits: int, dtype: str):
    """A NaN scalar of ``dtype`` with the raw ``bits``."""
    dt = np.dtype(dtype)
    raw = np.array(bits, f"u{dt.itemsize}").astype(np.dtype(f"u{dt.itemsize}").newbyteorder(
        dt.byteorder if dt.byteorder in "<>" else "="))
    return raw.view(dt)[()]


def _bits(values, dtype: str) -> np.ndarray:
    """The raw bits of ``values`` as native unsigned integers (byte order undone)."""
    dt = np.dtype(dtype)
    parts = np.atleast_1d(np.asarray(values, dt)).astype(dt.newbyteorder("="))
    if dt.kind == "c":
        parts = parts.view(f"f{dt.itemsize // 2}")
    return parts.view(f"u{parts.dtype.itemsize}")


# (fill, dtype): NaNs other than NumPy's own for each float type and both byte orders
ODD_NANS = [
    (-np.nan, "<f8"),
    (_nan(0x7FC00001, "<f4"), "<f4"),
    (_nan(0xFFC00000, ">f4"), ">f4"),
    (_nan(0x7E01, "<f2"), "<f2"),
    (complex(_nan(0x7FC00001, "<f4"), 1.0), "<c8"),
]


def _chunk_keys(root) -> list[str]:
    return sorted(p.name for p in root.iterdir() if not p.name.startswith((".z", "zarr")))


@pytest.mark.parametrize("how", ["create_array", "open_w"])
@pytest.mark.parametrize("fill, dtype", ODD_NANS, ids=[d for _, d in ODD_NANS])
def test_v2_odd_nan_fill_reads_back_bit_for_bit(tmp_path, fill, dtype, how):
    root = tmp_path / "a.zarr"
    kw = dict(shape=(8,), chunks=(4,), dtype=dtype, fill_value=fill, zarr_format=2)
    a = (cs.create_array(str(root), **kw) if how == "create_array"
         else cs.open(str(root), mode="w", **kw))
    canonical = np.full((), np.nan, dtype) if np.dtype(dtype).kind == "f" else \
        np.array(complex(np.nan, 1.0), dtype)
    # the handle's fill is the one stored: the same bits as every reopen sees
    assert (_bits(a.fill_value, dtype) == _bits(canonical, dtype)).all()
    assert json.loads((root / ".zarray").read_text())["fill_value"] in ("NaN", ["NaN", 1.0])
    data = np.full(8, fill, dtype)
    a[:] = data
    assert _chunk_keys(root) == ["0", "1"]  # not dropped as fill
    back = cs.open(str(root), mode="r")
    assert (_bits(back.fill_value, dtype) == _bits(a.fill_value, dtype)).all()
    np.testing.assert_array_equal(_bits(back[:], dtype), _bits(data, dtype))
    np.testing.assert_array_equal(_bits(a[:], dtype), _bits(data, dtype))
    a[:4] = canonical  # the stored fill itself is still left out
    assert _chunk_keys(root) == ["1"]
    np.testing.assert_array_equal(_bits(cs.open(str(root), mode="r")[:4], dtype),
                                  _bits(np.full(4, canonical, dtype), dtype))


@pytest.mark.parametrize("fill, dtype, hex_", [
    (-np.nan, "<f8", "0xfff8000000000000"),
    (_nan(0x7FC00001, "<f4"), "<f4", "0x7fc00001"),
    (_nan(0xFFC00000, ">f4"), ">f4", "0xffc00000"),
])
def test_v3_keeps_the_bits_of_a_nan_fill(tmp_path, fill, dtype, hex_):
    root = tmp_path / "a.zarr"
    a = cs.create_array(str(root), shape=(8,), chunks=(4,), dtype=dtype, fill_value=fill)
    assert json.loads((root / "zarr.json").read_text())["fill_value"] == hex_
    assert (_bits(a.fill_value, dtype) == _bits(fill, dtype)).all()
    a[:4] = np.full(4, fill, dtype)  # the fill itself: not stored
    a[4:] = np.full(4, np.nan, dtype)  # NumPy's NaN: another value, stored
    assert _chunk_keys(root / "c") == ["1"]
    back = cs.open(str(root), mode="r")
    assert (_bits(back.fill_value, dtype) == _bits(fill, dtype)).all()
    want = np.concatenate([np.full(4, fill, dtype), np.full(4, np.nan, dtype)])
    np.testing.assert_array_equal(_bits(back[:], dtype), _bits(want, dtype))
