"""``a[selection]`` with index arrays mixed with slices and ints follows NumPy's advanced
indexing (issue 14, wrong answer 2), get and set, proven against NumPy with hypothesis.

zarr-python refuses these selections; chunkstore returns NumPy's answer: the index arrays
(and ints) broadcast together, their dimensions go in place when they are adjacent and
first when a slice separates them, and an assignment writes exactly the selected
elements."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chunkstore as cs
from chunkstore.indexing import BASIC, COORDINATE, ORTHOGONAL, numpy_selection

N = int(os.environ.get("CHUNKSTORE_HYPOTHESIS_EXAMPLES", "60"))
SETTINGS = settings(max_examples=N, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
DATA = np.arange(125).reshape(5, 5, 5)


@pytest.fixture
def z():
    return cs.array(DATA, chunks=(2, 3, 2))


def test_fewer_index_arrays_than_dimensions(z):
    got = z[[1, 2, 3], [1, 2, 3]]
    assert got.shape == (3, 5)
    np.testing.assert_array_equal(got, DATA[[1, 2, 3], [1, 2, 3]])


def test_assignment_writes_only_the_selected_elements(z):
    z[[1, 2, 3], [1, 2, 3]] = -1
    ref = DATA.copy()
    ref[[1, 2, 3], [1, 2, 3]] = -1
    np.testing.assert_array_equal(z[...], ref)
    assert int((z[...] == -1).sum()) == 15


@pytest.mark.parametrize("sel", [
    ([1, 2, 3], slice(None), [0, 1, 2]),  # separated by a slice: broadcast dims first
    (0, slice(None), [1, 2]),  # an int counts as an index array there
    (slice(1, 4), [1, 2], [3, 4]),  # adjacent, after a slice: in place
    ([[1], [2]], [1, 2]),  # 2-d index arrays broadcast
    (Ellipsis, [1, 2], [0, -1]),
    (slice(None, None, -2), [4, 0], 1),
    ([True, False, True, False, True], [0, 1, 2]),  # a 1-d mask is its nonzero indices
    (np.array([], dtype=int), [1] * 0),
])
def test_mixed_selections_match_numpy(z, sel):
    np.testing.assert_array_equal(z[sel], DATA[sel])
    ref = DATA.copy()
    values = np.arange(ref[sel].size).reshape(ref[sel].shape) + 1000
    ref[sel] = values
    z[sel] = values
    np.testing.assert_array_equal(z[...], ref)


def test_dispatch_keeps_simple_cases_on_their_fast_paths():
    shape = (5, 5, 5)
    assert numpy_selection((0, slice(None)), shape)[1] == BASIC
    assert numpy_selection(([1, 2],), shape)[1] == ORTHOGONAL
    assert numpy_selection((0, [1, 2]), shape)[1] == ORTHOGONAL  # adjacent int and array
    assert numpy_selection(([1, 2], [0, 1], [2, 3]), shape)[1] == COORDINATE
    assert numpy_selection(np.ones(shape, bool), shape)[1] == COORDINATE


def test_errors_are_index_errors(z):
    with pytest.raises(IndexError, match="broadcast"):
        z[[1, 2], [1, 2, 3]]
    with pytest.raises(IndexError, match="out of bounds"):
        z[[1, 9], [1, 2]]
    with pytest.raises(IndexError, match="integer or boolean"):
        z[[1.5, 2.0], [1, 2]]


def test_an_array_as_a_selection():
    a = cs.array(DATA, chunks=(2, 2, 2))
    mask = cs.array(DATA % 3 == 0, chunks=(3, 3, 3))
    np.testing.assert_array_equal(a[mask], DATA[DATA % 3 == 0])
    index = cs.array(np.array([4, 0, 2]))
    np.testing.assert_array_equal(a[index], DATA[[4, 0, 2]])
    np.testing.assert_array_equal(a.oindex[index, :, index], DATA[[4, 0, 2]][:, :, [4, 0, 2]])
    a[mask] = -7
    ref = DATA.copy()
    ref[DATA % 3 == 0] = -7
    np.testing.assert_array_equal(a[...], ref)


# -- hypothesis: random mixed selections on random shapes and chunks --------------------------
@st.composite
def mixed_cases(draw):
    ndim = draw(st.integers(2, 4))
    shape = tuple(draw(st.integers(1, 6)) for _ in range(ndim))
    chunks = tuple(draw(st.integers(1, n + 2)) for n in shape)
    bshape = draw(st.sampled_from([(), (3,), (2, 1), (1, 3), (0,)]))
    items = []
    for n in shape[:draw(st.integers(2, ndim))]:  # may stop short: trailing axes whole
        kind = draw(st.sampled_from(["array", "array", "int", "slice"]))
        if kind == "array":
            size = int(np.prod(bshape))
            values = draw(st.lists(st.integers(-n, n - 1), min_size=size, max_size=size))
            items.append(np.array(values, dtype=int).reshape(bshape))
        elif kind == "int":
            items.append(draw(st.integers(-n, n - 1)))
        else:
            start = draw(st.none() | st.integers(-n, n))
            stop = draw(st.none() | st.integers(-n, n))
            step = draw(st.sampled_from([None, 1, 2, -1, -2]))
            items.append(slice(start, stop, step))
    if sum(isinstance(i, np.ndarray) for i in items) == 0:
        items[0] = np.zeros(bshape or (1,), int)
    return shape, chunks, tuple(items)


@SETTINGS
@given(mixed_cases(), st.integers(0, 2**16))
def test_random_mixed_selections_get_and_set_like_numpy(case, seed):
    shape, chunks, sel = case
    ref = np.random.default_rng(seed).integers(0, 1000, shape)
    a = cs.array(ref, chunks=chunks)
    expected = ref[sel]
    got = a[sel]
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)
    values = np.arange(expected.size).reshape(expected.shape) + 5000
    # NumPy keeps the last of repeated points; so do we (stable order)
    ref[sel] = values
    a[sel] = values
    np.testing.assert_array_equal(a[...], ref)
