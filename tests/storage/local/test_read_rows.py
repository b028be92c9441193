"""Whole raw chunks of a local store are read straight into the output's rows
(``Store.read_session``, ``local_rows.read_rows``): one ``preadv`` per chunk, no map,
no intermediate bytes; every odd file at a key behaves as it does for other reads."""

from __future__ import annotations

import errno
import os
import threading

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import ChunkDecodeError, InvalidKeyError
from chunkstore.storage import LocalStore, MemoryStore
from chunkstore.storage.bounds import ObjectSizeError
from chunkstore.storage.local import rows as local_rows

SHAPE, CHUNKS = (256, 768), (64, 256)  # 64 KiB chunks of f4, rows of 1 KiB
# (shorter rows are copied from a map: one ndarray per row costs more than it saves)


@pytest.fixture
def preadv_calls(monkeypatch):
    calls: list[int] = []
    real = os.preadv

    def counting(fd, buffers, offset, *args):
        calls.append(len(buffers))
        return real(fd, buffers, offset, *args)

    monkeypatch.setattr(local_rows.os, "preadv", counting)
    return calls


def _array(tmp_path, zarr_format=3, dtype="f4", shape=SHAPE, chunks=CHUNKS, name="a.zarr"):
    data = np.random.default_rng(0).random(shape).astype(dtype)
    a = cs.create_array(str(tmp_path / name), shape=shape, chunks=chunks, dtype=dtype,
                        compressors=None, zarr_format=zarr_format, fill_value=-1)
    a[...] = data
    return a, data


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_whole_raw_chunks_are_read_into_the_output_with_one_preadv_each(
        tmp_path, preadv_calls, monkeypatch, zarr_format):
    a, data = _array(tmp_path, zarr_format)
    monkeypatch.setattr(LocalStore, "_view", lambda *a, **k: pytest.fail("mapped a chunk"))
    np.testing.assert_array_equal(a[...], data)
    assert len(preadv_calls) == 4 * 3  # one call per chunk: 64 rows and the spare byte
    assert set(preadv_calls) == {65}
    np.testing.assert_array_equal(a[64:192, 256:], data[64:192, 256:])


def test_edge_chunks_big_endian_and_partial_reads_stay_exact(tmp_path, preadv_calls):
    a, data = _array(tmp_path, shape=(250, 700))  # edge chunks are partly outside
    np.testing.assert_array_equal(a[...], data)
    np.testing.assert_array_equal(a[3:200, 7:699], data[3:200, 7:699])
    b, big = _array(tmp_path, dtype=">f4", name="b.zarr")  # stored big-endian: converted
    np.testing.assert_array_equal(b[...], big)


def test_missing_chunks_directories_and_fifos_read_as_fill(tmp_path):
    a, data = _array(tmp_path)
    root = str(tmp_path / "a.zarr")
    os.unlink(os.path.join(root, a.chunk_key((0, 0))))
    os.unlink(os.path.join(root, a.chunk_key((1, 1))))
    os.mkdir(os.path.join(root, a.chunk_key((1, 1))))
    os.unlink(os.path.join(root, a.chunk_key((2, 2))))
    os.mkfifo(os.path.join(root, a.chunk_key((2, 2))))
    expected = data.copy()
    for i, j in [(0, 0), (1, 1), (2, 2)]:
        expected[i * 64:(i + 1) * 64, j * 256:(j + 1) * 256] = -1
    np.testing.assert_array_equal(cs.open_array(root, mode="r")[...], expected)


@pytest.mark.parametrize("size", [0, 100, 64 * 1024 - 1, 64 * 1024 + 1, 2**40])
def test_a_chunk_file_of_the_wrong_size_is_an_error_naming_array_and_key(tmp_path, size):
    a, _ = _array(tmp_path)
    key = a.chunk_key((3, 1))
    with open(os.path.join(str(tmp_path / "a.zarr"), key), "r+b") as f:
        f.truncate(size)  # 2**40: a sparse terabyte, refused after reading one byte more
    with pytest.raises(ChunkDecodeError, match=f"{key}.*{size} bytes"):
        cs.open_array(str(tmp_path / "a.zarr"), mode="r")[...]


