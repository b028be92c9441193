"""Array: modes, basic selection against NumPy, fill-value chunks on disk, properties,
chunk primitives, pickling, batched store calls, resize/append."""

from __future__ import annotations

import json
import os
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chunkstore as cs
from chunkstore.errors import (
    ContainsArrayError,
    ContainsGroupError,
    NodeNotFoundError,
    NodeTypeError,
    ReadOnlyError,
)
from chunkstore.io.buffers import RUNS_PER_THREAD
from chunkstore.io.plain import VIEW_GROUP
from chunkstore.runtime import current
from chunkstore.storage import MetricsStore

MAX_RUNS = current().pool.threads(True) * RUNS_PER_THREAD + 1  # store calls per batched write


def chunk_files(root) -> set[str]:
    """Relative paths of the files under a store directory that are not metadata."""
    out = set()
    for dirpath, _, files in os.walk(root):
        for f in files:
            rel = os.path.relpath(os.path.join(dirpath, f), root).replace(os.sep, "/")
            if not rel.endswith(("zarr.json", ".zarray", ".zattrs", ".zgroup")):
                out.add(rel)
    return out


# -- modes --------------------------------------------------------------------------------
def test_mode_r(tmp_path):
    path = str(tmp_path / "x.zarr")
    with pytest.raises(NodeNotFoundError, match="x.zarr"):
        cs.open_array(path, mode="r")
    assert not os.path.exists(path)  # opening read-only creates nothing
    cs.create_array(path, shape=(4,), chunks=(2,), dtype="i4")[:] = [1, 2, 3, 4]
    a = cs.open_array(path, mode="r")
    assert a.read_only
    np.testing.assert_array_equal(a[:], [1, 2, 3, 4])
    with pytest.raises(ReadOnlyError):
        a[0] = 9
    with pytest.raises(ReadOnlyError):
        a.attrs["k"] = 1
    with pytest.raises(ReadOnlyError):
        a.resize(8)
    with pytest.raises(ReadOnlyError):
        a.write_chunk((0,), [5, 6])
    np.testing.assert_array_equal(cs.open_array(path, mode="r")[:], [1, 2, 3, 4])


def test_mode_r_plus(tmp_path):
    path = str(tmp_path / "x.zarr")
    with pytest.raises(NodeNotFoundError):
        cs.open_array(path, mode="r+")
    cs.create_array(path, shape=(4,), chunks=(2,), dtype="i4")
    a = cs.open_array(path, mode="r+")
    assert not a.read_only
    a[1] = 7
    assert cs.open_array(path, mode="r")[1] == 7


def test_mode_a(tmp_path):
    path = str(tmp_path / "x.zarr")
    a = cs.open_array(path, mode="a", shape=(5,), chunks=(2,), dtype="u2")
    assert a.shape == (5,) and a.dtype == np.dtype("u2")
    a[:] = 3
    # re-opening with "a" keeps the data (no overwrite), whatever shape is passed
    b = cs.open_array(path, mode="a", shape=(5,), chunks=(2,), dtype="u2")
    np.testing.assert_array_equal(b[:], [3] * 5)
    c = cs.open_array(path, mode="a")
    np.testing.assert_array_equal(c[:], [3] * 5)
    with pytest.raises((NodeNotFoundError, TypeError)):
        cs.open_array(str(tmp_path / "missing.zarr"), mode="a")


def test_mode_w_overwrites(tmp_path):
    path = tmp_path / "x.zarr"
    a = cs.create_array(str(path), shape=(4,), chunks=(2,), dtype="i4")
    a[:] = [1, 2, 3, 4]
    assert chunk_files(path) == {"c/0", "c/1"}
    b = cs.open_array(str(path), mode="w", shape=(3,), chunks=(3,), dtype="f4")
    assert b.shape == (3,) and b.dtype == np.dtype("f4")
    assert chunk_files(path) == set()  # old chunks gone
    np.testing.assert_array_equal(b[:], [0, 0, 0])


def test_mode_w_minus(tmp_path):
    path = str(tmp_path / "x.zarr")
    a = cs.open_array(path, mode="w-", shape=(4,), chunks=(2,), dtype="i4")
    a[:] = 5
    with pytest.raises(ContainsArrayError, match="already exists"):
        cs.open_array(path, mode="w-", shape=(4,), chunks=(2,), dtype="i4")
    np.testing.assert_array_equal(cs.open_array(path, mode="r")[:], [5] * 4)  # untouched
    cs.group(str(tmp_path / "g.zarr"))
    with pytest.raises(ContainsGroupError):
        cs.open_array(str(tmp_path / "g.zarr"), mode="w-", shape=(2,))


