"""Values that read the array they are written into (``array_copy``): found in a dask
graph or by the reads they make, staged through a temporary copy so the result is
NumPy's; found only after blocks were written, a clear error; ``a[...] = a`` writes
nothing. Blocks are shrunk so that small arrays take many."""

from __future__ import annotations

import contextvars
import threading

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.array import copy as array_copy
from chunkstore.errors import SelfReadingValueError
from chunkstore.io import copy as copy_mod


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch, tmp_path):
    monkeypatch.setattr(copy_mod, "COPY_BLOCK_BYTES", 64)
    stage_root = tmp_path / "tmp"
    stage_root.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(stage_root))
    yield
    assert not list(stage_root.iterdir()), "a staging copy was left behind"


def _filled(tmp_path, name="a.zarr", n=100, **kw):
    a = cs.create_array(str(tmp_path / name), shape=(n,), chunks=(8,), dtype="i8",
                        fill_value=0, **kw)
    a[:] = np.arange(n)
    return a


def _shifted(n=100):
    ref = np.arange(n)
    ref[1:] = ref[:-1].copy()
    return ref


@pytest.mark.parametrize("make", ["from_store", "from_array"])
def test_dask_value_on_threads_is_found_in_its_graph(tmp_path, make):
    da = pytest.importorskip("dask.array")
    a = _filled(tmp_path)
    lazy = cs.dask.from_store(a) if make == "from_store" else da.from_array(a, chunks=8)
    a[1:] = lazy[:-1]  # dask's default scheduler: reads on other threads
    np.testing.assert_array_equal(a[:], _shifted())


class _Concat:
    """``other`` then the first ``n`` elements that ``read`` gives, read lazily: its first
    blocks do not read, and nothing it holds shows, the array ``read`` reads."""

    def __init__(self, other, read, n, dtype):
        self.other, self.read = other, read
        self.shape, self.dtype = (len(other) + n,), dtype

    def __getitem__(self, sel):
        start, stop, _ = sel[0].indices(self.shape[0])
        n = len(self.other)
        head = self.other[start:min(stop, n)]
        tail = self.read(slice(max(start - n, 0), max(stop - n, 0))) if stop > n else head[:0]
        return np.concatenate([head, tail])


def _hidden(a):
    """A reader of ``a`` that no walk finds: the handle lives in a context variable (the
    thread's context, not the reader's objects)."""
    handle = contextvars.ContextVar("handle")
    handle.set(a)
    return lambda s: handle.get()[s]


def test_self_read_found_after_blocks_were_written_is_an_error_naming_the_array(tmp_path):
    a = _filled(tmp_path)
    value = _Concat(np.full(40, -1), _hidden(a), 60, a.dtype)
    assert not array_copy.reads_target(value, a)  # hidden in a context variable
    with pytest.raises(SelfReadingValueError, match="array '/'") as err:
        a[:] = value
    assert "after 5 blocks were written" in str(err.value)
    expected = np.arange(100)
    expected[:40] = -1  # the blocks written before the value was seen reading the array
    np.testing.assert_array_equal(a[:], expected)


class _Reader:
    """A lazy value that reads ``source`` (not the target)."""

    def __init__(self, source):
        self.source, self.shape, self.dtype = source, source.shape, source.dtype

    def __getitem__(self, sel):
        return self.source[sel]


def test_other_threads_reading_the_target_do_not_count(tmp_path, monkeypatch):
    a, b = _filled(tmp_path), _filled(tmp_path, "b.zarr")
    b[:] = np.arange(100) * 2
    monkeypatch.setattr(array_copy, "_staged", lambda *args: pytest.fail("staged"))
    stop = threading.Event()

    def read_target():
        while not stop.is_set():
            a[:]

    t = threading.Thread(target=read_target)
    t.start()
    try:
        for _ in range(20):
            a[:] = _Reader(b)
    finally:
        stop.set()
        t.join()
    np.testing.assert_array_equal(a[:], np.arange(100) * 2)


def test_whole_array_onto_itself_writes_nothing(tmp_path, monkeypatch):
    a = _filled(tmp_path)
    other = cs.open_array(str(tmp_path / "a.zarr"))
    monkeypatch.setattr(type(a), "write_region", lambda *args: pytest.fail("written"))
    a[...] = other
    a[:] = a
    np.testing.assert_array_equal(a[:], np.arange(100))


@pytest.mark.parametrize("kind", ["bytes", "sharded", "v2"])
def test_staged_copy_keeps_dtype_codecs_and_fill(tmp_path, kind):
    if kind == "bytes":
        a = cs.create_array(str(tmp_path / "s.zarr"), shape=(50,), chunks=(4,), dtype="S3",
                            fill_value=b"")
        data = np.array([str(i).encode() for i in range(50)], dtype="S3")
    else:
        a = cs.create_array(str(tmp_path / "s.zarr"), shape=(50,), chunks=(4,), dtype="f8",
                            fill_value=np.nan, shards=(8,) if kind == "sharded" else None,
                            zarr_format=2 if kind == "v2" else 3)
        data = np.arange(50.0)
        data[10:20] = np.nan
    a[:] = data
    a[3:] = cs.dask.from_store(a)[:-3]
    expected = data.copy()
    expected[3:] = data[:-3]
    np.testing.assert_array_equal(a[:], expected)


def test_a_value_reading_another_array_is_copied_straight(tmp_path, monkeypatch):
    a, b = _filled(tmp_path), _filled(tmp_path, "b.zarr")
    monkeypatch.setattr(array_copy, "_staged", lambda *args: pytest.fail("staged"))
    b[1:] = cs.dask.from_store(a)[:-1]  # reads a, writes b
    np.testing.assert_array_equal(b[:], np.r_[0, np.arange(99)])
    np.testing.assert_array_equal(a[:], np.arange(100))


@pytest.mark.parametrize("chunks", [None, {}])
def test_xarray_variable_of_the_array_is_found_by_its_wrappers(tmp_path, chunks):
    xr = pytest.importorskip("xarray")
    if chunks is not None:
        pytest.importorskip("dask")
    g = cs.open_group(str(tmp_path / "x.zarr"), mode="w")
    a = g.create_array("v", shape=(100,), chunks=(8,), dtype="i8", fill_value=0,
                       dimension_names=["x"])
    a[:] = np.arange(100)
    ds = xr.open_dataset(str(tmp_path / "x.zarr"), engine="chunkstore", chunks=chunks)
    value = ds["v"][:-1]
    assert array_copy.reads_target(value, a)  # through xarray's wrappers of another handle
    a[1:] = value
    np.testing.assert_array_equal(a[:], _shifted())


def test_a_lazy_view_of_the_array_is_found_before_any_block(tmp_path, monkeypatch):
    a = _filled(tmp_path)
    value = _Concat(np.zeros(0, "i8"), _hidden(a), 99, a.dtype)  # found by its reads
    assert not array_copy.reads_target(value, a)
    a[1:] = value
    np.testing.assert_array_equal(a[:], _shifted())
