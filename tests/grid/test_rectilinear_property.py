"""Rectilinear arrays (issue 33) against NumPy with hypothesis: random grids (per axis
one regular length or every chunk's length, chunks reaching past the edge after a
shrink), plain and sharded (rectilinear shards of regular inner chunks); every selection
kind, get and set; resize and append; blocks, read_chunk and write_chunk.
``CHUNKSTORE_HYPOTHESIS_EXAMPLES`` raises the example count for a long run.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as npst

import chunkstore as cs
from tests.indexing.test_indexing_property import (
    _values,
    assert_same,
    coordinate_selections,
    ortho_selections,
    ref_get_oindex,
    ref_set_oindex,
)

N = int(os.environ.get("CHUNKSTORE_HYPOTHESIS_EXAMPLES", "30"))
SETTINGS = settings(max_examples=N, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def axis_lengths(draw, n: int, unit: int = 1):
    """One axis of a rectilinear grid over ``n`` elements: a regular length, or every
    chunk's length (multiples of ``unit``; the last may reach past the edge)."""
    if draw(st.integers(0, 3)) == 0:
        return unit * draw(st.integers(1, max(1, -(-n // unit)) + 1))
    lengths, covered = [], 0
    while covered < n or not lengths:
        step = unit * draw(st.integers(1, max(1, -(-n // unit))))
        lengths.append(step)
        covered += step
    return tuple(lengths)


@st.composite
def rectilinear_arrays(draw, min_dims: int = 1, max_dims: int = 3, max_side: int = 9):
    """(array of a rectilinear grid, NumPy reference holding the same data)."""
    ndim = draw(st.integers(min_dims, max_dims))
    shape = tuple(draw(st.integers(0, max_side)) for _ in range(ndim))
    dtype = draw(st.sampled_from(["i4", "f8", "u1", "c8"]))
    compressors = draw(st.sampled_from(["auto", None]))
    fill = draw(st.sampled_from([0, 3]))
    kwargs = {"shape": shape, "dtype": dtype, "fill_value": fill, "compressors": compressors}
    if draw(st.booleans()):  # sharded: rectilinear shards, regular inner chunks
        inner = tuple(draw(st.integers(1, 3)) for _ in shape)
        shards = tuple(draw(axis_lengths(n, u)) for n, u in zip(shape, inner, strict=True))
        if all(isinstance(s, int) for s in shards):
            shards = (tuple([shards[0]] * max(1, -(-shape[0] // shards[0]))), *shards[1:])
        kwargs.update(chunks=inner, shards=shards)
    else:
        chunks = tuple(draw(axis_lengths(n)) for n in shape)
        if all(isinstance(c, int) for c in chunks):
            chunks = (tuple([chunks[0]] * max(1, -(-shape[0] // chunks[0]))), *chunks[1:])
        kwargs.update(chunks=chunks)
    a = cs.create_array(cs.MemoryStore(), **kwargs)
    assert a.metadata.chunk_edges is not None
    ref = np.full(shape, fill, dtype=dtype)
    if draw(st.booleans()):  # else all fill: no chunk stored
        ref[...] = _values(draw, shape, dtype)
        a[...] = ref
    return a, ref


def _value_for(data, shape, dtype):
    if data.draw(st.booleans()):
        return _values(data.draw, shape, dtype)
    return _values(data.draw, (), dtype)[()]


class TestSelections:
    @SETTINGS
    @given(st.data())
    def test_basic(self, data):
        a, ref = data.draw(rectilinear_arrays())
        sel = data.draw(npst.basic_indices(ref.shape, allow_ellipsis=True,
                                           allow_newaxis=False))
        assert_same(np.asarray(a[sel]), np.asarray(ref[sel]))
        value = _value_for(data, ref[sel].shape, ref.dtype)
        a[sel] = value
        ref[sel] = value
        assert_same(a[...], ref)

    @SETTINGS
    @given(st.data())
    def test_negative_steps(self, data):
        a, ref = data.draw(rectilinear_arrays())
        sel = tuple(slice(data.draw(st.none() | st.integers(-n - 2, n + 2)),
                          data.draw(st.none() | st.integers(-n - 2, n + 2)),
                          data.draw(st.integers(-4, -1))) for n in ref.shape)
        assert_same(a[sel], ref[sel])
        value = _values(data.draw, ref[sel].shape, ref.dtype)
        a[sel] = value
        ref[sel] = value
        assert_same(a[...], ref)

    @SETTINGS
    @given(st.data())
    def test_orthogonal(self, data):
        a, ref = data.draw(rectilinear_arrays())
        sel = data.draw(ortho_selections(ref.shape))
        expected = ref_get_oindex(ref, sel)
        assert_same(a.oindex[sel], expected)
        value = _values(data.draw, expected.shape, ref.dtype)
        a.oindex[sel] = value
        ref_set_oindex(ref, sel, value)
        assert_same(a[...], ref)

    @SETTINGS
    @given(st.data())
    def test_coordinates(self, data):
        a, ref = data.draw(rectilinear_arrays())
        sel = data.draw(coordinate_selections(ref.shape))
        try:
            expected = ref[sel]
        except IndexError:  # zero-length axes: NumPy refuses; so must we
            with pytest.raises(IndexError):
                a.vindex[sel]
            return
        assert_same(a.vindex[sel], expected)
        value = _values(data.draw, expected.shape, ref.dtype)
        a.vindex[sel] = value
        ref[sel] = value
        assert_same(a[...], ref)

    @SETTINGS
    @given(st.data())
    def test_mask(self, data):
        a, ref = data.draw(rectilinear_arrays())
        mask = data.draw(npst.arrays(bool, ref.shape))
        assert_same(a.vindex[mask], ref[mask])
        value = _values(data.draw, (int(mask.sum()),), ref.dtype)
        a.vindex[mask] = value
        ref[mask] = value
        assert_same(a[...], ref)

    @SETTINGS
    @given(st.data())
    def test_blocks_and_chunks(self, data):
        a, ref = data.draw(rectilinear_arrays())
        sizes = a.read_chunk_sizes
        starts = [np.concatenate(([0], np.cumsum(s))).astype(int) for s in sizes]
        assert a.cdata_shape == tuple(len(s) for s in sizes)
        assert a.nchunks == int(np.prod(a.cdata_shape))
        if 0 in ref.shape:
            return
        coords = tuple(data.draw(st.integers(0, len(s) - 1)) for s in sizes)
        region = tuple(slice(st_[c], st_[c + 1]) for st_, c in zip(starts, coords, strict=True))
        assert_same(a.blocks[coords], ref[region])
        assert_same(a.read_chunk(coords), ref[region])
        lo = tuple(data.draw(st.integers(0, len(s) - 1)) for s in sizes)
        block_sel = tuple(slice(c, None) for c in lo)
        assert_same(a.blocks[block_sel],
                    ref[tuple(slice(st_[c], None) for st_, c in zip(starts, lo, strict=True))])
        value = _values(data.draw, ref[region].shape, ref.dtype)
        a.write_chunk(coords, value)
        ref[region] = value
        assert_same(a[...], ref)


class TestShape:
    @SETTINGS
    @given(st.data())
    def test_resize(self, data):
        a, ref = data.draw(rectilinear_arrays())
        sharded = a.layout.shards is not None
        for _ in range(2):
            new = tuple(data.draw(st.integers(0, 14)) for _ in ref.shape)
            if sharded:  # a grown axis gets a shard as long as the growth: keep it whole
                edges = a.metadata.chunk_edges
                new = tuple(n if isinstance(e, int) or n <= sum(e)
                            else sum(e) + -(-(n - sum(e)) // c) * c
                            for n, e, c in zip(new, edges, a.chunks, strict=True))
            a.resize(new)
            kept = tuple(slice(0, min(m, n)) for m, n in zip(ref.shape, new, strict=True))
            grown = np.full(new, a.fill_value, dtype=ref.dtype)
            grown[kept] = ref[kept]
            ref = grown
            assert a.shape == new
            assert_same(a[...], ref)
            again = cs.open_array(a.store, mode="r")
            assert_same(again[...], ref)
            assert sum(a.read_chunk_sizes[0]) == new[0]

    @SETTINGS
    @given(st.data())
    def test_append(self, data):
        a, ref = data.draw(rectilinear_arrays(max_dims=2))
        rows = data.draw(st.integers(1, 4))
        edges = a.metadata.chunk_edges[0]
        if a.layout.shards is not None and not isinstance(edges, int):
            # the shard added past the edges is as long as the growth: a whole inner chunk
            inner = a.chunks[0]
            rows = (sum(edges) - ref.shape[0]) % inner + inner * rows
        more = _values(data.draw, (rows, *ref.shape[1:]), ref.dtype)
        a.append(more)
        ref = np.concatenate([ref, more])
        assert_same(a[...], ref)
        if a.layout.shards is not None and not isinstance(a.metadata.chunk_edges[0], int):
            assert all(e % a.chunks[0] == 0 for e in a.metadata.chunk_edges[0])