def test_create_refuses_existing_without_overwrite():
    store = cs.MemoryStore()
    cs.create_array(store, shape=(2,), dtype="i4")
    with pytest.raises(ContainsArrayError):
        cs.create_array(store, shape=(2,), dtype="i4")
    assert cs.create_array(store, shape=(3,), dtype="i4", overwrite=True).shape == (3,)


def test_bad_mode_and_group_as_array(tmp_path):
    with pytest.raises(ValueError, match="mode"):
        cs.open_array(None, mode="x")
    cs.group(str(tmp_path / "g.zarr"))
    with pytest.raises(NodeTypeError, match="group"):
        cs.open_array(str(tmp_path / "g.zarr"), mode="r")


# -- basic selection against NumPy ------------------------------------------------------------
REF = np.arange(7 * 9 * 5, dtype="i4").reshape(7, 9, 5) * 3 - 100

SELECTIONS = [
    (), Ellipsis, 0, -1, 6, -7, (2, 3), (-1, -1, -1), (1, 2, 3),
    slice(None), slice(2, 5), slice(-3, None), slice(None, None, 2), slice(None, None, 3),
    slice(1, 6, 4), slice(100, 200), slice(5, 2),
    (slice(None), 4), (Ellipsis, 2), (1, Ellipsis), (Ellipsis, slice(1, 4), -2),
    (slice(1, 7, 2), slice(0, 9, 4), slice(None, None, 2)),
    (slice(None, None, -1),), (slice(6, 0, -2), 3, slice(None)),
    (0, slice(8, None, -3), Ellipsis),
]


@pytest.fixture(params=[3, 2], ids=["v3", "v2"])
def ref_array(request):
    a = cs.create_array(None, shape=REF.shape, chunks=(3, 4, 2), dtype=REF.dtype,
                        zarr_format=request.param, fill_value=-1)
    a[...] = REF
    return a


@pytest.mark.parametrize("sel", SELECTIONS, ids=repr)
def test_basic_get_matches_numpy(ref_array, sel):
    got = ref_array[sel]
    expect = REF[sel]
    np.testing.assert_array_equal(got, expect)
    assert np.shape(got) == expect.shape
    assert ref_array.get_basic_selection(sel).shape == expect.shape


@pytest.mark.parametrize("sel", SELECTIONS, ids=repr)
def test_basic_set_matches_numpy(ref_array, sel):
    expect = REF.copy()
    value = np.arange(np.empty(REF.shape)[sel].size, dtype="i4").reshape(np.shape(REF[sel]))
    expect[sel] = value + 1000
    ref_array[sel] = value + 1000
    np.testing.assert_array_equal(ref_array[...], expect)


@pytest.mark.parametrize("sel", [(), (slice(1, 5), 2), (Ellipsis, 0), 3, (0, 0, 0),
                                 (slice(None, None, 3), slice(1, None, 2))], ids=repr)
def test_scalar_broadcast_set(ref_array, sel):
    expect = REF.copy()
    expect[sel] = 42
    ref_array[sel] = 42
    np.testing.assert_array_equal(ref_array[...], expect)


def test_row_broadcast_set(ref_array):
    expect = REF.copy()
    expect[2:5] = np.arange(5)
    ref_array[2:5] = np.arange(5)
    np.testing.assert_array_equal(ref_array[...], expect)


@given(data=st.data())
@settings(max_examples=int(os.environ.get("CS_EXAMPLES", "60")), deadline=None)
def test_basic_selection_property(data):
    shape = data.draw(st.lists(st.integers(0, 7), min_size=0, max_size=3), label="shape")
    chunks = [data.draw(st.integers(1, 4)) for _ in shape]
    ref = np.arange(int(np.prod(shape)), dtype="f8").reshape(shape)
    a = cs.create_array(None, shape=shape, chunks=chunks, dtype="f8", fill_value=np.nan)
    a[...] = ref
    sel = []
    for n in shape:
        if n and data.draw(st.booleans()):
            sel.append(data.draw(st.integers(-n, n - 1)))
        else:
            start = data.draw(st.none() | st.integers(-n - 2, n + 2))
            stop = data.draw(st.none() | st.integers(-n - 2, n + 2))
            step = data.draw(st.none() | st.integers(-3, 3).filter(bool))
            sel.append(slice(start, stop, step))
    sel = tuple(sel)
    np.testing.assert_array_equal(a[sel], ref[sel])
    value = data.draw(st.floats(-5, 5, allow_nan=False))
    ref[sel] = value
    a[sel] = value
    np.testing.assert_array_equal(a[...], ref)


