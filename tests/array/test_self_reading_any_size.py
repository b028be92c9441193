"""Lazy values that read the array they are written into through paths no per-thread
check sees (dask computes on its own threads): a closure, a ``functools.partial``, a
bound method, a default argument or a module global holding another handle, zarr-python
(``da.from_zarr``, xarray's zarr backend) on the same directory, a path string. Above
one copy block they used to be written block by block over data still to be read (a 513
MiB array shifted by one chunk lost a chunk per block); now they are staged and the
result is NumPy's at any size. Blocks are shrunk (``COPY_BLOCK_BYTES``) so a few KiB
take many; values reading other arrays are not staged."""

from __future__ import annotations

import functools
import sys

import dask
import dask.array as da
import numpy as np
import pytest

import chunkstore as cs
from chunkstore.array import copy as array_copy
from chunkstore.errors import SameLocationError
from chunkstore.io import copy as copy_mod

N, C = 1024, 64  # 16 chunks of 64 int64; blocks of one chunk: 16 blocks
_HANDLE = None  # a module global a task function reads (set by a test)


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch, tmp_path):
    monkeypatch.setattr(copy_mod, "COPY_BLOCK_BYTES", C * 8)
    stage_root = tmp_path / "tmp"
    stage_root.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(stage_root))
    with dask.config.set(scheduler="threads"):  # reads on dask's threads, not this one
        yield
    assert not list(stage_root.iterdir()), "a staging copy was left behind"


@pytest.fixture
def staged(monkeypatch):
    """The number of values staged so far (a list holding one count)."""
    count = [0]
    original = array_copy._staged

    def counting(*args):
        count[0] += 1
        return original(*args)

    monkeypatch.setattr(array_copy, "_staged", counting)
    return count


def _filled(tmp_path, name="a.zarr"):
    a = cs.create_array(str(tmp_path / name), shape=(N,), chunks=(C,), dtype="i8",
                        fill_value=0, dimension_names=["x"])
    a[:] = np.arange(N)
    return a


def _shifted():
    ref = np.arange(N)
    ref[C:] = ref[:-C].copy()
    return ref


def _read(handle, x, block_info=None):
    if block_info is None:  # dask infers the type of the result
        return np.zeros(0, "i8")
    lo, hi = block_info[None]["array-location"][0]
    return np.asarray(handle[lo:hi])


def _read_global(x, block_info=None):
    return _read(_HANDLE, x, block_info)


class _Reader:
    def __init__(self, handle):
        self.handle = handle

    def block(self, x, block_info=None):
        return _read(self.handle, x, block_info)


def _value(kind, path, monkeypatch):
    """A dask array of shape (N - C,) equal to the array at ``path`` without its last
    chunk, reading it through ``kind``."""
    base = da.zeros(N - C, chunks=C, dtype="i8")
    other = cs.open_array(path)  # another handle on the same place
    if kind == "closure":
        return base.map_blocks(lambda x, block_info=None: _read(other, x, block_info))
    if kind == "partial":
        return base.map_blocks(functools.partial(_read, other))
    if kind == "bound_method":
        return base.map_blocks(_Reader(other).block)
    if kind == "default_argument":
        return base.map_blocks(lambda x, h=other, block_info=None: _read(h, x, block_info))
    if kind == "global":
        monkeypatch.setattr(sys.modules[__name__], "_HANDLE", other)
        return base.map_blocks(_read_global)
    if kind == "path_string":
        return base.map_blocks(
            lambda x, block_info=None: _read(cs.open_array(path), x, block_info))
    if kind == "optimized":  # the closure fused into its producers' tasks
        (fused,) = dask.optimize(
            base.map_blocks(lambda x, block_info=None: _read(other, x, block_info)) + 0)
        return fused
    zarr = pytest.importorskip("zarr")
    if kind == "from_zarr_handle":
        return da.from_zarr(zarr.open_array(path, mode="r"))[:-C]
    if kind == "from_zarr_path":
        return da.from_zarr(path)[:-C]
    if kind == "zarr_handle_in_closure":
        z = zarr.open_array(path, mode="r")
        return base.map_blocks(lambda x, block_info=None: _read(z, x, block_info))
    raise AssertionError(kind)


KINDS = ["closure", "partial", "bound_method", "default_argument", "global", "path_string",
         "optimized", "from_zarr_handle", "from_zarr_path", "zarr_handle_in_closure"]


@pytest.mark.parametrize("kind", KINDS)
def test_shift_by_one_chunk_through_a_hidden_reader_is_numpy(tmp_path, monkeypatch, staged,
                                                             kind):
    a = _filled(tmp_path)
    value = _value(kind, str(tmp_path / "a.zarr"), monkeypatch)
    a[C:] = value
    np.testing.assert_array_equal(a[:], _shifted())
    assert staged[0] == 1


