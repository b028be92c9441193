"""Every numcodecs filter round-trips, v2 and v3, including those that change the size.

``packbits`` turns n booleans into ``1 + ceil(n / 8)`` bytes; ``categorize``,
``fixedscaleoffset``, ``astype`` and ``delta`` change the data type. Chunks go
chunkstore -> chunkstore, chunkstore -> zarr-python and zarr-python -> chunkstore,
with edge chunks and with and without a compressor; a chain with a filter is never
read as raw bytes (``pipeline.fixed_size`` is False).
"""

from __future__ import annotations

import numcodecs
import numpy as np
import pytest

import chunkstore as cs
from chunkstore.codecs import build_pipeline

SHAPE, CHUNKS = (13, 7), (4, 3)
_rng = np.random.default_rng(7)
_LABELS = ["a", "bb", "ccc"]

#: name -> (dtype, numcodecs filter, data, tolerance or None for exact)
FILTERS = {
    "packbits": ("bool", lambda: numcodecs.PackBits(), _rng.random(SHAPE) < 0.4, None),
    "categorize": ("<U3", lambda: numcodecs.Categorize(_LABELS, dtype="<U3", astype="u1"),
                   np.array(_LABELS)[_rng.integers(0, 3, SHAPE)], None),
    "quantize": ("<f8", lambda: numcodecs.Quantize(digits=3, dtype="<f8"),
                 _rng.standard_normal(SHAPE), 1e-3),
    "fixedscaleoffset": ("<f8", lambda: numcodecs.FixedScaleOffset(
        offset=1, scale=1000, dtype="<f8", astype="<i4"), _rng.standard_normal(SHAPE), 1e-3),
    "bitround": ("<f4", lambda: numcodecs.BitRound(keepbits=12),
                 _rng.standard_normal(SHAPE).astype("<f4"), 1e-3),
    "astype": ("<f8", lambda: numcodecs.AsType(encode_dtype="<f4", decode_dtype="<f8"),
               _rng.standard_normal(SHAPE), 1e-6),
    "delta": ("<i4", lambda: numcodecs.Delta(dtype="<i4", astype="<i2"),
              _rng.integers(-1000, 1000, SHAPE).astype("<i4"), None),
    "shuffle": ("<i4", lambda: numcodecs.Shuffle(elementsize=4),
                _rng.integers(-2**31, 2**31, SHAPE).astype("<i4"), None),
}
COMPRESSORS = {"none": None, "zstd": numcodecs.Zstd(level=1)}
#: zarr-python 3 has no v3 wrapper for numcodecs' categorize
NO_ZARR_V3 = {"categorize"}


def _close(got, expect, tol):
    assert got.shape == expect.shape
    if tol is None:
        np.testing.assert_array_equal(got, expect)
    else:
        np.testing.assert_allclose(got, expect, rtol=tol, atol=tol)


def _cs_create(path, name, fmt, compressor):
    dtype, make, _, _ = FILTERS[name]
    return cs.create_array(path, shape=SHAPE, chunks=CHUNKS, dtype=dtype, filters=[make()],
                           compressors=compressor, zarr_format=fmt)


@pytest.mark.parametrize("compressor", sorted(COMPRESSORS))
@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("name", sorted(FILTERS))
def test_chunkstore_round_trip(tmp_path, name, fmt, compressor):
    _, _, data, tol = FILTERS[name]
    path = str(tmp_path / "a.zarr")
    a = _cs_create(path, name, fmt, COMPRESSORS[compressor])
    a[:] = data
    assert not build_pipeline(a.metadata).fixed_size
    b = cs.open_array(path, mode="r")
    _close(b[:], data, tol)
    _close(b[1:3, 2], data[1:3, 2], tol)  # a partial read: never raw bytes
    a[5, 5] = data[0, 0]  # a partial write decodes the chunk and encodes it again
    expect = data.copy()
    expect[5, 5] = data[0, 0]
    _close(cs.open_array(path, mode="r")[:], expect, tol)


zarr = pytest.importorskip("zarr")


def _zarr_filter(name, fmt):
    numcodecs_filter = FILTERS[name][1]()
    if fmt == 2:
        return numcodecs_filter
    from zarr.codecs import numcodecs as zn
    wrappers = {"packbits": zn.PackBits, "quantize": zn.Quantize,
                "fixedscaleoffset": zn.FixedScaleOffset, "bitround": zn.BitRound,
                "astype": zn.AsType, "delta": zn.Delta, "shuffle": zn.Shuffle}
    config = {k: v for k, v in numcodecs_filter.get_config().items() if k != "id"}
    return wrappers[name](**config)


def _zarr_create(path, name, fmt, compressor):
    dtype = FILTERS[name][0]
    flt = _zarr_filter(name, fmt)
    if fmt == 3:
        from zarr.codecs import numcodecs as zn
        comps = [] if compressor is None else [zn.Zstd(level=1)]
        kwargs = ({"filters": [], "compressors": [flt, *comps]} if name == "shuffle"
                  else {"filters": [flt], "compressors": comps})
    else:
        kwargs = {"filters": [flt], "compressors": compressor}
    return zarr.create_array(path, shape=SHAPE, chunks=CHUNKS, dtype=dtype, zarr_format=fmt,
                             fill_value=None if fmt == 2 else 0 if dtype != "<U3" else "",
                             **kwargs)


def _skip_unsupported(name, fmt):
    if fmt == 3 and name in NO_ZARR_V3:
        pytest.skip(f"zarr-python has no v3 numcodecs.{name}")


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("compressor", sorted(COMPRESSORS))
@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("name", sorted(FILTERS))
def test_chunkstore_to_zarr_python(tmp_path, name, fmt, compressor):
    _skip_unsupported(name, fmt)
    _, _, data, tol = FILTERS[name]
    path = str(tmp_path / "a.zarr")
    _cs_create(path, name, fmt, COMPRESSORS[compressor])[:] = data
    theirs = zarr.open_array(path, mode="r")[:]
    _close(theirs, data, tol)
    np.testing.assert_array_equal(theirs, cs.open_array(path, mode="r")[:])


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("compressor", sorted(COMPRESSORS))
@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("name", sorted(FILTERS))
def test_zarr_python_to_chunkstore(tmp_path, name, fmt, compressor):
    _skip_unsupported(name, fmt)
    _, _, data, tol = FILTERS[name]
    path = str(tmp_path / "a.zarr")
    z = _zarr_create(path, name, fmt, COMPRESSORS[compressor])
    z[:] = data
    ours = cs.open_array(path, mode="r")
    assert not build_pipeline(ours.metadata).fixed_size
    _close(ours[:], data, tol)
    np.testing.assert_array_equal(ours[:], zarr.open_array(path, mode="r")[:])
    _close(ours[1:3, 2], data[1:3, 2], tol)


def test_packbits_chunk_has_the_packed_size(tmp_path):
    a = cs.create_array(None, shape=(16,), chunks=(16,), dtype="bool",
                        filters=[numcodecs.PackBits()], compressors=None)
    a[:] = np.arange(16) % 3 == 0
    assert len(a.store.get(a.chunk_key((0,)))) == 1 + 16 // 8
    pipeline = build_pipeline(a.metadata)
    assert not pipeline.fixed_size
    assert pipeline.decode(a.store.get(a.chunk_key((0,)))).tolist() == (np.arange(16) % 3 == 0
                                                                         ).tolist()
