"""Attacks on writes (write units made lazily per run, indexers as random-access
sequences, ``windows``, ``commit_units`` runs retried after a lost compare-and-swap):
every selection kind against NumPy, writes of thousands of chunks, threads sharing
chunks. Each asserts the exact final content."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chunkstore as cs
from chunkstore.io import buffers as buffers_mod
from chunkstore.io import plain as plain_mod

from ..write_checks import assert_same as _assert_same
from ..write_checks import orth_numpy_set as _orth_numpy_set
from ..write_checks import store as _store

# --------------------------------------------------------------------------------------
# 1. hypothesis: every selection kind, against NumPy

_SLICE_STEPS = [1, 1, 2, 3, -1, -2, -5, 7, 1000, -1000]


@st.composite
def _slices(draw, n):
    start = draw(st.none() | st.integers(-n - 3, n + 3))
    stop = draw(st.none() | st.integers(-n - 3, n + 3))
    return slice(start, stop, draw(st.sampled_from(_SLICE_STEPS)))


@st.composite
def _int_arrays(draw, n):
    k = draw(st.integers(0, 2 * n + 2))
    a = np.array(draw(st.lists(st.integers(-n, n - 1), min_size=k, max_size=k)), dtype=np.intp)
    how = draw(st.sampled_from(["raw", "sorted", "unique"]))
    if how == "sorted":
        a = np.sort(a)
    elif how == "unique":
        a = np.unique(a % n) if n else a
    return a


@st.composite
def _masks(draw, n):
    return np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)


@st.composite
def _case(draw):
    ndim = draw(st.integers(0, 3))
    top = {0: 1, 1: 200, 2: 40, 3: 12}[ndim]
    shape = tuple(draw(st.integers(1, top)) for _ in range(ndim))
    chunks = tuple(draw(st.integers(1, 5)) for _ in range(ndim))
    sharded = ndim > 0 and draw(st.booleans()) and draw(st.booleans())
    shards = tuple(c * draw(st.integers(1, 3)) for c in chunks) if sharded else None
    dtype = np.dtype(draw(st.sampled_from(["i4", "f8", "u1"])))
    if dtype.kind == "f":
        fill = draw(st.sampled_from([0.0, float("nan")]))
    else:
        fill = draw(st.sampled_from([0, 7]))
    return dict(shape=shape, chunks=chunks, shards=shards, dtype=dtype, fill=fill,
                store=draw(st.sampled_from(["memory", "local"])),
                compressors=draw(st.sampled_from([None, "auto"])),
                wec=draw(st.booleans()), fmt=3 if sharded or draw(st.booleans()) else 2)


@st.composite
def _write(draw, shape):
    kinds = ["basic", "basic", "orthogonal", "coordinate", "mask", "fancy1"]
    if not shape:
        kinds = ["basic"]
    kind = draw(st.sampled_from(kinds))
    if kind == "basic":
        sel = tuple(draw(_slices(n) | st.integers(-n, n - 1)) for n in shape) if shape \
            else draw(st.sampled_from([(), Ellipsis]))
    elif kind == "orthogonal":
        sel = tuple(draw(_slices(n) | st.integers(-n, n - 1) | _int_arrays(n) | _masks(n))
                    for n in shape)
    elif kind == "coordinate":
        k = draw(st.integers(0, 300))
        sel = tuple(np.array(draw(st.lists(st.integers(-n, n - 1), min_size=k, max_size=k)),
                             dtype=np.intp) for n in shape)
    elif kind == "mask":
        p = draw(st.floats(0, 1))
        seed = draw(st.integers(0, 2**31))
        sel = np.random.default_rng(seed).random(shape) < p
    else:  # one int array / mask on axis 0 through __setitem__
        sel = draw(_int_arrays(shape[0]) | _masks(shape[0]))
    value_kind = draw(st.sampled_from(["scalar", "full", "broadcast"]))
    return kind, sel, value_kind, draw(st.integers(0, 2**31))


def _value(value_kind, target_shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if value_kind == "scalar":
        return dtype.type(rng.integers(1, 100)) if dtype.kind != "f" else float(
            rng.choice([np.nan, 1.5, 0.0]))
    shape = target_shape
    if value_kind == "broadcast" and target_shape:
        cut = int(rng.integers(0, len(target_shape) + 1))
        shape = tuple(1 if rng.random() < 0.5 else d for d in target_shape[cut:])
    v = rng.integers(0, 250, size=shape).astype(dtype)
    if dtype.kind == "f" and v.size:
        v.flat[rng.integers(0, v.size, size=max(1, v.size // 5))] = np.nan
    return v


def _apply(a, ref, kind, sel, val):
    """Apply the write to ``a`` and ``ref``; both must succeed or both fail."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if kind == "orthogonal":
                _orth_numpy_set(ref, sel, val)
            else:
                ref[sel] = val
            np_err = None
        except (IndexError, ValueError) as e:
            np_err = e
        try:
            if kind == "orthogonal":
                a.oindex[sel] = val
            elif kind == "coordinate":
                a.vindex[sel] = val
            else:
                a[sel] = val
            cs_err = None
        except (IndexError, ValueError) as e:
            cs_err = e
    assert (np_err is None) == (cs_err is None), (np_err, cs_err)
    return np_err is None


