"""The decoded-chunk cache: what entries of variable-length chunks count against the
budget, and values a user's dict store changes in place (never trusted by identity)."""

from __future__ import annotations

import mmap
import tracemalloc

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.io.cache import chunk_cache
from chunkstore.io.cache.chunk_cache import ChunkCache, contents_nbytes
from chunkstore.storage.memory import MemoryStore, _Gen

STR = np.dtypes.StringDType()


# -- sizes ------------------------------------------------------------------------------------
def test_contents_of_fixed_size_dtypes_are_not_counted():
    assert contents_nbytes(np.zeros((3, 4))) == 0
    assert contents_nbytes(np.zeros(3, "S10")) == 0
    assert contents_nbytes(np.array([], dtype=STR)) == 0


@pytest.mark.parametrize("text", ["x" * 40, "é" * 40, "日本語" * 20, "🙂" * 30, "a"])
def test_string_contents_are_an_upper_bound_of_their_utf8_bytes(text):
    chunk = np.array([text] * 10, dtype=STR)
    utf8 = len(text.encode())
    counted = contents_nbytes(chunk)
    if utf8 < STR.itemsize:  # kept in the element's own slot
        assert counted == 0
    else:
        assert 10 * utf8 <= counted <= 10 * (utf8 + 8) * 5 // 4


def test_strings_with_an_na_object():
    dt = np.dtypes.StringDType(na_object=None)
    chunk = np.array(["é" * 40, None, "short"], dtype=dt)
    assert 80 <= contents_nbytes(chunk) <= 2 * 88


def test_object_contents_counted_per_element():
    chunk = np.array([b"x" * 1000, "y" * 2000, None], dtype=object)
    assert contents_nbytes(chunk) >= 3000


def test_a_string_chunk_larger_than_the_budget_is_not_kept():
    cache = ChunkCache("64KiB")
    a = cs.create_array({}, shape=(4,), chunks=(2,), dtype=str, cache=cache)
    a[...] = np.array(["s" * 70_000, "t", "u" * 10, "v"], dtype=object)
    assert a[...].tolist() == ["s" * 70_000, "t", "u" * 10, "v"]
    assert len(cache) == 1  # the small chunk only
    assert cache.nbytes <= cache.budget


def test_many_medium_strings_held_within_the_budget():
    cache = ChunkCache("256KiB")
    a = cs.create_array({}, shape=(200,), chunks=(10,), dtype=str, cache=cache)
    values = np.array([f"{i:04d}" + "ü" * 3000 for i in range(200)], dtype=object)
    a[...] = values
    tracemalloc.start()
    try:
        for _ in range(2):
            got = a[...]
            assert got.tolist() == values.tolist()
            del got
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert 0 < len(cache) < 20
    assert cache.nbytes <= cache.budget
    assert held <= 2 * cache.budget


def test_object_dtype_entries_count_their_elements():
    entry = (None, np.array([b"a" * 100_000, b"b" * 100_000], dtype=object), None)
    assert chunk_cache._size_of(entry) >= 200_000
    cache = ChunkCache("64KiB")
    cache.put(chunk_cache.Place("ns", "", "fp"), "c/0", None, entry[1], cache.epoch())
    assert len(cache) == 0  # larger than the whole budget


# -- values changed in place --------------------------------------------------------------------
def _array(d, cache="1MiB"):
    a = cs.create_array(d, shape=(8,), chunks=(4,), dtype="<i4", compressors=None, cache=cache)
    a[...] = np.arange(8)
    return a


@pytest.mark.parametrize("kind", ["bytearray", "ndarray", "memoryview", "readonly-view"])
def test_mutable_values_changed_in_place_are_seen(kind):
    d = {}
    a = _array(d)
    buf = bytearray(d["c/0"])
    d["c/0"] = {"bytearray": buf, "ndarray": np.frombuffer(buf, np.uint8),
                "memoryview": memoryview(buf),
                "readonly-view": memoryview(buf).toreadonly()}[kind]
    expected = np.arange(8)
    for value in (-1, -2, -3):
        buf[0:4] = np.array([value], "<i4").tobytes()
        expected[0] = value
        np.testing.assert_array_equal(a[...], expected)
        np.testing.assert_array_equal(a[0:2], expected[0:2])


def test_mmap_value_changed_in_place_is_seen():
    d = {}
    a = _array(d)
    m = mmap.mmap(-1, len(d["c/0"]))
    m[:] = d["c/0"]
    d["c/0"] = m
    np.testing.assert_array_equal(a[...], np.arange(8))
    m[0:4] = np.array([42], "<i4").tobytes()
    np.testing.assert_array_equal(a[...], [42, *range(1, 8)])
    m.close()


def test_chunks_of_mutable_values_are_not_kept_bytes_ones_are():
    cache = ChunkCache("1MiB")
    d = {}
    a = _array(d, cache)
    d["c/0"] = bytearray(d["c/0"])
    a[...]
    keys = {k[1] for k in cache._lru._data}
    assert keys == {"c/1"}
    a[4:] = 9  # chunkstore's own write stores bytes again
    a[0:4] = 7
    a[...]
    assert {k[1] for k in cache._lru._data} == {"c/0", "c/1"}


def test_entry_kept_for_bytes_is_served_while_a_mutable_copy_is_equal():
    cache = ChunkCache("1MiB")
    d = {}
    a = _array(d, cache)
    a[...]  # kept with the bytes tokens
    buf = bytearray(d["c/0"])
    d["c/0"] = buf  # same content, another object
    np.testing.assert_array_equal(a[...], np.arange(8))
    assert len(cache) == 2  # equal content: still the entry
    buf[4:8] = np.array([-5], "<i4").tobytes()
    np.testing.assert_array_equal(a[...], [0, -5, 2, 3, 4, 5, 6, 7])
    assert len(cache) == 1


def test_partial_write_into_a_mutable_value():
    d = {}
    a = _array(d)
    d["c/0"] = bytearray(d["c/0"])
    a[1] = 100
    np.testing.assert_array_equal(a[...], [0, 100, 2, 3, 4, 5, 6, 7])


def test_generation_of_a_mutable_value_changes_with_its_content():
    buf = bytearray(b"abcd")
    store = MemoryStore({"k": buf})
    [(data, gen)] = store.get_versioned_many(["k"])
    assert data == b"abcd" and gen.matches(buf)
    buf[0:1] = b"z"
    assert not gen.matches(buf)
    assert store.commit_many([("k", b"new", gen)]) == [False]
    assert buf == bytearray(b"zbcd")


def test_generation_compares_arrays_by_content():
    gen = _Gen(b"\x01\x02\x03\x04")
    assert gen.matches(np.array([1, 2, 3, 4], np.uint8))
    assert not gen.matches(np.array([1, 2, 3, 5], np.uint8))
    assert not gen.matches(np.array([1, 2], np.uint8))
    assert not gen.matches(None)
    value = b"xy"
    assert _Gen(value).matches(value)
