"""Every selection kind, get and set, proven against NumPy with hypothesis.

Random shapes up to 4-D (zero-length axes included), random chunk shapes (chunks
larger than the array included) and random dtypes. ``CHUNKSTORE_HYPOTHESIS_EXAMPLES``
raises the example count for a long run (default keeps this file well under a minute).
"""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as npst

import chunkstore as cs

N = int(os.environ.get("CHUNKSTORE_HYPOTHESIS_EXAMPLES", "40"))
SETTINGS = settings(max_examples=N, deadline=None, derandomize=False,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

DTYPES = ["bool", "i1", "u2", "i4", "i8", "f4", "f8", "c8", "c16"]
V2_DTYPES = [">i4", ">f8", "<u4"]


# -- strategies ---------------------------------------------------------------------------
@st.composite
def shapes_and_chunks(draw, min_dims: int = 0, max_dims: int = 4, max_side: int = 6):
    ndim = draw(st.integers(min_dims, max_dims))
    shape = tuple(draw(st.integers(0, max_side)) for _ in range(ndim))
    chunks = tuple(draw(st.integers(1, max(1, n) + 3)) for n in shape)
    return shape, chunks


def _values(draw, shape, dtype) -> np.ndarray:
    """Random values of ``dtype`` (small integers cast, so every dtype gets exact values)."""
    ints = draw(npst.arrays("i8", shape, elements=st.integers(-100, 100)))
    return ints.astype(np.dtype(dtype))


@st.composite
def stored_arrays(draw, min_dims: int = 0, max_dims: int = 4):
    """(chunkstore array, NumPy reference holding the same data)."""
    shape, chunks = draw(shapes_and_chunks(min_dims, max_dims))
    fmt = draw(st.sampled_from([3, 3, 2]))
    dtype = draw(st.sampled_from(DTYPES + (V2_DTYPES if fmt == 2 else [])))
    compressors = draw(st.sampled_from(["auto", None]))
    order = draw(st.sampled_from(["C", "F"])) if fmt == 2 else "C"
    fill = draw(st.sampled_from([0, 1]))
    store = cs.MemoryStore()
    a = cs.create_array(store, shape=shape, chunks=chunks, dtype=dtype, zarr_format=fmt,
                        compressors=compressors, fill_value=fill, order=order, overwrite=True)
    ref = np.full(shape, fill, dtype=dtype)
    if draw(st.booleans()):  # otherwise stays all fill value: chunks are missing
        data = _values(draw, shape, dtype)
        a[...] = data
        ref[...] = data
    return a, ref


def int_index(n: int):
    return st.integers(-n, n - 1)


def ortho_axis(n: int):
    """One axis of an orthogonal selection: int, slice, int array or bool mask."""
    options = [st.slices(n) if n else st.just(slice(None)),
               st.lists(int_index(n), max_size=6).map(lambda v: np.array(v, dtype=np.intp))
               if n else st.just(np.array([], dtype=np.intp)),
               npst.arrays(bool, (n,))]
    if n:
        options.append(int_index(n))
    return st.one_of(*options)


@st.composite
def ortho_selections(draw, shape):
    return tuple(draw(ortho_axis(n)) for n in shape)


def numpy_oindex(sel: tuple) -> tuple[tuple, tuple[int, ...]]:
    """NumPy index doing the orthogonal selection, and the axes to drop afterwards (ints)."""
    arrays, drop = [], []
    for axis, s in enumerate(sel):
        if isinstance(s, int | np.integer):
            arrays.append(np.array([s]))
            drop.append(axis)
        else:
            arrays.append(s)
    return arrays, tuple(drop)


def ref_get_oindex(ref: np.ndarray, sel: tuple) -> np.ndarray:
    out = ref
    for axis in reversed(range(ref.ndim)):  # one axis at a time = orthogonal
        s = sel[axis]
        index = (slice(None),) * axis + (s,)
        out = out[index]
    return out


def ref_set_oindex(ref: np.ndarray, sel: tuple, value: np.ndarray) -> None:
    axes = []
    for n, s in zip(ref.shape, sel, strict=True):
        if isinstance(s, slice):
            axes.append(np.arange(n)[s])
        elif isinstance(s, int | np.integer):
            axes.append(np.array([s]))
        else:
            axes.append(np.arange(n)[s])
    full_shape = tuple(len(x) for x in axes)
    ref[np.ix_(*axes)] = np.broadcast_to(value, _kept(full_shape, sel)).reshape(full_shape)


def _kept(full_shape, sel):
    return tuple(n for n, s in zip(full_shape, sel, strict=True)
                 if not isinstance(s, int | np.integer))


def assert_same(got, expected) -> None:
    got = np.asarray(got)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    if got.ndim == 0:  # a 0-d result comes back as a NumPy scalar: native byte order
        assert got.dtype == expected.dtype.newbyteorder("=")
    else:
        assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


# -- basic -----------------------------------------------------------------------------------
class TestBasic:
    @SETTINGS
    @given(st.data())
    def test_get(self, data):
        a, ref = data.draw(stored_arrays())
        sel = data.draw(npst.basic_indices(ref.shape, allow_ellipsis=True,
                                           allow_newaxis=False))
        expected = ref[sel]
        got = a[sel]
        if np.ndim(expected) == 0:
            assert np.ndim(got) == 0
        assert_same(got, np.asarray(expected))
        assert_same(a.get_basic_selection(sel), np.asarray(expected))

    @SETTINGS
    @given(st.data())
    def test_set(self, data):
        a, ref = data.draw(stored_arrays())
        sel = data.draw(npst.basic_indices(ref.shape, allow_ellipsis=True,
                                           allow_newaxis=False))
        target_shape = ref[sel].shape
        if data.draw(st.booleans()):
            value = _values(data.draw, target_shape, ref.dtype)
        else:
            value = _values(data.draw, (), ref.dtype)[()]
        ref[sel] = value
        a[sel] = value
        assert_same(a[...], ref)

    @SETTINGS
    @given(st.data())
    def test_negative_steps(self, data):
        a, ref = data.draw(stored_arrays(min_dims=1))
        sel = tuple(slice(data.draw(st.none() | st.integers(-n - 2, n + 2)),
                          data.draw(st.none() | st.integers(-n - 2, n + 2)),
                          data.draw(st.integers(-4, -1)))
                    for n in ref.shape)
        assert_same(a[sel], ref[sel])
        value = _values(data.draw, ref[sel].shape, ref.dtype)
        a[sel] = value
        ref[sel] = value
        assert_same(a[...], ref)

    def test_newaxis_is_a_clear_error(self):
        a = cs.zeros((3, 4), chunks=(2, 2), dtype="i4")
        with pytest.raises(IndexError, match="newaxis"):
            a[None, 1]


# -- orthogonal --------------------------------------------------------------------------------
class TestOrthogonal:
    @SETTINGS
    @given(st.data())
    def test_get(self, data):
        a, ref = data.draw(stored_arrays(min_dims=1))
        sel = data.draw(ortho_selections(ref.shape))
        expected = ref_get_oindex(ref, sel)
        assert_same(a.oindex[sel], expected)
        assert_same(a.get_orthogonal_selection(sel), expected)

    @SETTINGS
    @given(st.data())
    def test_set(self, data):
        a, ref = data.draw(stored_arrays(min_dims=1))
        sel = data.draw(ortho_selections(ref.shape))
        shape = ref_get_oindex(ref, sel).shape
        if data.draw(st.booleans()):
            value = _values(data.draw, shape, ref.dtype)
        else:
            value = _values(data.draw, (), ref.dtype)[()]
        ref_set_oindex(ref, sel, value)
        a.oindex[sel] = value
        assert_same(a[...], ref)

    def test_two_unsorted_arrays_and_a_reversed_slice(self):
        ref = np.arange(120).reshape(4, 5, 6)
        a = cs.array(ref, chunks=(2, 2, 4))
        sel = (np.array([2, 0]), np.array([3, 1]), slice(None, None, -1))
        assert_same(a.oindex[sel], ref_get_oindex(ref, sel))
        a.oindex[sel] = -ref_get_oindex(ref, sel)
        ref_set_oindex(ref, sel, -ref_get_oindex(ref, sel))
        assert_same(a[...], ref)

    @SETTINGS
    @given(st.data())
    def test_single_array_through_getitem(self, data):
        """``a[[2, 0, 2]]`` / ``a[:, mask]``: one array among slices indexes like NumPy."""
        a, ref = data.draw(stored_arrays(min_dims=1))
        axis = data.draw(st.integers(0, ref.ndim - 1))
        n = ref.shape[axis]
        idx = data.draw(st.lists(int_index(n), max_size=5) if n else st.just([]))
        sel = (slice(None),) * axis + (np.array(idx, dtype=np.intp),)
        assert_same(a[sel], ref[sel])
        mask = data.draw(npst.arrays(bool, (n,)))
        msel = (slice(None),) * axis + (mask,)
        assert_same(a[msel], ref[msel])


# -- coordinate / vindex -------------------------------------------------------------------------
@st.composite
def coordinate_selections(draw, shape):
    """One integer array per axis, broadcastable together (incl. repeated coordinates)."""
    bshape = draw(npst.array_shapes(min_dims=1, max_dims=2, min_side=0, max_side=4))
    sel = []
    for n in shape:
        # each axis' array has the broadcast shape or a broadcastable one (ones)
        own = tuple(d if draw(st.booleans()) else 1 for d in bshape)
        if n == 0:
            own = tuple(0 if d != 1 else 1 for d in own)
            sel.append(np.zeros(own, dtype=np.intp))
            continue
        sel.append(draw(npst.arrays(np.intp, own, elements=int_index(n))))
    return tuple(sel)


class TestCoordinate:
    @SETTINGS
    @given(st.data())
    def test_get(self, data):
        a, ref = data.draw(stored_arrays(min_dims=1))
        sel = data.draw(coordinate_selections(ref.shape))
        try:
            expected = ref[sel]
        except IndexError:  # zero-length axes: NumPy refuses; so must we
            with pytest.raises(IndexError):
                a.vindex[sel]
            return
        assert_same(a.vindex[sel], expected)
        assert_same(a.get_coordinate_selection(sel), expected)

    @SETTINGS
    @given(st.data())
    def test_set_last_write_wins(self, data):
        a, ref = data.draw(stored_arrays(min_dims=1))
        sel = data.draw(coordinate_selections(ref.shape))
        try:
            shape = ref[sel].shape
        except IndexError:
            return
        value = _values(data.draw, shape, ref.dtype)
        ref[sel] = value
        a.vindex[sel] = value
        assert_same(a[...], ref)

    def test_repeated_coordinates_last_write_wins(self):
        a = cs.zeros((4, 5), chunks=(2, 2), dtype="i4")
        rows, cols = np.array([1, 3, 1, 1]), np.array([2, 0, 2, 2])
        a.vindex[rows, cols] = [10, 20, 30, 40]
        ref = np.zeros((4, 5), "i4")
        ref[rows, cols] = [10, 20, 30, 40]
        assert_same(a[...], ref)
        assert a[1, 2] == 40

    @SETTINGS
    @given(st.data())
    def test_all_arrays_through_getitem(self, data):
        a, ref = data.draw(stored_arrays(min_dims=2, max_dims=3))
        sel = data.draw(coordinate_selections(ref.shape))
        if 0 in ref.shape:
            return
        assert_same(a[sel], ref[sel])


# -- mask ----------------------------------------------------------------------------------------
class TestMask:
    @SETTINGS
    @given(st.data())
    def test_get_and_set(self, data):
        a, ref = data.draw(stored_arrays(min_dims=1))
        mask = data.draw(npst.arrays(bool, ref.shape))
        assert_same(a.get_mask_selection(mask), ref[mask])
        assert_same(a.vindex[mask], ref[mask])
        if ref.ndim > 1:
            assert_same(a[mask], ref[mask])
        value = _values(data.draw, (int(mask.sum()),), ref.dtype)
        ref[mask] = value
        a.set_mask_selection(mask, value)
        assert_same(a[...], ref)
        scalar = _values(data.draw, (), ref.dtype)[()]
        ref[mask] = scalar
        a.vindex[mask] = scalar
        assert_same(a[...], ref)


# -- blocks --------------------------------------------------------------------------------------
def ref_blocks(ref: np.ndarray, chunks: tuple[int, ...], sel: tuple) -> tuple[slice, ...]:
    """The element region of a block selection, computed independently."""
    out = []
    for n, c, s in zip(ref.shape, chunks, sel, strict=True):
        nblocks = -(-n // c)
        if isinstance(s, slice):
            blocks = range(nblocks)[s]
            lo = blocks.start * c if len(blocks) else 0
            hi = min(n, blocks.stop * c) if len(blocks) else 0
            out.append(slice(lo, hi))
        else:
            b = s + nblocks if s < 0 else s
            out.append(slice(b * c, min(n, (b + 1) * c)))
    return tuple(out)


@st.composite
def block_selections(draw, shape, chunks):
    sel = []
    for n, c in zip(shape, chunks, strict=True):
        nblocks = -(-n // c)
        if nblocks and draw(st.booleans()):
            sel.append(draw(st.integers(-nblocks, nblocks - 1)))
        else:
            sel.append(slice(draw(st.none() | st.integers(-nblocks - 1, nblocks + 1)),
                             draw(st.none() | st.integers(-nblocks - 1, nblocks + 1))))
    return tuple(sel)


class TestBlocks:
    @SETTINGS
    @given(st.data())
    def test_get_and_set(self, data):
        a, ref = data.draw(stored_arrays(min_dims=1))
        sel = data.draw(block_selections(ref.shape, a.chunks))
        region = ref_blocks(ref, a.chunks, sel)
        assert_same(a.blocks[sel], ref[region])
        assert_same(a.get_block_selection(sel), ref[region])
        value = _values(data.draw, ref[region].shape, ref.dtype)
        a.blocks[sel] = value
        ref[region] = value
        assert_same(a[...], ref)


# -- arrays on a LocalStore: memory-mapped views, or byte ranges of uncompressed chunks -------
class _NoViews(cs.LocalStore):
    """A LocalStore without zero-copy views: uncompressed chunks read by byte ranges."""

    capabilities = replace(cs.LocalStore.capabilities, zero_copy_views=False)


class TestLocal:
    @SETTINGS
    @given(st.data())
    def test_reads_match_numpy(self, tmp_path_factory, data):
        root = tmp_path_factory.mktemp("local")
        shape, chunks = data.draw(shapes_and_chunks(min_dims=1, max_dims=3, max_side=20))
        chunks = tuple(min(c * 3, n + 3) for c, n in zip(chunks, shape, strict=True))
        fmt = data.draw(st.sampled_from([2, 3]))
        dtype = data.draw(st.sampled_from(["i2", "f4", "f8", ">i4" if fmt == 2 else "u1"]))
        compressors = data.draw(st.sampled_from([None, None, "auto"]))
        store_cls = data.draw(st.sampled_from([cs.LocalStore, _NoViews]))
        path = str(root / "a.zarr")
        a = cs.create_array(path, shape=shape, chunks=chunks, dtype=dtype, zarr_format=fmt,
                            compressors=compressors, fill_value=0, overwrite=True)
        ref = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
        a[...] = ref
        b = cs.open_array(store_cls(path), mode="r")
        for _ in range(2):  # read, rewrite through another handle, read again (cached maps)
            kind = data.draw(st.sampled_from(["basic", "ortho", "coord"]))
            if kind == "basic":
                sel = data.draw(npst.basic_indices(shape, allow_ellipsis=True))
                assert_same(np.asarray(b[sel]), np.asarray(ref[sel]))
            elif kind == "ortho":
                sel = data.draw(ortho_selections(shape))
                assert_same(b.oindex[sel], ref_get_oindex(ref, sel))
            elif 0 not in shape:
                sel = data.draw(coordinate_selections(shape))
                assert_same(b.vindex[sel], ref[sel])
            sel = data.draw(npst.basic_indices(shape, allow_ellipsis=True))
            value = _values(data.draw, ref[sel].shape, ref.dtype)
            cs.open_array(path, mode="r+")[sel] = value
            ref[sel] = value
        assert_same(b[...], ref)


class TestRangePlanner:
    """The pure range arithmetic: plan + gather from the raw chunk bytes == chunk[sel]."""

    @SETTINGS
    @given(st.data())
    def test_plan_and_gather(self, data):
        from chunkstore.indexing import CoordinateIndexer, OrthogonalIndexer
        from chunkstore.io import ranges as rr

        shape = data.draw(npst.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=24))
        dtype = np.dtype(data.draw(st.sampled_from(["<i2", "<f4", ">f8", "u1"])))
        chunk = np.arange(int(np.prod(shape))).astype(dtype).reshape(shape)
        raw = chunk.tobytes()
        kind = data.draw(st.sampled_from(["basic", "ortho", "coord"]))
        if kind == "coord":
            idx = data.draw(coordinate_selections(shape))
            indexer = CoordinateIndexer(idx, shape, shape)
        else:
            sel = data.draw(npst.basic_indices(shape) if kind == "basic"
                            else ortho_selections(shape))
            indexer = OrthogonalIndexer(sel, shape, shape, kind == "ortho")
        cost = data.draw(st.sampled_from([0, 8, rr.REQUEST_COST]))
        planner = rr.RangePlanner(shape, dtype, request_cost=cost, max_fraction=1.0)
        for proj in indexer:
            plan = planner.plan(proj.chunk_selection)
            if plan is None:  # the whole chunk is cheaper
                continue
            assert all(0 <= a < b <= len(raw) for a, b in plan.ranges)
            assert all(b1 < a2 for (_, b1), (a2, _) in zip(plan.ranges, plan.ranges[1:],
                                                          strict=False))
            assert len(plan.ranges) * cost + plan.nbytes < cost + len(raw) or len(
                plan.ranges) <= 1
            got = planner.gather(plan, [raw[a:b] for a, b in plan.ranges])
            expected = chunk[(*proj.chunk_selection, Ellipsis)]
            assert got.dtype == dtype and got.shape == expected.shape
            np.testing.assert_array_equal(got, expected)
