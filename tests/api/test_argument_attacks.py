"""Red team: arguments in the wrong order (rechunker's and zarr's habits), byte sizes
where stores or paths are expected, and dict-like mappings as stores."""

from __future__ import annotations

import collections.abc
import os

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.storage.errors import InvalidStoreError


@pytest.fixture
def src(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    a = cs.create_array("src.zarr", shape=(16, 16), chunks=(16, 2), dtype="i4")
    a[:] = np.arange(256).reshape(16, 16)
    return a


def _created(tmp_path):
    return sorted(n for n in os.listdir(tmp_path) if n != "src.zarr")


# -- held: a memory size where the store goes -------------------------------------------------------
@pytest.mark.parametrize("call", [
    lambda a: cs.dask.rechunk(a, (8, 16), "64MB", "out.zarr"),  # rechunker's order
    lambda a: cs.dask.rechunk(a, (8, 16), "64 MiB", "out.zarr"),
    lambda a: cs.dask.transpose(a, (1, 0), "10MB"),
    lambda a: cs.dask.to_store(cs.dask.from_store(a), "1GiB"),
    lambda a: cs.copy(a, "2GB"),
    lambda a: cs.create_array("64MB", shape=(4,), dtype="i4"),
])
def test_memory_size_as_store_is_refused(tmp_path, src, call):
    with pytest.raises(InvalidStoreError, match="memory size"):
        call(src)
    assert _created(tmp_path) == []


@pytest.mark.parametrize("call", [
    lambda a: cs.dask.rechunk(a, "out.zarr", (8, 16)),
    lambda a: cs.dask.rechunk(a, (8, 16), 2**26, "out.zarr"),
    lambda a: cs.create_array((100, 100), "c.zarr"),
    lambda a: cs.dask.to_store("o.zarr", cs.dask.from_store(a)),
])
def test_other_swaps_fail_before_creating_anything(tmp_path, src, call):
    with pytest.raises((TypeError, ValueError)):
        call(src)
    assert _created(tmp_path) == []


# -- broken: max_mem given positionally lands in ``path`` ---------------------------------------------
@pytest.mark.parametrize("call", [
    lambda a: cs.dask.rechunk(a, (8, 16), "out.zarr", "64MB"),
    lambda a: cs.dask.transpose(a, (1, 0), "t.zarr", "10MB"),
])
def test_memory_size_as_path_is_refused(tmp_path, src, call):
    """``rechunk(src, chunks, "out.zarr", "64MB")`` (max_mem passed 4th, as the rest of
    the signature suggests): the store check refuses byte sizes, the path check does not.

    Observed: no error; the array is written to out.zarr at path "64MB" and max_mem
    silently stays at its 1 GiB default."""
    with pytest.raises((InvalidStoreError, ValueError), match="memory size|max_mem"):
        result = call(src)
        if hasattr(result, "execute"):
            result.execute()
    assert _created(tmp_path) == []


# -- broken: a store where the axes go -----------------------------------------------------------------
@pytest.mark.parametrize("store", ["t.zarr", "MEMORY"])
def test_transpose_with_store_where_axes_go(tmp_path, src, store):
    """``transpose(a, store, axes)``: a clear error about ``axes``.

    Observed: ValueError "invalid literal for int() with base 10: 't'" /
    TypeError "'MemoryStore' object is not iterable"."""
    target = cs.MemoryStore() if store == "MEMORY" else store
    with pytest.raises((TypeError, ValueError), match="axes"):
        cs.dask.transpose(src, target, (1, 0))
    assert _created(tmp_path) == []


# -- dict-like mappings as stores ------------------------------------------------------------------------
class FreshBytesMapping(collections.abc.MutableMapping):
    """A MutableMapping that returns an equal but new bytes object on each lookup (as
    any mapping over files, shelve, fsspec's FSMap, zict... does)."""

    def __init__(self):
        self.d = {}

    def __getitem__(self, k):
        return bytes(bytearray(self.d[k]))

    def __setitem__(self, k, v):
        self.d[k] = bytes(v)

    def __delitem__(self, k):
        del self.d[k]

    def __iter__(self):
        return iter(self.d)

    def __len__(self):
        return len(self.d)


def _mappings():
    import fsspec
    return {"custom": FreshBytesMapping, "fsspec-mapper":
            lambda: fsspec.get_mapper(f"memory://rt-{os.getpid()}-{id(object())}")}


@pytest.mark.parametrize("kind", ["custom", "fsspec-mapper"])
def test_partial_write_into_a_dict_like_mapping(kind):
    """DESIGN: a store may be "a dict-like mapping". One thread, no other writer.

    Observed: after ~10 s, ConcurrentWriteError "key 'c/0' kept changing under 200
    read-modify-write attempts (other writers)": MemoryStore's generation is the
    identity of the bytes object, which such a mapping never returns twice."""
    a = cs.create_array(_mappings()[kind](), shape=(8,), chunks=(4,), dtype="i4")
    a[:] = 1
    a[1] = 5
    a.attrs["x"] = 1
    np.testing.assert_array_equal(a[:], [1, 5, 1, 1, 1, 1, 1, 1])
    assert dict(a.attrs) == {"x": 1}
