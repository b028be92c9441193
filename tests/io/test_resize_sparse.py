"""Shrinking works out what to delete and clear either from the grid (few write units)
or from the units the store holds (``io.resize.ENUMERATE_MAX_UNITS``): both give NumPy's
answer after shrinking and growing back, plain and sharded, v2 and v3."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chunkstore as cs
from chunkstore.io import resize as resize_mod


@st.composite
def cases(draw):
    ndim = draw(st.integers(1, 3))
    chunks = tuple(draw(st.integers(1, 4)) for _ in range(ndim))
    shape = tuple(draw(st.integers(0, 12)) for _ in range(ndim))
    new = tuple(draw(st.integers(0, n)) for n in shape)
    sharded = draw(st.booleans())
    written = tuple(draw(st.tuples(st.integers(0, n), st.integers(0, n))) for n in shape)
    return shape, chunks, new, sharded, written


@pytest.mark.parametrize("limit", [0, 10**9], ids=["listed", "enumerated"])
@given(case=cases())
@settings(max_examples=40, deadline=None)
def test_shrink_then_grow_shows_fill_beyond_the_old_edge(tmp_path_factory, limit, case):
    shape, chunks, new, sharded, written = case
    old_limit = resize_mod.ENUMERATE_MAX_UNITS
    resize_mod.ENUMERATE_MAX_UNITS = limit
    try:
        root = str(tmp_path_factory.mktemp("r") / "a.zarr")
        shards = tuple(2 * c for c in chunks) if sharded else None
        a = cs.create_array(root, shape=shape, chunks=chunks, shards=shards, dtype="i4",
                            fill_value=-1)
        model = np.full(shape, -1, dtype="i4")
        region = tuple(slice(min(lo, hi), max(lo, hi)) for lo, hi in written)
        values = np.arange(model[region].size, dtype="i4").reshape(model[region].shape)
        a[region] = values
        model[region] = values
        a.resize(new)
        model = model[tuple(slice(0, n) for n in new)]
        np.testing.assert_array_equal(a[...], model)
        a.resize(shape)
        grown = np.full(shape, -1, dtype="i4")
        grown[tuple(slice(0, n) for n in new)] = model
        np.testing.assert_array_equal(a[...], grown)
        np.testing.assert_array_equal(cs.open_array(root, mode="r")[...], grown)
    finally:
        resize_mod.ENUMERATE_MAX_UNITS = old_limit


def test_a_sparse_grid_of_a_million_chunks_shrinks_by_what_is_stored(tmp_path, monkeypatch):
    """Only the two stored chunks are looked at: no key of the 10**6-chunk grid is made."""
    a = cs.create_array(str(tmp_path / "s.zarr"), shape=(1_000_000,), chunks=(1,),
                        dtype="u1", zarr_format=2)
    a[0], a[999_999], a[500_000] = 5, 7, 9
    made: list[int] = []
    real = a._engine.layout.unit_key
    monkeypatch.setattr(type(a._engine.layout), "units_outside",
                        lambda *args: made.append(1) or iter(()))
    a.resize(500_001)
    assert made == [] and real((0,)) == "0"
    np.testing.assert_array_equal(a[[0, 500_000]], [5, 9])
    assert a.nchunks_initialized == 2
    a.resize(1_000_000)
    assert a[999_999] == 0 and a.nchunks_initialized == 2
