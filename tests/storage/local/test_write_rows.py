"""Uncompressed chunks of a local store are written row by row from the source array
(``Store.writes_arrays``), with no copy into new bytes first; what lands on disk is
exactly the chunk's C-ordered bytes, whatever the source's strides."""

from __future__ import annotations

import os

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.codecs import bytes_codec
from chunkstore.storage import LocalStore, MemoryStore
from chunkstore.storage.base import ANY
from chunkstore.storage.local import rows as local_rows
from chunkstore.storage.local import temp as local_temp


def stored_chunk(root, key: str) -> bytes:
    return (root / key).read_bytes()


@pytest.fixture
def counting_tobytes(monkeypatch):
    """How many strided chunks were copied into bytes (the path the rows avoid)."""
    copies: list[int] = []
    real = bytes_codec.raw_bytes

    def counting(array, strided_ok=False):
        out = real(array, strided_ok)
        if isinstance(out, bytes):
            copies.append(len(out))
        return out

    monkeypatch.setattr(bytes_codec, "raw_bytes", counting)
    from chunkstore.codecs import v2_pipeline
    monkeypatch.setattr(v2_pipeline, "raw_bytes", counting)
    return copies


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_strided_chunks_land_exactly_without_a_copy(tmp_path, counting_tobytes, zarr_format):
    x = np.random.default_rng(0).random((256, 384))  # chunks of 64 x 128 f8: 1 KiB rows
    root = tmp_path / "a.zarr"
    a = cs.create_array(str(root), shape=x.shape, chunks=(64, 128), dtype="f8",
                        compressors=None, zarr_format=zarr_format)
    a[...] = x
    assert counting_tobytes == []
    np.testing.assert_array_equal(a[...], x)
    key = "c/1/2" if zarr_format == 3 else "1.2"
    assert stored_chunk(root, key) == x[64:128, 256:384].tobytes()


def test_reversed_broadcast_and_3d_sources(tmp_path):
    root = tmp_path / "b.zarr"
    a = cs.create_array(str(root), shape=(8, 40, 256), chunks=(4, 20, 128), dtype="i8",
                        compressors=None)
    src = np.arange(16 * 40 * 256, dtype="i8").reshape(16, 40, 256)
    view = src[::-2, :, :]  # negative leading stride, contiguous rows
    a[...] = view
    np.testing.assert_array_equal(a[...], view)
    assert stored_chunk(root, "c/1/1/1") == view[4:8, 20:40, 128:256].tobytes()
    row = np.arange(256, dtype="i8")
    a[...] = row  # broadcast: every row of a chunk is the same memory
    np.testing.assert_array_equal(a[...], np.broadcast_to(row, a.shape))
    assert stored_chunk(root, "c/0/0/1") == np.broadcast_to(row[128:], (4, 20, 128)).tobytes()


def test_short_rows_and_other_stores_still_get_bytes(tmp_path, counting_tobytes):
    x = np.arange(64 * 64, dtype="f4").reshape(64, 64)  # chunks of 32 x 32 f4: 128 B rows
    a = cs.create_array(str(tmp_path / "c.zarr"), shape=x.shape, chunks=(32, 32), dtype="f4",
                        compressors=None)
    a[...] = x
    assert len(counting_tobytes) == 4
    np.testing.assert_array_equal(a[...], x)
    counting_tobytes.clear()
    y = np.random.default_rng(1).random((256, 384))
    store = MemoryStore()
    m = cs.create_array(store, shape=y.shape, chunks=(64, 128), dtype="f8", compressors=None)
    m[...] = y
    assert len(counting_tobytes) == 12  # a memory store keeps bytes
    assert all(type(v) is bytes for k, v in store._data.items() if k.startswith("c/"))
    np.testing.assert_array_equal(m[...], y)


def test_more_rows_than_one_writev_takes(tmp_path, monkeypatch):
    monkeypatch.setattr(local_rows, "IOV_MAX", 7)
    monkeypatch.setattr(local_rows, "COPY_BELOW_ROW_BYTES", 0)  # 1 KiB rows by writev
    x = np.random.default_rng(2).random((100, 256))
    a = cs.create_array(str(tmp_path / "d.zarr"), shape=x.shape, chunks=(50, 128),
                        dtype="f8", compressors=None)
    a[...] = x
    np.testing.assert_array_equal(a[...], x)


def test_a_short_writev_is_finished(tmp_path, monkeypatch):
    """A writev that writes less than asked (signals, quotas) is completed from a copy."""
    real = os.writev
    calls: list[int] = []

    def short(fd, buffers):
        calls.append(len(buffers))
        if len(calls) == 1:
            return real(fd, [memoryview(buffers[0])[:100]])
        return real(fd, buffers)

    monkeypatch.setattr(local_rows.os, "writev", short)
    store = LocalStore(tmp_path / "s")
    x = np.random.default_rng(3).random((64, 1024))
    block = x[:, 256:768]
    store.commit_many([("c/0/0", block, ANY)])
    assert calls
    assert store.get("c/0/0") == block.tobytes()


