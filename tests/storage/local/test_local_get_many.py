"""LocalStore.get_many's batched fast path keeps every check of ``get``."""

from __future__ import annotations

import os

import pytest

from chunkstore.errors import InvalidKeyError
from chunkstore.storage.local.reads import INLINE_READ_BYTES
from chunkstore.storage.local.store import LocalStore


@pytest.fixture
def store(tmp_path):
    st = LocalStore(tmp_path / "root")
    st.set_many({f"c/0/{i}": bytes([i]) * (i + 1) for i in range(20)})
    st.set("top", b"T")
    return st


def test_get_many_matches_get(store):
    keys = [f"c/0/{i}" for i in range(25)] + ["top", "nodir/x", "c/0", "c/0/3"]
    assert store.get_many(keys) == [store.get(k) for k in keys]
    assert store.get_many(keys)[3] == b"\x03" * 4
    assert store.get_many(keys)[-3] is None  # a directory reads as missing


@pytest.mark.parametrize("bad", ["c/0/..", "c/0/.", "c/0/", "c/0/a\\b", "c/0/a\x00", "/c/0/1",
                                 "c//0/1", "../c/0/1"])
def test_get_many_rejects_bad_keys_after_good_ones_in_same_dir(store, bad):
    with pytest.raises(InvalidKeyError):
        store.get_many(["c/0/1", "c/0/2", bad])


def test_get_many_refuses_symlink_escape(tmp_path, store):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"secret")
    root = tmp_path / "root"
    os.symlink(outside, root / "linkdir")
    os.symlink(outside / "secret", root / "c" / "0" / "linkfile")
    with pytest.raises(InvalidKeyError, match="linkdir/secret"):
        store.get_many(["c/0/1", "linkdir/secret"])
    with pytest.raises(InvalidKeyError, match="c/0/linkfile"):
        store.get_many(["c/0/1", "c/0/2", "c/0/linkfile"])


def test_get_many_follows_symlink_inside_root(tmp_path, store):
    root = tmp_path / "root"
    os.symlink(root / "c" / "0" / "4", root / "c" / "0" / "alias")
    assert store.get_many(["c/0/1", "c/0/alias"]) == [b"\x01" * 2, b"\x04" * 5]


def test_get_many_large_values_use_the_pool_and_keep_order(tmp_path):
    st = LocalStore(tmp_path / "big")
    big = {f"b/{i}": bytes([i]) * (INLINE_READ_BYTES + 1 + i) for i in range(20)}
    st.set_many(big)
    keys = ["b/missing", "b/0"] + [f"b/{i}" for i in range(19, 0, -1)] + ["b/missing2"]
    got = st.get_many(keys)
    assert got == [big.get(k) for k in keys]


def test_get_views_of_small_files_read_them_without_asking_their_size(store, monkeypatch):
    """A small file is read in one call (no fstat): the bytes are exact, a directory, an
    empty file, a FIFO and a missing key still read as they did, and a file over
    ``max_bytes`` is still refused."""
    from chunkstore.storage.bounds import ObjectSizeError
    from chunkstore.storage.local import reads as local_reads

    store.set("c/0/empty", b"")
    os.mkfifo(store.root / "c" / "0" / "fifo")
    (store.root / "c" / "0" / "dir").mkdir()
    stats: list[int] = []
    real_fstat = os.fstat

    def counting(fd):
        stats.append(fd)
        return real_fstat(fd)

    monkeypatch.setattr(local_reads.os, "fstat", counting)
    keys = [f"c/0/{i}" for i in range(20)]
    assert [bytes(v) for v in store.get_views(keys)] == [bytes([i]) * (i + 1)
                                                          for i in range(20)]
    assert stats == []
    assert store.get_views(["c/0/dir", "c/0/fifo", "c/0/missing"]) == [None, None, None]
    assert bytes(store.get_views(["c/0/empty"])[0]) == b""
    with pytest.raises(ObjectSizeError):
        store.get_views(["c/0/19"], max_bytes=19)  # 20 bytes
    assert bytes(store.get_views(["c/0/19"], max_bytes=20)[0]) == bytes([19]) * 20


@pytest.mark.parametrize("size", [1, 64 * 1024 - 1, 64 * 1024, 64 * 1024 + 1, 300_000])
def test_get_views_exact_around_the_map_threshold(tmp_path, size):
    import mmap

    st = LocalStore(tmp_path / "r")
    value = os.urandom(size)
    st.set("c/0/0", value)
    view = st.get_views(["c/0/0"])[0]
    assert bytes(view) == value
    assert isinstance(view, mmap.mmap) == (size >= 64 * 1024)


def test_get_views_stop_reading_first_once_a_file_proves_large(tmp_path, monkeypatch):
    """The chunks of one call are alike: after a file too large to read whole (mapped),
    the rest are asked their size first, not read into a buffer that is thrown away."""
    from chunkstore.storage.local import reads as local_reads

    st = LocalStore(tmp_path / "r")
    big = [os.urandom(100_000) for _ in range(3)]
    st.set_many({f"c/0/{i}": v for i, v in enumerate(big)})
    st.set("c/0/small", b"tiny")
    reads: list[int] = []
    real_read = os.read

    def counting(fd, n):
        reads.append(n)
        return real_read(fd, n)

    monkeypatch.setattr(local_reads.os, "read", counting)
    views = st.get_views(["c/0/0", "c/0/1", "c/0/2", "c/0/small"])
    assert [bytes(v) for v in views] == [*big, b"tiny"]
    assert len(reads) == 1  # only the first file was read before its size was known
