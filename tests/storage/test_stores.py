"""One contract suite that every Store runs, then store-specific tests.

The same assertions run on MemoryStore, LocalStore, ZipStore, FsspecStore on
``memory://`` and FsspecStore on a real S3 HTTP endpoint (moto's server mode).
"""

from __future__ import annotations

import os
import pickle
import threading
import uuid
import zipfile

import numpy as np
import pytest

from chunkstore.errors import InvalidKeyError, ReadOnlyError
from chunkstore.storage import FsspecStore, LocalStore, MemoryStore, Store, ZipStore

KINDS = ["memory", "local", "zip", "fsspec-memory", "s3"]


@pytest.fixture(params=KINDS)
def kind(request):
    return request.param


@pytest.fixture
def make_store(kind, tmp_path, request):
    """A factory of fresh, empty stores of one kind (all on the same location)."""
    made: list[Store] = []
    if kind == "s3":
        url, options = request.getfixturevalue("s3_bucket")
        url += "/root.zarr"
    elif kind == "fsspec-memory":
        url, options = f"memory://contract-{uuid.uuid4().hex}", None
    data: dict = {}

    def factory() -> Store:
        if kind == "memory":
            st = MemoryStore(data)
        elif kind == "local":
            st = LocalStore(tmp_path / "root.zarr")
        elif kind == "zip":
            st = ZipStore(tmp_path / "root.zip", mode="a")
        else:
            st = FsspecStore(url, storage_options=options)
        made.append(st)
        return st

    yield factory
    for st in made:
        st.close()


@pytest.fixture
def store(make_store):
    return make_store()


def fill(store: Store) -> dict[str, bytes]:
    items = {"zarr.json": b"{}", "a/zarr.json": b'{"x": 1}', "a/c/0/0": bytes(range(10)),
             "a/c/0/1": b"second", "a/cc": b"sibling", "b/deep/er/key": b"deep"}
    store.set_many(items)
    return items


# -- the contract -------------------------------------------------------------------------
def test_set_get_exists_getsize_delete(store):
    assert store.get("k/v") is None
    assert not store.exists("k/v")
    assert store.getsize("k/v") is None
    store.set("k/v", b"hello")
    assert store.get("k/v") == b"hello"
    assert store.exists("k/v") and store.getsize("k/v") == 5
    assert not store.exists("k")  # a "directory" is not a key
    store.set("k/v", b"replaced, longer")
    assert store.get("k/v") == b"replaced, longer"
    store.delete("k/v")
    assert store.get("k/v") is None and not store.exists("k/v")
    store.delete("k/v")  # missing: not an error


def test_values_accept_buffers(store):
    arr = np.arange(6, dtype="<u2")
    store.set("np", arr)
    store.set("mv", memoryview(b"abc"))
    store.set("ba", bytearray(b"xyz"))
    assert store.get("np") == arr.tobytes()
    assert store.get("mv") == b"abc" and store.get("ba") == b"xyz"
    assert isinstance(store.get("np"), bytes)


def test_empty_value(store):
    store.set("empty", b"")
    assert store.get("empty") == b"" and store.exists("empty")
    assert store.get("empty", (0, None)) == b"" and store.get("empty", (-4, None)) == b""
    assert store.get_ranges([("empty", (0, 10))]) == [b""]
    assert store.getsize("empty") == 0


def test_listing(store):
    items = fill(store)
    assert sorted(store.list()) == sorted(items)
    assert sorted(store.list_prefix("a/")) == ["a/c/0/0", "a/c/0/1", "a/cc", "a/zarr.json"]
    assert sorted(store.list_prefix("a/c")) == ["a/c/0/0", "a/c/0/1", "a/cc"]
    assert sorted(store.list_prefix("a/c/")) == ["a/c/0/0", "a/c/0/1"]
    assert list(store.list_prefix("nope/")) == []
    assert sorted(store.list_dir("")) == ["a", "b", "zarr.json"]
    assert sorted(store.list_dir("a")) == ["c", "cc", "zarr.json"]
    assert sorted(store.list_dir("a/")) == ["c", "cc", "zarr.json"]
    assert sorted(store.list_dir("b/deep")) == ["er"]
    assert list(store.list_dir("missing")) == []


