"""Reads through memory maps of a LocalStore (``get_views``) stay correct when chunks change.

With a budget (``cache.map_bytes``, off by default and set for this module), the maps of
recently read files are cached process-wide; a cached map may only be used
while ``os.stat`` of its path shows the file that was mapped. These tests replace,
delete and damage chunk files behind the back of an already-open array — the way
another writer or process would (write a temporary file, ``os.replace`` it over the
chunk) — and check that the next read sees exactly the new state.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import replace

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import ChunkDecodeError, InvalidKeyError
from chunkstore.storage.local import store as local
from chunkstore.storage.local.maps import map_cache
from tests.code_child import run_code


@pytest.fixture(autouse=True)
def _map_cache():
    with cs.config.set({"cache.map_bytes": 2**30}):
        yield


SHAPE, CHUNKS = (64, 96), (32, 48)  # raw chunks of 6 KB ... see _big for mapped ones


def _big(tmp_path, compressors, name="a.zarr"):
    """An array whose chunks are large enough to be memory-mapped (>= 64 KB stored)."""
    shape, chunks = (256, 512), (128, 256)  # 128 KB per raw chunk
    rng = np.random.default_rng(0)
    data = rng.random(shape).astype("f4")  # random: compressed chunks stay large too
    path = str(tmp_path / name)
    cs.create_array(path, shape=shape, chunks=chunks, dtype="f4", compressors=compressors)[...] = data
    return path, data


def _replace_behind(path: str, key: str, payload: bytes, keep_mtime: bool = False) -> None:
    """What another writer does: a new file renamed over the chunk (new inode)."""
    target = os.path.join(path, key)
    old = os.stat(target)
    tmp = target + ".other-writer"
    with open(tmp, "wb") as f:
        f.write(payload)
    if keep_mtime:  # same size and mtime as before: only the inode tells them apart
        os.utime(tmp, ns=(old.st_atime_ns, old.st_mtime_ns))
    os.replace(tmp, target)


@pytest.fixture(params=[None, "auto"], ids=["raw", "blosc"])
def compressors(request):
    return request.param


def test_reads_are_served_from_cached_maps(tmp_path, compressors):
    path, data = _big(tmp_path, compressors)
    a = cs.open_array(path, mode="r")
    np.testing.assert_array_equal(a[5, :], data[5, :])
    key = os.path.join(str(a.store.root), a.chunk_key((0, 0)))
    entry = map_cache().get(key)
    assert entry is not None and isinstance(entry[1], mmap.mmap)
    np.testing.assert_array_equal(a[7, 3:9], data[7, 3:9])
    assert map_cache().get(key)[1] is entry[1]  # the same map, not a new one


def test_no_map_is_kept_by_default(tmp_path, compressors):
    path, data = _big(tmp_path, compressors)
    a = cs.open_array(path, mode="r")
    with cs.config.set({"cache.map_bytes": 0}):
        np.testing.assert_array_equal(a[5, :], data[5, :])
    assert not any(p.startswith(str(tmp_path)) for p in map_cache()._maps)


@pytest.mark.parametrize("keep_mtime", [False, True])
def test_atomic_replacement_by_another_writer_is_seen(tmp_path, compressors, keep_mtime):
    path, data = _big(tmp_path, compressors)
    a = cs.open_array(path, mode="r")
    np.testing.assert_array_equal(a[...], data)  # every chunk mapped and cached
    # another array object (a separate handle, as in another process) writes new data;
    # its bytes are then renamed over the chunk without going through this process' store
    scratch = str(tmp_path / "scratch.zarr")
    new = (data[:128, :256] + 1).astype("f4")
    b = cs.create_array(scratch, shape=data.shape, chunks=(128, 256), dtype="f4",
                        compressors=compressors)
    b[:128, :256] = new
    key = a.chunk_key((0, 0))
    payload = open(os.path.join(scratch, key), "rb").read()
    if keep_mtime and compressors is None:
        assert len(payload) == os.path.getsize(os.path.join(path, key))
    _replace_behind(path, key, payload, keep_mtime)
    expected = data.copy()
    expected[:128, :256] = new
    np.testing.assert_array_equal(a[3, 10:20], expected[3, 10:20])
    np.testing.assert_array_equal(a[:, 100], expected[:, 100])
    np.testing.assert_array_equal(a.vindex[[0, 200], [255, 300]], expected[[0, 200], [255, 300]])
    np.testing.assert_array_equal(a[...], expected)


def test_write_from_another_process_is_seen(tmp_path, compressors):
    path, data = _big(tmp_path, compressors)
    a = cs.open_array(path, mode="r")
    np.testing.assert_array_equal(a[:, :300], data[:, :300])
    code = ("import sys, chunkstore as cs; a = cs.open_array(sys.argv[1], mode='r+'); "
            "a[100:200, 250:260] = -1")
    r = run_code(code, path)  # a process of its own (from the suite's fork server)
    assert r.returncode == 0, r.stderr
    data[100:200, 250:260] = -1
    np.testing.assert_array_equal(a[100:200, 240:270], data[100:200, 240:270])
    np.testing.assert_array_equal(a[...], data)


def test_own_writes_through_another_handle_are_seen(tmp_path, compressors):
    path, data = _big(tmp_path, compressors)
    reader = cs.open_array(path, mode="r")
    writer = cs.open_array(path, mode="r+")
    for step in range(3):
        np.testing.assert_array_equal(reader[0, :], data[0, :])
        writer[0, ::7] = step
        data[0, ::7] = step
    np.testing.assert_array_equal(reader[...], data)


def test_deleted_chunk_reads_as_fill(tmp_path, compressors):
    path, data = _big(tmp_path, compressors)
    a = cs.open_array(path, mode="r")
    np.testing.assert_array_equal(a[...], data)
    os.unlink(os.path.join(path, a.chunk_key((1, 1))))
    data[128:, 256:] = 0
    np.testing.assert_array_equal(a[200, 250:270], data[200, 250:270])
    np.testing.assert_array_equal(a[...], data)


def test_truncated_replacement_is_an_error_naming_the_chunk(tmp_path, compressors):
    path, data = _big(tmp_path, compressors)
    a = cs.open_array(path, mode="r")
    np.testing.assert_array_equal(a[...], data)
    key = a.chunk_key((0, 1))
    whole = open(os.path.join(path, key), "rb").read()
    _replace_behind(path, key, whole[: len(whole) // 2])
    with pytest.raises(ChunkDecodeError, match=key):
        a[5, 300]
    with pytest.raises(ChunkDecodeError, match=key):
        a[...]
    np.testing.assert_array_equal(a[:128, :256], data[:128, :256])  # other chunks fine


def test_small_raw_chunks_and_edge_chunks(tmp_path):
    """Files below the map threshold are read, not mapped; edge chunks are full size."""
    data = np.arange(np.prod(SHAPE), dtype="i8").reshape(SHAPE)
    a = cs.create_array(str(tmp_path / "s.zarr"), shape=(60, 90), chunks=CHUNKS, dtype="i8",
                        compressors=None)
    a[...] = data[:60, :90]
    b = cs.open_array(str(tmp_path / "s.zarr"), mode="r")
    np.testing.assert_array_equal(b[59, 40:90], data[59, 40:90])
    np.testing.assert_array_equal(b[::7, ::-5], data[:60, :90][::7, ::-5])
    assert map_cache().get(os.path.join(str(b.store.root), b.chunk_key((1, 1)))) is None


def test_cache_bounds_keep_results_right(tmp_path, compressors, monkeypatch):
    path, data = _big(tmp_path, compressors)
    monkeypatch.setattr(map_cache(), "files", 1)
    a = cs.open_array(path, mode="r")
    for _ in range(2):
        np.testing.assert_array_equal(a[...], data)
        np.testing.assert_array_equal(a[:, 255:257], data[:, 255:257])
    assert len(map_cache()._maps) <= 1
    monkeypatch.setattr(map_cache(), "files", 128)
    monkeypatch.setattr(map_cache(), "nbytes", 1)
    np.testing.assert_array_equal(a[...], data)
    assert len(map_cache()._maps) <= 1


def test_close_drops_the_maps_of_the_store(tmp_path):
    path, data = _big(tmp_path, None)
    a = cs.open_array(path, mode="r")
    np.testing.assert_array_equal(a[...], data)
    root = os.path.join(str(a.store.root), "")
    assert any(p.startswith(root) for p in map_cache()._maps)
    a.store.close()
    assert not any(p.startswith(root) for p in map_cache()._maps)
    np.testing.assert_array_equal(a[...], data)  # reopens lazily


def test_symlink_leading_outside_the_root_is_refused(tmp_path):
    path, data = _big(tmp_path, None)
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"\0" * (128 * 256 * 4))
    a = cs.open_array(path, mode="r")
    key = a.chunk_key((1, 0))
    os.unlink(os.path.join(path, key))
    os.symlink(outside, os.path.join(path, key))
    with pytest.raises(InvalidKeyError):
        a[200, 5]
    with pytest.raises(InvalidKeyError):
        a.store.get_views([key, "../outside.bin"])


def test_nested_root_does_not_reuse_maps_checked_for_an_outer_root(tmp_path):
    """A map made for root /x (key 'inner/c/0/0') is not handed to a store rooted at
    /x/inner whose directory 'c' is a symlink leaving /x/inner: that store checks again."""
    outer = tmp_path / "x"
    real = outer / "elsewhere"
    real.mkdir(parents=True)
    (real / "0").write_bytes(b"\1" * (70 * 1024))
    (outer / "inner").mkdir()
    os.symlink(real, outer / "inner" / "c")
    outer_store = cs.LocalStore(outer)
    assert bytes(outer_store.get_views(["inner/c/0"])[0][:1]) == b"\1"
    with pytest.raises(InvalidKeyError):
        cs.LocalStore(outer / "inner").get_views(["c/0"])


def test_views_match_get_for_every_kind_of_file(tmp_path):
    st = cs.LocalStore(tmp_path / "v")
    values = {"empty": b"", "small": b"abc", "big/x": bytes(range(256)) * 400}
    st.set_many(values)
    (tmp_path / "v" / "dir").mkdir()
    keys = [*values, "missing", "dir", "big/missing"]
    for _ in range(2):  # the second time from the cache
        views = st.get_views(keys)
        assert [None if v is None else bytes(v) for v in views] == [st.get(k) for k in keys]


def test_ranged_store_without_views_matches(tmp_path):
    """zero_copy_views off (e.g. Windows): the byte-range path gives the same answers."""

    class NoViews(cs.LocalStore):
        capabilities = replace(cs.LocalStore.capabilities, zero_copy_views=False)

    path, data = _big(tmp_path, None)
    a = cs.open_array(NoViews(path), mode="r")
    for sel in [(5, slice(None)), (slice(None), 300), (slice(3, 250, 9), slice(None, None, -3))]:
        np.testing.assert_array_equal(a[sel], data[sel])
    np.testing.assert_array_equal(a.vindex[[0, 255], [511, 0]], data[[0, 255], [511, 0]])


@pytest.mark.parametrize("chunks, mapped", [((128, 256), False), ((1024, 512), True)])
def test_small_compressed_chunks_are_read_not_mapped_without_the_map_cache(
        tmp_path, monkeypatch, chunks, mapped):
    """Without kept maps, a compressed chunk under ``MAP_COMPRESSED_BYTES`` (128 KiB here)
    is read into bytes: mapping and unmapping it costs more than the copy. 2 MiB chunks
    are still mapped. Both read exactly, and every chunk goes one way or the other."""
    from chunkstore.io import plain
    data = np.random.default_rng(3).random((2048, 1024)).astype("f4")
    path = str(tmp_path / "c.zarr")
    cs.create_array(path, shape=data.shape, chunks=chunks, dtype="f4",
                    compressors="auto")[...] = data
    calls = {"views": 0, "get": 0}
    views, get = local.LocalStore.get_views, local.LocalStore.get

    def counting_views(self, keys, max_bytes=None):
        calls["views"] += len(keys)
        return views(self, keys, max_bytes)

    def counting_get(self, key, byte_range=None, max_bytes=None):
        calls["get"] += 1
        return get(self, key, byte_range, max_bytes)

    monkeypatch.setattr(local.LocalStore, "get_views", counting_views)
    monkeypatch.setattr(local.LocalStore, "get", counting_get)
    n_chunks = (2048 // chunks[0]) * (1024 // chunks[1])
    with cs.config.set({"cache.map_bytes": 0}):
        np.testing.assert_array_equal(cs.open_array(path, mode="r")[...], data)
    assert (data.itemsize * chunks[0] * chunks[1] >= plain.MAP_COMPRESSED_BYTES) == mapped
    assert calls == ({"views": n_chunks, "get": 0} if mapped else
                     {"views": 0, "get": n_chunks})