@pytest.mark.parametrize("sel", [7, -8, (0, 9), (0, 0, 5), (0, 0, 0, 0)], ids=repr)
def test_out_of_bounds_names_array(sel):
    a = cs.create_array(None, name="grp/arr", shape=REF.shape, chunks=(3, 4, 2), dtype="i4")
    with pytest.raises(IndexError, match="/grp/arr"):
        a[sel]
    with pytest.raises(IndexError, match="/grp/arr"):
        a[sel] = 1


def test_wrong_shape_value_names_array_and_loses_nothing():
    a = cs.create_array(None, name="arr", shape=(4, 4), chunks=(2, 2), dtype="i4")
    a[...] = 1
    with pytest.raises(ValueError, match=r"/arr.*shape"):
        a[:2, :2] = np.ones((3, 3))
    with pytest.raises(TypeError, match="/arr"):
        a[0, 0] = "not a number"
    np.testing.assert_array_equal(a[...], np.ones((4, 4)))


# -- fill value chunks -----------------------------------------------------------------------------
@pytest.mark.parametrize("fill", [0, 7, np.nan, -np.inf])
def test_missing_chunks_read_fill(fill):
    a = cs.create_array(None, shape=(5, 5), chunks=(2, 2), dtype="f4", fill_value=fill)
    a[0, 0] = 1.5
    got = a[...]
    expect = np.full((5, 5), fill, dtype="f4")
    expect[0, 0] = 1.5
    np.testing.assert_array_equal(got, expect)
    assert a.nchunks_initialized == 1


@pytest.mark.parametrize("zarr_format", [3, 2])
def test_fill_chunks_not_written_and_deleted(tmp_path, zarr_format):
    path = tmp_path / "x.zarr"
    a = cs.create_array(str(path), shape=(6, 4), chunks=(2, 4), dtype="f8",
                        fill_value=np.nan, zarr_format=zarr_format)
    data = np.full((6, 4), np.nan)
    data[2:4] = 1.0
    a[...] = data
    key = "c/1/0" if zarr_format == 3 else "1.0"
    assert chunk_files(path) == {key}
    a[3, :] = np.nan  # chunk still holds data
    assert chunk_files(path) == {key}
    a[2, :] = np.nan  # the chunk becomes all fill: deleted
    assert chunk_files(path) == set()
    np.testing.assert_array_equal(a[...], np.full((6, 4), np.nan))
    a.write_chunk((0, 0), np.full((2, 4), np.nan))
    a.write_region((slice(4, 6), slice(0, 4)), np.full((2, 4), np.nan))
    assert chunk_files(path) == set()


def test_write_empty_chunks_opt_in(tmp_path):
    path = tmp_path / "x.zarr"
    a = cs.create_array(str(path), shape=(4,), chunks=(2,), dtype="i4", write_empty_chunks=True)
    a[:] = 0
    assert chunk_files(path) == {"c/0", "c/1"}


# -- properties ------------------------------------------------------------------------------------
def test_properties_v3(tmp_path):
    path = tmp_path / "x.zarr"
    a = cs.create_array(str(path), name="g/arr", shape=(10, 7), chunks=(4, 3), dtype="<i2",
                        fill_value=5, attributes={"a": 1}, dimension_names=["y", "x"])
    assert a.shape == (10, 7) and a.chunks == (4, 3) and a.ndim == 2 and a.size == 70
    assert a.dtype == np.dtype("i2") and a.nbytes == 140 and a.nchunks == 9
    assert a.fill_value == 5 and a.order == "C" and a.zarr_format == 3
    assert a.path == "g/arr" and a.name == "/g/arr" and not a.read_only
    assert dict(a.attrs) == {"a": 1} and a.attrs["a"] == 1
    assert a.shards is None and a.dimension_names == ("y", "x")
    assert isinstance(a.store, cs.LocalStore)
    assert a.metadata.to_json() == json.loads((path / "g" / "arr" / "zarr.json").read_text())
    [blosc] = a.compressors
    assert blosc.to_json()["name"] == "blosc"
    assert a.filters == ()
    assert a.nchunks_initialized == 0
    meta_size = (path / "g" / "arr" / "zarr.json").stat().st_size
    assert a.nbytes_stored == meta_size
    a[...] = np.arange(70).reshape(10, 7)
    assert a.nchunks_initialized == 9
    expected = meta_size + sum((path / "g" / "arr" / "c" / f).stat().st_size
                               for f in chunk_files(path / "g" / "arr" / "c"))
    assert a.nbytes_stored == expected
    info = repr(a.info)
    for text in ("chunkstore.Array", "/g/arr", "int16", "(10, 7)", "(4, 3)", "Read-only",
                 "blosc", "LocalStore", "No. bytes", "140", "Storage ratio",
                 "Chunks initialized", "9/9", str(expected)):
        assert text in info, text