def test_byte_ranges(store):
    value = bytes(range(10))
    store.set("r", value)
    assert store.get("r", (0, 3)) == value[:3]
    assert store.get("r", (2, None)) == value[2:]
    assert store.get("r", (4, 7)) == value[4:7]
    assert store.get("r", (-3, None)) == value[-3:]          # suffix range
    assert store.get("r", (-100, None)) == value             # suffix longer than value
    assert store.get("r", (5, 5)) == b""
    assert store.get("r", (8, 100)) == value[8:]            # stop past the end
    assert store.get("r", (20, None)) == b""                 # start past the end
    assert store.get("missing", (0, 3)) is None


def test_get_ranges_batch(store):
    store.set_many({"x": b"0123456789", "y": b"abcdef"})
    out = store.get_ranges([("x", (1, 3)), ("missing", (0, 2)), ("y", None), ("x", (-2, None)),
                            ("y", (2, 4))])
    assert out == [b"12", None, b"abcdef", b"89", b"cd"]


def test_get_many_with_missing_keys(store):
    items = fill(store)
    keys = ["a/c/0/1", "nope", "zarr.json", "a/c/9/9", "a/c/0/1"]
    assert store.get_many(keys) == [items["a/c/0/1"], None, b"{}", None, items["a/c/0/1"]]
    assert store.get_many([]) == []
    assert store.get_many(["only/missing"]) == [None]


def test_keys_with_glob_characters_are_literal(store):
    store.set_many({"g/x[1]": b"bracket", "g/x1": b"plain", "g/star*?": b"star"})
    assert store.get_many(["g/x[1]", "g/star*?", "g/x*"]) == [b"bracket", b"star", None]
    assert sorted(store.list_dir("g")) == ["star*?", "x1", "x[1]"]


def test_set_many_mapping_and_pairs(store):
    store.set_many({"m/1": b"one", "m/2": b"two"})
    store.set_many([("p/1", b"uno"), ("m/1", b"ONE")])
    assert store.get_many(["m/1", "m/2", "p/1"]) == [b"ONE", b"two", b"uno"]


def test_delete_many_and_prefix(store):
    fill(store)
    store.set("ab/x", b"not under a/")
    store.delete_many(["zarr.json", "not-there"])
    assert store.get("zarr.json") is None
    store.delete_prefix("a")
    assert sorted(store.list()) == ["ab/x", "b/deep/er/key"]
    assert list(store.list_dir("a")) == []
    store.delete_prefix("")
    assert list(store.list()) == []


def test_read_only_refuses_writes(store):
    fill(store)
    ro = store.with_read_only()
    assert ro.read_only and not store.read_only
    assert ro.get("a/cc") == b"sibling"
    for call in (lambda: ro.set("a/cc", b"x"), lambda: ro.delete("a/cc"),
                 lambda: ro.set_many({"n": b"1"}), lambda: ro.delete_prefix("a"),
                 lambda: ro.delete_many(["a/cc"])):
        with pytest.raises(ReadOnlyError):
            call()
    assert store.get("a/cc") == b"sibling" and store.get("n") is None


BAD_KEYS = ["", "/abs/key", "a/../b", "..", "../escape", "a\\b", "a//b", "./a", "a/", "C:/x",
            "nul\x00byte"]


@pytest.mark.parametrize("bad", BAD_KEYS)
def test_invalid_keys_are_refused_and_named(store, bad):
    with pytest.raises(InvalidKeyError) as info:
        store.set(bad, b"x")
    if bad:
        assert repr(bad) in str(info.value)
    with pytest.raises(InvalidKeyError):
        store.get(bad)
    assert list(store.list()) == []


def test_pickle_round_trip(store):
    items = fill(store)
    store.close()  # a ZipStore commits its session here; others just drop resources
    clone = pickle.loads(pickle.dumps(store))
    assert type(clone) is type(store) and clone.read_only == store.read_only
    assert clone.get_many(sorted(items)) == [items[k] for k in sorted(items)]
    ro = pickle.loads(pickle.dumps(store.with_read_only()))
    assert ro.read_only and ro.get("a/cc") == b"sibling"


def test_reopen_sees_data(make_store):
    first = make_store()
    items = fill(first)
    first.close()
    second = make_store()
    assert sorted(second.list()) == sorted(items)


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
