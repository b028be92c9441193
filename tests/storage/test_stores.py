"""The store contract suite (``chunkstore.testing.store_contract``) on every store, then
store-specific tests.

The contract runs on MemoryStore, LocalStore, ZipStore, FsspecStore on ``memory://`` and
FsspecStore on a real S3 HTTP endpoint (moto's server mode); ObstoreStore's run is in
``tests/storage/obstore/test_obstore_s3.py``.
"""

from __future__ import annotations

import os
import pickle
import threading
import uuid
import zipfile
from typing import Any

import pytest

from chunkstore.errors import InvalidKeyError, ReadOnlyError
from chunkstore.storage import FsspecStore, LocalStore, MemoryStore, Store, ZipStore
from chunkstore.testing.store_contract import StoreContract


class TestMemoryStore(StoreContract):
    conditional_writes = conditional_delete = True

    def location(self, request: pytest.FixtureRequest) -> dict:
        return {}

    def make_store(self, location: dict) -> Store:
        return MemoryStore(location)


class TestLocalStore(StoreContract):
    conditional_writes = conditional_delete = True

    def make_store(self, location: Any) -> Store:
        return LocalStore(location / "root.zarr")


class TestZipStore(StoreContract):
    def make_store(self, location: Any) -> Store:
        return ZipStore(location / "root.zip", mode="a")


class TestFsspecMemory(StoreContract):
    def location(self, request: pytest.FixtureRequest) -> str:
        return f"memory://contract-{uuid.uuid4().hex}"

    def make_store(self, location: str) -> Store:
        return FsspecStore(location)


class TestFsspecS3(StoreContract):
    conditional_writes = conditional_delete = True

    def location(self, request: pytest.FixtureRequest) -> tuple[str, dict]:
        url, options = request.getfixturevalue("s3_bucket")
        return url + "/root.zarr", options

    def make_store(self, location: tuple[str, dict]) -> Store:
        return FsspecStore(location[0], storage_options=location[1])


# -- LocalStore ---------------------------------------------------------------------------
def test_local_symlink_escape_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"secret")
    root = tmp_path / "root"
    st = LocalStore(root)
    st.set("ok", b"1")
    os.symlink(outside, root / "linkdir")
    os.symlink(outside / "secret", root / "linkfile")
    for key in ("linkdir/secret", "linkfile"):
        with pytest.raises(InvalidKeyError, match=key):
            st.get(key)
    with pytest.raises(InvalidKeyError, match="linkdir/new"):
        st.set("linkdir/new", b"x")
    assert not (outside / "new").exists()


def test_local_writes_leave_no_temp_files(tmp_path):
    st = LocalStore(tmp_path / "r")
    st.set_many({f"c/{i}": bytes([i]) * 100 for i in range(50)})
    st.set("c/0", b"new")
    with pytest.raises(TypeError):
        st.set("c/1", object())  # fails after the temporary file was created
    assert st.get("c/1") == bytes([1]) * 100  # the old value survives a failed write
    on_disk = sorted(os.listdir(tmp_path / "r" / "c"))
    assert on_disk == sorted(str(i) for i in range(50))


# -- ZipStore -----------------------------------------------------------------------------
def test_zip_rewrite_key_newest_wins_and_compacts(tmp_path):
    path = tmp_path / "d.zip"
    with ZipStore(path, mode="w") as z:
        z.set("k", b"old")
        z.set("gone", b"x")
        z.set("k", b"new")
        assert z.get("k") == b"new" and z.getsize("k") == 3
        z.delete("gone")
        assert sorted(z.list()) == ["k"]
    with zipfile.ZipFile(path) as zf:
        assert zf.namelist() == ["k"] and zf.read("k") == b"new"
    assert os.listdir(tmp_path) == ["d.zip"]  # no temporary archive left


def test_zip_append_is_atomic_until_close(tmp_path):
    path = tmp_path / "d.zip"
    with ZipStore(path, mode="w") as z:
        z.set("a", b"1")
    before = path.read_bytes()
    z = ZipStore(path, mode="a")
    z.set("a", b"2")
    z.set("b", b"3")
    assert z.get("a") == b"2"
    assert path.read_bytes() == before  # the archive on disk is untouched before commit
    z.close()
    with zipfile.ZipFile(path) as zf:
        assert sorted(zf.namelist()) == ["a", "b"] and zf.read("a") == b"2"
    assert z.get("b") == b"3"  # re-opens lazily after close
    assert sorted(os.listdir(tmp_path)) == ["d.zip"]


def test_zip_modes(tmp_path):
    path = tmp_path / "m.zip"
    with pytest.raises(FileNotFoundError, match="m.zip"):
        ZipStore(path, mode="r")
    with ZipStore(path, mode="x") as z:
        z.set("a", b"1")
    with pytest.raises(FileExistsError, match="m.zip"):
        ZipStore(path, mode="x")
    r = ZipStore(path, mode="r")
    assert r.read_only and r.get("a") == b"1"
    with pytest.raises(ReadOnlyError, match="'a'"):
        r.set("a", b"2")
    with ZipStore(path, mode="w") as w:
        assert list(w.list()) == []  # "w" starts empty
        w.set("b", b"2")
    assert list(ZipStore(path).list()) == ["b"]
    with pytest.raises(ValueError, match="mode"):
        ZipStore(path, mode="r+")