@pytest.mark.parametrize("chunks", [None, {}])
def test_xarray_variable_read_through_zarr_python_is_numpy(tmp_path, staged, chunks):
    xr = pytest.importorskip("xarray")
    pytest.importorskip("zarr")
    g = cs.open_group(str(tmp_path / "x.zarr"), mode="w")
    a = g.create_array("v", shape=(N,), chunks=(C,), dtype="i8", fill_value=0,
                       dimension_names=["x"])
    a[:] = np.arange(N)
    ds = xr.open_dataset(str(tmp_path / "x.zarr"), engine="zarr", consolidated=False,
                         chunks=chunks)
    assert (ds["v"].chunks is None) == (chunks is None)  # lazily indexed, or dask
    a[C:] = ds["v"][:-C]  # zarr-python's handle on the same directory
    np.testing.assert_array_equal(a[:], _shifted())
    assert staged[0] == 1


def test_a_group_of_the_target_in_a_partial_is_staged(tmp_path, staged):
    g = cs.open_group(str(tmp_path / "g.zarr"), mode="w")
    a = g.create_array("v", shape=(N,), chunks=(C,), dtype="i8", fill_value=0)
    a[:] = np.arange(N)
    group = cs.open_group(str(tmp_path / "g.zarr"))

    def read(grp, x, block_info=None):
        return _read(grp["v"], x, block_info)

    a[C:] = da.zeros(N - C, chunks=C, dtype="i8").map_blocks(functools.partial(read, group))
    np.testing.assert_array_equal(a[:], _shifted())
    assert staged[0] == 1


def test_a_callable_that_cannot_be_looked_into_is_staged(tmp_path, staged):
    a = _filled(tmp_path)
    other = cs.open_array(str(tmp_path / "a.zarr"))
    # a ufunc made by frompyfunc holds a Python function no walk can see
    reader = np.frompyfunc(lambda lo: other[lo:lo + C], 1, 1)  # one block at lo
    value = da.arange(N - C, chunks=C).map_blocks(lambda x: reader(x[:1])[0] if len(x)
                                                  else x, dtype="i8")
    assert array_copy.reads_target(value, a)
    a[C:] = value
    np.testing.assert_array_equal(a[:], _shifted())
    assert staged[0] == 1


def test_a_graph_too_large_to_walk_is_staged(tmp_path, monkeypatch, staged):
    from chunkstore.array import sources as array_sources
    a, b = _filled(tmp_path), _filled(tmp_path, "b.zarr")
    b[:] = np.arange(N) * 3
    monkeypatch.setattr(array_sources, "MAX_OBJECTS", 20)
    a[C:] = cs.dask.from_store(b)[:-C] + 1  # disjoint, but not proven so within the budget
    expected = np.arange(N)
    expected[C:] = np.arange(N - C) * 3 + 1
    np.testing.assert_array_equal(a[:], expected)
    assert staged[0] == 1


def _disjoint_values(tmp_path):
    """Values over ``b.zarr`` (and other files), never over ``a.zarr``: (name, value,
    expected content of a)."""
    b = cs.open_array(str(tmp_path / "b.zarr"))
    b_data = np.arange(N) * 2
    yield "map_blocks over b", cs.dask.from_store(b).map_blocks(lambda x: x + 1), b_data + 1
    yield "ufunc", np.negative(cs.dask.from_store(b)), -b_data
    yield "closure over b", da.zeros(N, chunks=C, dtype="i8").map_blocks(
        lambda x, block_info=None: _read(b, x, block_info)), b_data
    rng = da.random.default_rng(7).integers(0, 100, N, chunks=C)
    yield "dask random", rng, rng.compute()
    yield "numpy in dask", da.from_array(np.arange(N) * 5, chunks=C), np.arange(N) * 5
    zarr = pytest.importorskip("zarr")
    yield "from_zarr of b", da.from_zarr(zarr.open_array(str(tmp_path / "b.zarr"))), b_data
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "f.h5", "w") as f:
        f["x"] = np.arange(N) * 7
    yield "h5py dataset", h5py.File(tmp_path / "f.h5", "r")["x"], np.arange(N) * 7
    mm = np.memmap(tmp_path / "m.bin", dtype="i8", mode="w+", shape=(N,))
    mm[:] = np.arange(N) * 11
    yield "memmap", da.from_array(mm, chunks=C), np.arange(N) * 11
    g = cs.open_group(str(tmp_path / "g.zarr"), mode="w")
    sibling = g.create_array("s", shape=(N,), chunks=(C,), dtype="i8")
    sibling[:] = np.arange(N) * 13
    yield "sibling in a group", cs.dask.from_store(sibling), np.arange(N) * 13