def test_properties_v2_and_attrs_persist():
    store = cs.MemoryStore()
    import numcodecs
    a = cs.create_array(store, shape=(6,), chunks=(4,), dtype=">f8", zarr_format=2,
                        compressors=numcodecs.Zlib(level=2), filters=[numcodecs.Delta(">f8")],
                        order="F", fill_value=None)
    assert a.zarr_format == 2 and a.order == "F"
    assert [c.get_config() for c in a.compressors] == [{"id": "zlib", "level": 2}]
    assert [f.get_config()["id"] for f in a.filters] == ["delta"]
    assert a.nchunks == 2
    a.attrs["units"] = "K"
    assert json.loads(store.get(".zattrs")) == {"units": "K"}
    assert cs.open_array(store, mode="r").attrs["units"] == "K"
    info = repr(a.info)
    assert "zlib" in info and "delta" in info


def test_len_iter_and_asarray():
    a = cs.create_array(None, shape=(5, 2), chunks=(2, 2), dtype="i4")
    a[...] = np.arange(10).reshape(5, 2)
    assert len(a) == 5
    np.testing.assert_array_equal(np.array(list(a)), np.arange(10).reshape(5, 2))
    np.testing.assert_array_equal(np.asarray(a), np.arange(10).reshape(5, 2))


def test_zero_d_and_zero_length():
    z = cs.create_array(None, shape=(), dtype="f8", fill_value=1.5)
    assert z[()] == 1.5 and z.nchunks == 1
    z[()] = 3.0
    assert z[...] == 3.0 and z.store.get("c") is not None
    e = cs.create_array(None, shape=(0, 3), chunks=(2, 2), dtype="i4")
    assert e[...].shape == (0, 3) and e.nchunks == 0
    e[...] = 1
    assert e.nchunks_initialized == 0


