"""LocalStore.get_many's batched fast path keeps every check of ``get``."""

from __future__ import annotations

import os

import pytest

from chunkstore.errors import InvalidKeyError
from chunkstore.storage.local import LocalStore
from chunkstore.storage.local_reads import _INLINE_READ_BYTES


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
    big = {f"b/{i}": bytes([i]) * (_INLINE_READ_BYTES + 1 + i) for i in range(20)}
    st.set_many(big)
    keys = ["b/missing", "b/0"] + [f"b/{i}" for i in range(19, 0, -1)] + ["b/missing2"]
    got = st.get_many(keys)
    assert got == [big.get(k) for k in keys]