@pytest.mark.parametrize("path", ["writev", "staged"])
def test_a_failing_row_write_leaves_no_temporary_file(tmp_path, monkeypatch, path):
    def failing(fd, buffers):
        raise OSError(28, "No space left on device")

    if path == "writev":
        monkeypatch.setattr(local_rows, "COPY_BELOW_ROW_BYTES", 0)
        monkeypatch.setattr(local_rows.os, "writev", failing)
    else:  # 2 KiB rows: staged in the thread's scratch buffer, one write
        monkeypatch.setattr(local_rows, "write_all", failing)
    x = np.random.default_rng(4).random((128, 512))
    root = tmp_path / "e.zarr"
    a = cs.create_array(str(root), shape=x.shape, chunks=(64, 256), dtype="f8",
                        compressors=None)
    with pytest.raises(OSError):
        a[...] = x
    left = [p.name for p in root.rglob("*") if p.name.startswith(local_temp.TEMP_PREFIX)]
    assert left == []
    monkeypatch.undo()
    np.testing.assert_array_equal(a[...], np.zeros_like(x))  # nothing half-written


def test_zarr_python_reads_rows_written_by_chunkstore(tmp_path):
    zarr = pytest.importorskip("zarr")
    x = np.random.default_rng(5).random((200, 300)).astype(">f8")
    root = tmp_path / "z.zarr"
    a = cs.create_array(str(root), shape=x.shape, chunks=(64, 160), dtype=">f8",
                        compressors=None)
    a[...] = x
    np.testing.assert_array_equal(zarr.open_array(str(root), mode="r")[...], x)
    y = np.random.default_rng(6).random((200, 300))
    a2 = cs.create_array(str(tmp_path / "z2.zarr"), shape=y.shape, chunks=(64, 160),
                         dtype="f8", compressors=None)
    a2[...] = y
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "z2.zarr"), mode="r")[...], y)


@pytest.fixture
def commits(monkeypatch):
    """The number of chunks in each commit of a local write."""
    sizes: list[int] = []
    real = LocalStore._commit_many

    def counting(self, items, session):
        items = list(items)
        sizes.append(len(items))
        return real(self, items, session)

    monkeypatch.setattr(LocalStore, "_commit_many", counting)
    return sizes


@pytest.mark.parametrize("compressors", [None, "zstd"])
def test_views_do_not_count_against_the_write_budget(tmp_path, commits, compressors):
    """Whole raw chunks handed over as views of the source hold no memory: however
    small ``threading.write_bytes``, they are committed in runs of several chunks.
    Encoded chunks do hold theirs: with a budget of one byte, one chunk per commit."""
    data = np.random.default_rng(1).random((512, 2048)).astype("f4")
    with cs.config.set({"threading.write_bytes": 1}):
        a = cs.create_array(str(tmp_path / "a.zarr"), shape=data.shape, chunks=(64, 256),
                            dtype="f4", compressors=compressors, fill_value=0)
        commits.clear()
        a[...] = data
    assert sum(commits) == 64
    if compressors is None:
        assert len(commits) <= 32 and max(commits) > 1
    else:
        assert set(commits) == {1}
    np.testing.assert_array_equal(cs.open_array(str(tmp_path / "a.zarr"), mode="r")[...],
                                  data)


@pytest.mark.parametrize("shape, chunks", [((256, 512), (128, 256)),  # 2 KiB rows, staged
                                           ((64, 1024), (64, 512)),  # 4 KiB rows, writev
                                           ((6, 40, 300), (3, 20, 150))])  # 3-d, staged
def test_short_and_long_rows_land_and_read_back_exactly(tmp_path, shape, chunks):
    """Rows below ``COPY_BELOW_ROW_BYTES`` go through one staged copy, longer rows through
    writev/preadv: the same bytes on disk either way, and reads into a strided output."""
    x = np.random.default_rng(7).random(shape)
    root = tmp_path / "r.zarr"
    a = cs.create_array(str(root), shape=shape, chunks=chunks, dtype="f8", compressors=None)
    a[...] = x
    last = tuple(n // c - 1 for n, c in zip(shape, chunks, strict=True))
    where = tuple(slice(i * c, (i + 1) * c) for i, c in zip(last, chunks, strict=True))
    assert stored_chunk(root, "c/" + "/".join(map(str, last))) == x[where].tobytes()
    np.testing.assert_array_equal(a[...], x)  # each chunk read into its rows of the output
    y = x[::-1].copy()  # the same chunks again, through the same threads' scratch buffers
    a[...] = y
    np.testing.assert_array_equal(a[...], y)
    np.testing.assert_array_equal(a[1:, 3:], y[1:, 3:])