# -- chunk primitives --------------------------------------------------------------------------------
@pytest.mark.parametrize(("zarr_format", "kw", "key"), [
    (3, {}, "arr/c/1/2"),
    (3, {"chunk_key_encoding": {"name": "v2", "separator": "."}}, "arr/1.2"),
    (2, {}, "arr/1.2"),
    (2, {"dimension_separator": "/"}, "arr/1/2"),
])
def test_chunk_primitives(zarr_format, kw, key):
    store = cs.MemoryStore()
    a = cs.create_array(store, name="arr", shape=(5, 7), chunks=(2, 3), dtype="i4",
                        zarr_format=zarr_format, fill_value=-1, **kw)
    assert a.chunk_key((1, 2)) == key
    np.testing.assert_array_equal(a.read_chunk((1, 2)), np.full((2, 1), -1))  # edge clipped
    a.write_chunk((1, 2), [[8], [9]])
    assert store.get(key) is not None
    np.testing.assert_array_equal(a[2:4, 6], [8, 9])
    np.testing.assert_array_equal(a.read_chunk((1, 2)), [[8], [9]])
    a.write_chunk((0, 0), np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(a[:2, :3], np.arange(6).reshape(2, 3))
    region = (slice(2, 5), slice(3, 6))
    a.write_region(region, np.full((3, 3), 4))
    np.testing.assert_array_equal(a.read_region(region), np.full((3, 3), 4))
    np.testing.assert_array_equal(a.read_region((slice(0, 1), slice(0, 7))),
                                  [[0, 1, 2, -1, -1, -1, -1]])
    assert a.nchunks_initialized == 4  # (0,0), (1,1), (1,2), (2,1)
    with pytest.raises(IndexError, match="chunk coordinates"):
        a.read_chunk((3, 0))
    with pytest.raises(ValueError, match="shape"):
        a.write_chunk((0, 0), np.zeros((2, 2)))


def test_chunk_aligned_region_write_does_not_read():
    store = MetricsStore(cs.MemoryStore())
    a = cs.create_array(store, shape=(8, 8), chunks=(4, 4), dtype="f4")
    a[...] = 1
    store.calls.clear()
    a.write_region((slice(0, 4), slice(0, 8)), np.zeros((4, 8), "f4") + 2)
    assert store.calls.get("get_many", 0) == 0 and store.calls.get("get", 0) == 0
    assert store.calls.get("get_versioned_many", 0) == 0
    np.testing.assert_array_equal(a[:4], np.full((4, 8), 2))


# -- pickling ---------------------------------------------------------------------------------------
def test_pickle_lazy_reopen(tmp_path):
    path = tmp_path / "x.zarr"
    a = cs.create_array(str(path), name="arr", shape=(6,), chunks=(4,), dtype="i8")
    a[:] = np.arange(6)
    blob = pickle.dumps(a)
    assert len(blob) < 2000  # a description, not data
    # the metadata changes after pickling: the copy must re-read it, not carry a stale one
    a.resize(8)
    a[6:] = [60, 70]
    b = pickle.loads(blob)
    assert b._meta is None  # lazy: nothing loaded yet
    assert b.shape == (8,)
    np.testing.assert_array_equal(b[:], [0, 1, 2, 3, 4, 5, 60, 70])
    b[0] = 99
    assert a[0] == 99
    r = pickle.loads(pickle.dumps(cs.open_array(str(path), path="arr", mode="r")))
    assert r.read_only
    with pytest.raises(ReadOnlyError):
        r[0] = 1


# -- batched IO ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("zarr_format", [3, 2])
def test_many_chunks_one_get_many(zarr_format):
    store = MetricsStore(cs.MemoryStore())
    a = cs.create_array(store, shape=(40, 40), chunks=(4, 4), dtype="f4",
                        zarr_format=zarr_format)
    ref = np.random.default_rng(1).random((40, 40)).astype("f4")
    store.calls.clear()
    a[...] = ref
    # whole chunks: nothing read; a few batched commits (runs, one per pool claim)
    assert set(store.calls) == {"commit_many"}
    assert store.calls["commit_many"] <= MAX_RUNS
    store.calls.clear()
    # 100 chunks: values in place, fetched in groups of at most VIEW_GROUP keys
    groups = -(-100 // VIEW_GROUP)
    np.testing.assert_array_equal(a[...], ref)
    assert store.calls == {"get_views": groups}
    store.calls.clear()
    np.testing.assert_array_equal(a[3:37:3, 1:39], ref[3:37:3, 1:39])  # partial chunks too
    assert store.calls == {"get_views": groups}
    store.calls.clear()
    a[1:39, 2:38] = 0.5  # partial chunks: one batched read, one batched write
    ref[1:39, 2:38] = 0.5
    assert set(store.calls) == {"get_versioned_many", "commit_many"}
    assert store.calls["get_versioned_many"] <= store.calls["commit_many"] <= MAX_RUNS
    np.testing.assert_array_equal(a[...], ref)


# -- resize / append ----------------------------------------------------------------------------------
def test_resize_shrink_deletes_chunks_outside(tmp_path):
    path = tmp_path / "x.zarr"
    a = cs.create_array(str(path), shape=(10, 10), chunks=(4, 4), dtype="i4", fill_value=-1)
    ref = np.arange(100).reshape(10, 10)
    a[...] = ref
    assert len(chunk_files(path)) == 9
    a.resize(5, 3)
    assert a.shape == (5, 3)
    assert chunk_files(path) == {"c/0/0", "c/1/0"}
    assert json.loads((path / "zarr.json").read_text())["shape"] == [5, 3]
    np.testing.assert_array_equal(a[...], ref[:5, :3])
    # growing again shows fill_value, never stale data
    a.resize((10, 10))
    expect = np.full((10, 10), -1)
    expect[:5, :3] = ref[:5, :3]
    np.testing.assert_array_equal(a[...], expect)
    np.testing.assert_array_equal(cs.open_array(str(path), mode="r")[...], expect)


@pytest.mark.parametrize("zarr_format", [3, 2])
def test_resize_to_zero_and_back(zarr_format):
    a = cs.create_array(None, shape=(6,), chunks=(4,), dtype="u1", zarr_format=zarr_format)
    a[:] = 9
    a.resize(0)
    assert a.nchunks_initialized == 0
    a.resize(6)
    np.testing.assert_array_equal(a[:], np.zeros(6))


def test_resize_errors():
    a = cs.create_array(None, name="arr", shape=(4, 4), dtype="i4")
    with pytest.raises(ValueError, match="/arr"):
        a.resize(4)
    with pytest.raises(ValueError, match="/arr"):
        a.resize(4, -1)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_append(axis):
    ref = np.arange(12).reshape(3, 4)
    a = cs.create_array(None, shape=ref.shape, chunks=(2, 3), dtype="i8")
    a[...] = ref
    extra = np.arange(100, 100 + (2 * 4 if axis == 0 else 3 * 2)).reshape(
        (2, 4) if axis == 0 else (3, 2))
    new_shape = a.append(extra, axis=axis)
    expect = np.concatenate([ref, extra], axis=axis)
    assert new_shape == expect.shape == a.shape
    np.testing.assert_array_equal(a[...], expect)


def test_append_wrong_shape():
    a = cs.create_array(None, name="arr", shape=(3, 4), dtype="i8")
    with pytest.raises(ValueError, match="/arr.*append"):
        a.append(np.zeros((2, 5)))
    assert a.shape == (3, 4)


@pytest.mark.parametrize(("fill", "value"), [
    (complex(np.nan, np.inf), complex(np.nan, 0)),
    (complex(np.nan, 0), complex(7, np.nan)),
    (complex(0, 0), complex(0, 1)),
])
def test_complex_chunk_equal_to_fill_only_if_both_parts_match(fill, value):
    a = cs.create_array(None, shape=(4,), chunks=(2,), dtype="c16", fill_value=fill)
    a[:2] = value
    assert a.nchunks_initialized == 1  # not mistaken for fill and dropped
    expect = np.array([value, value, fill, fill], dtype="c16")
    np.testing.assert_array_equal(a[:].view("f8"), expect.view("f8"))
    a[:2] = fill
    assert a.nchunks_initialized == 0


UNCOMPRESSED = [
    {"codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]},
    {"codecs": [{"name": "bytes", "configuration": {"endian": "big"}}]},
    {"codecs": [{"name": "transpose", "configuration": {"order": [2, 0, 1]}}, "bytes"]},
    {"zarr_format": 2, "compressors": None, "dtype": ">i4"},
    {"zarr_format": 2, "compressors": None, "order": "F"},
]


@pytest.mark.parametrize("kw", UNCOMPRESSED, ids=["le", "be", "transpose", "v2-be", "v2-F"])
@pytest.mark.parametrize("where", ["memory", "local"])
def test_uncompressed_partial_reads_match_numpy(tmp_path, kw, where):
    """Uncompressed chunks may be read by byte ranges: the result must not change."""
    kw = dict(kw)
    dtype = kw.pop("dtype", "<i4")
    store = cs.MemoryStore() if where == "memory" else str(tmp_path / "x.zarr")
    a = cs.create_array(store, shape=REF.shape, chunks=(4, 5, 3), dtype=dtype, fill_value=-9,
                        **kw)
    a[:5] = REF[:5]
    expect = np.full(REF.shape, -9, dtype="i4")
    expect[:5] = REF[:5]
    for sel in [(1, 2, 3), (slice(1, 6), slice(2, 8, 3), 1), (Ellipsis, -1),
                (slice(3, 7), 4), (slice(None, None, -2), 0, slice(1, 4))]:
        np.testing.assert_array_equal(a[sel], expect[sel], err_msg=repr(sel))


def test_info_shows_codec_chain_dimension_names_and_attributes():
    a = cs.zeros((20, 30), chunks=(4, 5), shards=(8, 10), dtype="f4",
                 dimension_names=["y", "x"], attributes={"units": "m"})
    info = a.info
    assert info["Codecs"] == ("sharding(chunks (4, 5): bytes(little) -> blosc(lz4, clevel 5, "
                              "shuffle); index at end: bytes(little) -> crc32c)")
    assert info["Dimension names"] == "('y', 'x')" and info["Attributes"] == '{"units": "m"}'
    assert info["Shard shape"] == "(8, 10)" and info["Chunk shape"] == "(4, 5)"
    v2 = cs.zeros((4,), chunks=(2,), dtype="i2", zarr_format=2)
    assert v2.info["Codecs"] == "blosc(lz4, clevel 5, shuffle)"