def _target_shape(ref, kind, sel):
    if kind == "orthogonal":
        idx = []
        for s, n in zip(sel, ref.shape, strict=True):
            if isinstance(s, int | np.integer):
                continue
            if isinstance(s, slice):
                idx.append(len(range(*s.indices(n))))
            else:
                a = np.asarray(s)
                idx.append(int(a.sum()) if a.dtype == bool else a.size)
        return tuple(idx)
    return ref[sel].shape


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large])
@given(case=_case(), data=st.data())
def test_hypothesis_writes_match_numpy(tmp_path_factory, case, data):
    tmp = tmp_path_factory.mktemp("h")
    store = _store(case["store"], tmp)
    with cs.config.set({"array.write_empty_chunks": case["wec"]}):
        a = cs.create_array(store, shape=case["shape"], chunks=case["chunks"],
                            shards=case["shards"], dtype=case["dtype"],
                            fill_value=case["fill"], compressors=case["compressors"],
                            zarr_format=case["fmt"])
        ref = np.full(case["shape"], case["fill"], case["dtype"])
        for _ in range(data.draw(st.integers(1, 4))):
            kind, sel, value_kind, seed = data.draw(_write(case["shape"]))
            try:
                tshape = _target_shape(ref, kind, sel)
            except IndexError:
                continue
            val = _value(value_kind, tshape, case["dtype"], seed)
            if not _apply(a, ref, kind, sel, val):
                continue
            _assert_same(a[...], ref, f"after {kind} write {sel!r}")
        _assert_same(cs.open_array(store, mode="r")[...], ref, "reopened")


# --------------------------------------------------------------------------------------
# 1b. large writes: > 64 units (several runs) and > 2000 chunks


@pytest.mark.parametrize("store_kind,compressors,fill,wec", [
    ("memory", None, 0, False), ("memory", "auto", np.nan, True),
    ("memory", "auto", 0, True), ("memory", None, np.nan, False),
    ("local", None, 0, True), ("local", "auto", np.nan, False)])
def test_many_chunk_writes_match_numpy(tmp_path, store_kind, compressors, fill, wec):
    shape, chunks = (61, 73), (1, 2)  # 61 * 37 = 2257 chunks, edge chunks on axis 1
    rng = np.random.default_rng(7)
    store = _store(store_kind, tmp_path)
    with cs.config.set({"array.write_empty_chunks": wec}):
        a = cs.create_array(store, shape=shape, chunks=chunks, dtype="f8", fill_value=fill,
                            compressors=compressors)
        ref = np.full(shape, fill, "f8")
        writes = [
            (np.s_[:, :], rng.random(shape)),                  # every chunk, whole
            (np.s_[1:60, 1:72], rng.random((59, 71))),          # every chunk, partial
            (np.s_[::-1, ::-3], rng.random((61, 25))),          # negative steps
            (np.s_[60:0:-7, 72::-1000], 5.0),                   # huge step, scalar
            (np.s_[:, 5], np.full(61, fill)),                   # fill into a column
            (np.s_[...], fill),                                 # all fill: deletes
            (np.s_[2:, :], rng.random((1, 73))),                # broadcast rows
            (np.s_[::2, 1::2], np.nan),                         # scalar NaN
        ]
        for sel, val in writes:
            a[sel] = val
            ref[sel] = val
            _assert_same(a[...], ref, f"basic {sel}")
        # orthogonal, repeated/unsorted indices (last write wins as in NumPy)
        rows = rng.integers(-61, 61, size=200)
        cols = rng.permutation(73)[:50]
        v = rng.random((200, 50))
        a.oindex[rows, cols] = v
        _orth_numpy_set(ref, (rows, cols), v)
        _assert_same(a[...], ref, "oindex")
        # coordinate writes with repeated points
        pts = (rng.integers(0, 61, size=5000), rng.integers(-73, 73, size=5000))
        v = rng.random(5000)
        a.vindex[pts] = v
        ref[pts] = v
        _assert_same(a[...], ref, "vindex")
        mask = rng.random(shape) < 0.3
        a[mask] = -1.0
        ref[mask] = -1.0
        _assert_same(a[...], ref, "mask")
        a.vindex[mask] = np.arange(mask.sum(), dtype="f8")
        ref[mask] = np.arange(mask.sum(), dtype="f8")
        _assert_same(a[...], ref, "vindex mask")
        _assert_same(cs.open_array(store, mode="r")[...], ref, "reopened")