def test_zip_slip_names(tmp_path):
    path = tmp_path / "evil.zip"
    with zipfile.ZipFile(path, "w") as zf:  # a foreign archive with dangerous names
        zf.writestr("../escape", b"bad")
        zf.writestr("/etc/abs", b"bad")
        zf.writestr("dir\\win", b"bad")
        zf.writestr("fine/key", b"good")
    z = ZipStore(path)
    assert list(z.list()) == ["fine/key"]
    assert z.get("fine/key") == b"good"
    with pytest.raises(InvalidKeyError, match=r"\.\./escape"):
        z.get("../escape")
    w = ZipStore(tmp_path / "out.zip", mode="w")
    for bad in ("../x", "/abs", "a\\b"):
        with pytest.raises(InvalidKeyError):
            w.set(bad, b"x")
    w.close()
    with zipfile.ZipFile(tmp_path / "out.zip") as zf:
        assert zf.namelist() == []


def test_zip_deflated_ranges(tmp_path):
    value = bytes(range(256)) * 40
    with ZipStore(tmp_path / "c.zip", mode="w", compression=zipfile.ZIP_DEFLATED) as z:
        assert not z.capabilities.partial_reads
        z.set("v", value)
        assert z.get("v", (1000, 1010)) == value[1000:1010]
    z = ZipStore(tmp_path / "c.zip")
    assert z.get("v", (-5, None)) == value[-5:] and z.get("v") == value
    with zipfile.ZipFile(tmp_path / "c.zip") as zf:
        assert zf.getinfo("v").compress_type == zipfile.ZIP_DEFLATED


def test_zip_thread_safe_writes(tmp_path):
    z = ZipStore(tmp_path / "t.zip", mode="w")

    def work(t: int) -> None:
        for i in range(40):
            z.set(f"t{t}/{i}", f"{t}-{i}".encode())
            assert z.get(f"t{t}/{i}") == f"{t}-{i}".encode()

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    z.close()
    with zipfile.ZipFile(tmp_path / "t.zip") as zf:
        assert zf.testzip() is None and len(zf.namelist()) == 160
        assert zf.read("t3/39") == b"3-39"


def test_zip_read_only_view_shares_pending_writes(tmp_path):
    z = ZipStore(tmp_path / "v.zip", mode="w")
    z.set("k", b"pending")
    assert z.with_read_only().get("k") == b"pending"
    z.close()


# -- FsspecStore --------------------------------------------------------------------------
def _count_calls(monkeypatch, fs, name: str) -> list:
    calls: list = []
    original = getattr(fs, name)

    def counted(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(fs, name, counted)
    return calls


@pytest.fixture(params=["fsspec-memory", "s3"])
def fsspec_store(request):
    if request.param == "s3":
        url, options = request.getfixturevalue("s3_bucket")
        return FsspecStore(url + "/batch", storage_options=options)
    return FsspecStore(f"memory://batch-{uuid.uuid4().hex}")


def test_fsspec_batched_calls_are_single_calls(fsspec_store, monkeypatch):
    fs = fsspec_store.fs
    pipes = _count_calls(monkeypatch, fs, "pipe")
    cats = _count_calls(monkeypatch, fs, "cat")
    ranges = _count_calls(monkeypatch, fs, "cat_ranges")
    cat_files = _count_calls(monkeypatch, fs, "cat_file")
    keys = [f"c/{i}" for i in range(30)]
    fsspec_store.set_many({k: k.encode() for k in keys})
    assert len(pipes) == 1
    values = fsspec_store.get_many(keys + ["missing/1", "missing/2"])
    assert values == [k.encode() for k in keys] + [None, None]
    assert len(cats) == 1 and len(cats[0][0]) == 32
    parts = fsspec_store.get_ranges([(k, (0, 2)) for k in keys])
    assert parts == [b"c/"] * 30 and len(ranges) == 1
    if fsspec_store.url.startswith("s3://"):
        assert cat_files == []  # the sync per-key path is never taken


def test_fsspec_pickles_as_url_and_options(fsspec_store):
    fsspec_store.set("k", b"v")
    fn, args = fsspec_store.__reduce__()
    assert args[0] == fsspec_store.url and args[1] == fsspec_store.storage_options
    clone = pickle.loads(pickle.dumps(fsspec_store))
    assert clone._fs is None  # re-opens lazily
    assert clone.get("k") == b"v"


def test_fsspec_from_filesystem(fsspec_store):
    fsspec_store.set("x/y", b"1")
    wrapped = FsspecStore.from_filesystem(fsspec_store.fs, fsspec_store.root)
    assert wrapped.get("x/y") == b"1" and wrapped.fs is fsspec_store.fs
    assert pickle.loads(pickle.dumps(wrapped)).get("x/y") == b"1"


def test_fsspec_file_url_writes_atomically(tmp_path):
    st = FsspecStore(f"file://{tmp_path}/f.zarr")
    st.set_many({"a/b": b"1", "a/c": b"2"})
    st.set("a/b", b"3")
    assert st.get("a/b") == b"3" and sorted(st.list()) == ["a/b", "a/c"]
    assert sorted(os.listdir(tmp_path / "f.zarr" / "a")) == ["b", "c"]
    assert LocalStore(tmp_path / "f.zarr").get("a/c") == b"2"
    with pytest.raises(ValueError, match="URL"):
        FsspecStore(str(tmp_path))