def test_a_symlink_out_of_the_root_is_refused(tmp_path):
    a, _ = _array(tmp_path)
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"\0" * (64 * 256 * 4))
    target = os.path.join(str(tmp_path / "a.zarr"), a.chunk_key((1, 0)))
    os.unlink(target)
    os.symlink(outside, target)
    with pytest.raises(InvalidKeyError, match="outside the root"):
        cs.open_array(str(tmp_path / "a.zarr"), mode="r")[...]


def test_more_rows_than_one_preadv_takes(tmp_path, preadv_calls, monkeypatch):
    monkeypatch.setattr(local_rows, "IOV_MAX", 7)
    a, data = _array(tmp_path)
    np.testing.assert_array_equal(a[...], data)
    assert len(preadv_calls) == 12 * 11  # 64 rows: 10 calls of 6, the last 4 + spare


def test_a_short_preadv_is_finished(tmp_path, monkeypatch):
    """A preadv that reads less than asked is completed (the file read again)."""
    a, data = _array(tmp_path)
    real = os.preadv

    def short(fd, buffers, offset):
        return real(fd, buffers[:3], offset)

    monkeypatch.setattr(local_rows.os, "preadv", short)
    np.testing.assert_array_equal(a[...], data)


def test_read_errors_other_than_odd_files_propagate(tmp_path, monkeypatch):
    a, _ = _array(tmp_path)

    def failing(fd, buffers, offset):
        raise OSError(errno.EIO, "disk on fire")

    monkeypatch.setattr(local_rows.os, "preadv", failing)
    with pytest.raises(OSError, match="disk on fire"):
        a[...]


def test_key_directories_are_opened_once_per_read(tmp_path, monkeypatch):
    a, data = _array(tmp_path, shape=(512, 768))  # 8 rows of chunks: 8 directories
    opened: list[str] = []
    real = os.open

    def counting(path, flags, *args, **kw):
        if flags & os.O_DIRECTORY:
            opened.append(path)
        return real(path, flags, *args, **kw)

    monkeypatch.setattr(os, "open", counting)
    np.testing.assert_array_equal(a[...], data)
    assert len(opened) == 1 + 1 + 8  # the root, "c", and each c/<i> once


def test_each_chunk_is_one_version_under_a_concurrent_writer(tmp_path):
    """A writer replacing whole chunks while they are read: every chunk of every read
    is all old or all new, never a mix (one descriptor per chunk read)."""
    shape, chunks = (256, 1024), (128, 512)
    a = cs.create_array(str(tmp_path / "a.zarr"), shape=shape, chunks=chunks, dtype="i4",
                        compressors=None)
    a[...] = 0
    stop = threading.Event()

    def writer() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            a[...] = n

    t = threading.Thread(target=writer)
    t.start()
    try:
        reader = cs.open_array(str(tmp_path / "a.zarr"), mode="r")
        for _ in range(40):
            got = reader[...]
            for i in range(2):
                for j in range(2):
                    block = got[i * 128:(i + 1) * 128, j * 512:(j + 1) * 512]
                    assert (block == block.flat[0]).all()
    finally:
        stop.set()
        t.join()


def test_the_default_reader_copies_and_checks_sizes():
    store = MemoryStore()
    store.set("k", np.arange(6, dtype="i4").tobytes())
    out = np.full((2, 3), -1, "i4")
    with store.read_session() as reader:
        assert reader.read_into("k", out)
        assert not reader.read_into("missing", out)
        with pytest.raises(ObjectSizeError, match="'k'"):
            reader.read_into("k", np.empty((2, 2), "i4"))
        assert reader.get("k") == store.get("k")
    np.testing.assert_array_equal(out, np.arange(6).reshape(2, 3))


def test_a_subclass_with_its_own_get_views_is_still_called(tmp_path):
    a, data = _array(tmp_path)
    seen: list[str] = []

    class Watched(LocalStore):
        def get(self, key, *args, **kwargs):
            seen.append(key)
            return super().get(key, *args, **kwargs)

        def get_views(self, keys, max_bytes=None):
            seen.extend(keys)
            return super().get_views(keys, max_bytes)

    np.testing.assert_array_equal(
        cs.open_array(Watched(str(tmp_path / "a.zarr")), mode="r")[...], data)
    assert sorted(seen) == sorted(a.chunk_key((i, j)) for i in range(4) for j in range(3))