def test_values_reading_other_arrays_are_not_staged(tmp_path, staged):
    a, b = _filled(tmp_path), _filled(tmp_path, "b.zarr")
    b[:] = np.arange(N) * 2
    names = []
    for name, value, expected in _disjoint_values(tmp_path):
        a[:] = value
        np.testing.assert_array_equal(a[:], expected, err_msg=name)
        names.append(name)
    assert staged[0] == 0, names
    assert len(names) == 9


def test_one_block_is_read_whole_then_written_without_staging(tmp_path, monkeypatch,
                                                              staged):
    monkeypatch.setattr(copy_mod, "COPY_BLOCK_BYTES", N * 8)
    a = _filled(tmp_path)
    a[C:] = _value("closure", str(tmp_path / "a.zarr"), monkeypatch)
    np.testing.assert_array_equal(a[:], _shifted())
    assert staged[0] == 0


@pytest.mark.parametrize("kind", ["closure", "from_zarr_handle"])
def test_to_store_into_a_region_it_reads_through_a_hidden_reader_is_refused(
        tmp_path, monkeypatch, kind):
    a = _filled(tmp_path)
    value = _value(kind, str(tmp_path / "a.zarr"), monkeypatch)
    with pytest.raises(SameLocationError, match="to_store"):
        cs.dask.to_store(value, a, region=(slice(C, N),))
    np.testing.assert_array_equal(a[:], np.arange(N))


def test_memory_store_targets_found_through_another_handle_or_their_dict(staged):
    data: dict = {}
    a = cs.create_array(cs.MemoryStore(data), shape=(N,), chunks=(C,), dtype="i8")
    a[:] = np.arange(N)
    other = cs.open_array(cs.MemoryStore(data))  # another store on the same dict
    base = da.zeros(N - C, chunks=C, dtype="i8")
    a[C:] = base.map_blocks(lambda x, block_info=None: _read(other, x, block_info))
    np.testing.assert_array_equal(a[:], _shifted())
    assert staged[0] == 1
    from chunkstore.array.sources import value_reads
    holder = base.map_blocks(lambda x, d=data: x)  # the raw dict of the target's store
    assert value_reads(holder, a.store, a.path).source is data
    elsewhere = cs.zeros((N,), chunks=(C,), dtype="i8")  # another memory store
    assert not value_reads(holder, elsewhere.store, elsewhere.path).must_stage


def test_url_and_path_spellings_are_places(tmp_path):
    from chunkstore.array.sources import value_reads
    root = f"memory://selfread-{tmp_path.name}"
    a = cs.create_array(f"{root}/g/a", shape=(N,), chunks=(C,), dtype="i8")
    base = da.zeros(N, chunks=C, dtype="i8")
    for url, hit in [(f"{root}/g", True),  # the group containing it
                     (f"{root}/g/a/c/0", True), (f"{root}/g/b", False),
                     (f"file:///selfread-{tmp_path.name}/g/a", False)]:
        value = base.map_blocks(lambda x, u=url: x)
        assert (value_reads(value, a.store, a.path).source == url) is hit, url
    local = _filled(tmp_path)
    (tmp_path / "link.zarr").symlink_to(tmp_path / "a.zarr")
    for spelling in [f"file://{tmp_path}/a.zarr", str(tmp_path / "link.zarr"),
                     f"{tmp_path}/x/../a.zarr/",
                     str(tmp_path / "a.zarr" / "zarr.json")]:
        value = base.map_blocks(lambda x, u=spelling: x)
        assert value_reads(value, local.store, local.path).source == spelling, spelling
    text = f"a docstring naming {tmp_path}/a.zarr\nover two lines"
    assert not value_reads(base.map_blocks(lambda x, u=text: x), local.store,
                           local.path).must_stage


def test_a_staging_copy_that_fails_leaves_the_target_untouched(tmp_path, staged):
    import errno
    a = _filled(tmp_path)
    other = cs.open_array(str(tmp_path / "a.zarr"))

    def read(x, block_info=None):
        if block_info is not None and block_info[None]["array-location"][0][0] >= 3 * C:
            raise OSError(errno.ENOSPC, "No space left on device")  # as a full TMPDIR
        return _read(other, x, block_info)

    with pytest.raises(OSError, match="No space"):
        a[C:] = da.zeros(N - C, chunks=C, dtype="i8").map_blocks(read)
    assert staged[0] == 1
    np.testing.assert_array_equal(a[:], np.arange(N))  # nothing of it written
