"""Writes made through a store object's own methods (not through an Array) reach the
decoded-chunk cache of every array on the same data (``Store._notify_written``, heard
through ``runtime.writes``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.runtime.writes import WRITE_LISTENERS
from chunkstore.storage.base import Store


def _other_chunk() -> bytes:
    other = cs.create_array({}, shape=(4,), chunks=(4,), dtype="i4", fill_value=0)
    other[...] = [1, 2, 3, 4]
    return other.store.get("c/0")


EDITS = {
    "set": (lambda st, chunk: st.set("c/0", chunk), [1, 2, 3, 4, 7, 7, 7, 7]),
    "set_many_generator": (lambda st, chunk: st.set_many((k, chunk) for k in ("c/0", "c/1")),
                           [1, 2, 3, 4, 1, 2, 3, 4]),
    "delete": (lambda st, chunk: st.delete("c/1"), [7, 7, 7, 7, 0, 0, 0, 0]),
    "delete_many": (lambda st, chunk: st.delete_many(iter(["c/0"])), [0, 0, 0, 0, 7, 7, 7, 7]),
    "delete_prefix": (lambda st, chunk: st.delete_prefix("c"), [0] * 8),
    "commit_many": (lambda st, chunk: st.commit_many([("c/1", chunk, cs.storage.base.ANY)]),
                    [7, 7, 7, 7, 1, 2, 3, 4]),
}


def _check(where, edit, **kw):
    from chunkstore.io.cache.chunk_cache import ChunkCache

    a = cs.create_array(where, shape=(8,), chunks=(4,), dtype="i4", fill_value=0, cache=False,
                        overwrite=True, **kw)
    a[...] = 7
    cache = ChunkCache("1MiB")
    r = cs.open_array(where, mode="r", cache=cache, **kw)
    np.testing.assert_array_equal(r[...], np.full(8, 7, "i4"))
    assert len(cache) == 2  # both chunks cached
    change, expected = EDITS[edit]
    change(a.store, _other_chunk())
    np.testing.assert_array_equal(r[...], np.array(expected, "i4"))


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_fsspec_memory(edit):
    _check(f"memory://we-{uuid.uuid4().hex[:8]}", edit)


@pytest.mark.parametrize("edit", sorted(EDITS))
@pytest.mark.parametrize("backend", ["fsspec", "obstore"])
def test_s3(s3_bucket, edit, backend):
    if backend == "obstore":
        pytest.importorskip("obstore")
    url, options = s3_bucket
    # named either way: the default of s3:// URLs is obstore when it is installed
    _check(f"{url}/a.zarr", edit, storage_options={**options, "backend": backend})


def test_zip_store(tmp_path):
    from chunkstore.io.cache.chunk_cache import ChunkCache

    path = tmp_path / "a.zip"
    a = cs.create_array(str(path), shape=(8,), chunks=(4,), dtype="i4", fill_value=0,
                        cache=False)
    a[...] = 7
    cache = ChunkCache("1MiB")
    r = cs.open_array(a.store, mode="r", cache=cache)
    np.testing.assert_array_equal(r[...], np.full(8, 7, "i4"))
    a.store.set("c/0", _other_chunk())  # a zip appends the new entry
    np.testing.assert_array_equal(r[...], np.array([1, 2, 3, 4, 7, 7, 7, 7], "i4"))


class DictLike(Store):
    """A user's own store without cache tokens: it reports its writes, which are heard
    too."""

    def __init__(self) -> None:
        super().__init__()
        self.data: dict[str, bytes] = {}
        self.name = uuid.uuid4().hex

    def _description(self):
        return ()

    def with_read_only(self, read_only=True):
        return self  # one dict: the reader and the writer share it

    def location(self):
        return ("DictLike", self.name)

    def get(self, key, byte_range=None):
        value = self.data.get(key)
        if value is None or byte_range is None:
            return value
        start, stop = byte_range
        return value[start:stop]

    def set(self, key, value):
        try:
            self.data[key] = bytes(value)
        finally:
            self._notify_written([key])

    def delete(self, key):
        self.data.pop(key, None)
        self._notify_written([key])

    def list_prefix(self, prefix) -> Iterator[str]:
        return iter(sorted(k for k in self.data if k.startswith(prefix)))

    def list_dir(self, prefix) -> Iterator[str]:
        prefix = prefix.rstrip("/") + "/" if prefix else ""
        return iter(sorted({k[len(prefix):].split("/")[0] for k in self.data
                            if k.startswith(prefix)}))


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_user_store_subclass(edit):
    _check(DictLike(), edit)


def test_listener_runs_after_a_failed_write_too():
    heard = []
    store = DictLike()
    def listener(st, keys, prefix):
        heard.append((st, keys, prefix))

    WRITE_LISTENERS.add(listener)
    try:
        with pytest.raises(TypeError):
            store.set("k", object())  # bytes(object()) fails inside the write
    finally:
        WRITE_LISTENERS.remove(listener)
    assert (store, ["k"], None) in heard


def test_revalidated_stores_do_not_report_writes(tmp_path):
    """LocalStore and MemoryStore revalidate cached chunks by their tokens: their hot
    write paths report nothing; a user's store without tokens reports each write (the
    base class's batched calls go through its ``set`` and ``delete``)."""
    from chunkstore.storage.local.store import LocalStore
    from chunkstore.storage.memory import MemoryStore

    heard = []

    def listener(st, keys, prefix):
        heard.append((type(st).__name__, keys, prefix))

    WRITE_LISTENERS.add(listener)
    try:
        for store in (LocalStore(tmp_path / "x"), MemoryStore()):
            assert store.capabilities.cache_tokens
            store.set_many({"a": b"1", "b": b"2"})
            store.commit_many([("a", None, cs.storage.base.ANY)])
        assert heard == []
        user = DictLike()
        assert not user.capabilities.cache_tokens
        user.set_many({"a": b"1"})
        user.delete_prefix("")
    finally:
        WRITE_LISTENERS.remove(listener)
    assert heard == [("DictLike", ["a"], None), ("DictLike", ["a"], None)]