@pytest.mark.parametrize("store_kind", ["memory", "local"])
def test_small_windows_and_runs(tmp_path, store_kind, monkeypatch):
    """Force many windows (batches) and many runs of a few units: window boundaries and
    run boundaries fall inside the selection everywhere."""
    monkeypatch.setattr(plain_mod, "BATCH_BYTES", 7 * 8 * 3)  # 7 chunks per window
    monkeypatch.setattr(buffers_mod, "WARM_RUN_UNITS", 3)
    monkeypatch.setattr(buffers_mod, "RUNS_PER_THREAD", 50)
    shape, chunks = (50, 40), (3, 1)
    rng = np.random.default_rng(3)
    a = cs.create_array(_store(store_kind, tmp_path), shape=shape, chunks=chunks, dtype="f8",
                        fill_value=0, compressors=None)
    ref = np.zeros(shape)
    for sel, val in [(np.s_[:], rng.random(shape)), (np.s_[1:-1, ::-1], rng.random((48, 40))),
                     (np.s_[::4, 3:], 2.0), (np.s_[-7::-3, -1:2:-2], rng.random((15, 19)))]:
        a[sel] = val
        ref[sel] = val
        _assert_same(a[...], ref, f"{sel}")
    rows, cols = rng.integers(-50, 50, 120), rng.integers(-40, 40, 30)
    v = rng.random((120, 30))
    a.oindex[rows, cols] = v
    _orth_numpy_set(ref, (rows, cols), v)
    _assert_same(a[...], ref, "oindex")
    pts = (rng.integers(0, 50, 3000), rng.integers(0, 40, 3000))
    v = rng.random(3000)
    a.vindex[pts] = v
    ref[pts] = v
    _assert_same(a[...], ref, "vindex")


def test_zero_d_and_empty_selections(tmp_path):
    for store in (cs.MemoryStore(), str(tmp_path / "z.zarr")):
        z = cs.create_array(store, shape=(), dtype="i4", fill_value=3, overwrite=True)
        z[...] = 5
        assert z[...] == 5
        z[()] = np.int64(-2)
        assert z[()] == -2
    a = cs.create_array(str(tmp_path / "e.zarr"), shape=(10, 7), chunks=(3, 2), dtype="i4",
                        fill_value=1)
    ref = np.ones((10, 7), "i4")
    a[5:5] = 9
    a[:, 7:] = 9
    a.oindex[np.array([], dtype=int), :] = 9
    a.vindex[np.array([], int), np.array([], int)] = np.array([], "i4")
    a[np.zeros((10, 7), bool)] = 9
    _assert_same(a[...], ref, "empty writes")


# --------------------------------------------------------------------------------------
# 1c. lost compare-and-swap races while runs make their units lazily (threads)


@pytest.mark.parametrize("store_kind,sync", [("memory", False), ("local", False),
                                            ("local", True), ("memory", True)])
def test_threads_distinct_elements_of_shared_chunks(tmp_path, store_kind, sync, monkeypatch):
    monkeypatch.setattr(buffers_mod, "WARM_RUN_UNITS", 4)
    shape, chunks, n = (40, 90), (4, 3), 4
    a = cs.create_array(_store(store_kind, tmp_path), shape=shape, chunks=chunks, dtype="i4",
                        fill_value=0,
                        synchronizer=cs.ThreadSynchronizer() if sync else None)
    ref = np.zeros(shape, "i4")
    errors = []
    rows = np.arange(40)

    def own_points(p, rep):
        cols = np.arange(p, 90, n)
        return rows, cols[(rows * 7 + rep) % len(cols)]

    def writer(p):
        try:
            for rep in range(3):
                a[:, p::n] = (p + 1) * 100 + rep       # every chunk shared by all writers
                a.vindex[own_points(p, rep)] = p + 1   # then scattered points of its own
        except BaseException as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(p,)) for p in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for p in range(n):
        ref[:, p::n] = (p + 1) * 100 + 2
        ref[own_points(p, 2)] = p + 1
    _assert_same(a[...], ref, "threads, shared chunks")
