"""Stores as zarr-python 3.4 users hand them over (issue 32): ``ZipStore`` over an open
binary file object, ``FsspecStore.from_url``, and zarr-python's own store objects
(LocalStore, MemoryStore, FsspecStore, ZipStore) wherever chunkstore takes a store."""

from __future__ import annotations

import io
import threading
import zipfile

import fsspec
import numpy as np
import pytest
from numpy.testing import assert_array_equal

import chunkstore as cs
from chunkstore.storage import BadArchiveError, FsspecStore, ZipStore

try:
    import zarr
except ImportError:  # pragma: no cover - a test-only peer
    zarr = None
needs_zarr = pytest.mark.skipif(zarr is None, reason="zarr-python is not installed")


def _archive(entries: dict[str, bytes], compression: int = zipfile.ZIP_STORED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as zf:
        for name, value in entries.items():
            zf.writestr(name, value)
    return buf.getvalue()


# -- ZipStore over a file object -----------------------------------------------------------------
def test_zip_fileobj_reads_ranges_not_the_whole_archive():
    """An entry costs its own bytes: a ranged read of a stored entry reads that range."""
    raw = _archive({"big": bytes(range(256)) * 4096, "small": b"xyz"})

    class Counting(io.BytesIO):
        read_bytes = 0

        def read(self, n=-1):
            data = super().read(n)
            Counting.read_bytes += len(data)
            return data

    f = Counting(raw)
    store = ZipStore(f)
    assert store.get("small") == b"xyz"
    Counting.read_bytes = 0
    assert store.get("big", (1000, 1010)) == (bytes(range(256)) * 4096)[1000:1010]
    assert Counting.read_bytes == 30 + 10  # the entry's local header, then the range
    Counting.read_bytes = 0
    assert store.get("big", (5, 9)) == (bytes(range(256)) * 4096)[5:9]
    assert Counting.read_bytes == 4


def test_zip_fileobj_lying_entry_is_refused_within_its_declared_size():
    """A hostile archive in a file object gets the checks of one on disk: an entry that
    decompresses past its declared size is refused, not allocated."""
    raw = bytearray(_archive({"x": b"\0" * 100_000}, zipfile.ZIP_DEFLATED))
    # declare 10 bytes in the central directory (file size at offset 24 of its record)
    cd = raw.rindex(b"PK\x01\x02")
    raw[cd + 24:cd + 28] = (10).to_bytes(4, "little")
    with pytest.raises(BadArchiveError):
        ZipStore(io.BytesIO(bytes(raw))).get("x")


def test_zip_fileobj_threads_read_their_own_entries():
    """One file object, one position: concurrent reads of different entries must each get
    their own bytes (the seek and the read happen together)."""
    entries = {f"k{i}": bytes([i]) * (5000 + i) for i in range(32)}
    store = ZipStore(io.BytesIO(_archive(entries)))
    barrier = threading.Barrier(8)
    wrong: list[str] = []

    def work(t: int) -> None:
        barrier.wait()
        for _ in range(20):
            for i in range(t, 32, 8):
                if store.get(f"k{i}") != entries[f"k{i}"]:
                    wrong.append(f"k{i}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []


def test_zip_fileobj_append_rewrites_without_duplicates():
    buf = io.BytesIO()
    z = ZipStore(buf, mode="w")
    a = cs.create_array(z, shape=(6,), chunks=(3,), dtype="i2")
    a[:] = np.arange(6)
    z.close()
    z = ZipStore(buf, mode="a")
    cs.open_array(z)[0:3] = [7, 8, 9]  # replaces chunk c/0
    z.close()
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as zf:
        names = zf.namelist()
    assert sorted(names) == ["c/0", "c/1", "zarr.json"]  # no superseded entry left
    assert_array_equal(cs.open_array(ZipStore(io.BytesIO(buf.getvalue())))[:],
                       [7, 8, 9, 3, 4, 5])


def test_zip_fileobj_minimal_reader_with_odd_reads():
    """A reader that is no io object (obstore's): read returns another buffer type, and
    may return more than asked; ranges still hold exactly their bytes."""
    raw = _archive({"a": b"0123456789", "b": b"abc"})

    class Reader:
        def __init__(self) -> None:
            self._f = io.BytesIO(raw)

        def read(self, n=-1):
            data = self._f.read(n if n is None or n < 0 else n + 3)  # over-long
            return memoryview(bytearray(data))

        def seek(self, pos, whence=0):
            return self._f.seek(pos, whence)

        def tell(self):
            return self._f.tell()

    store = ZipStore(Reader())
    assert store.get("a", (2, 5)) == b"234"
    assert store.get_many(["b", "a", "nope"]) == [b"abc", b"0123456789", None]
    with pytest.raises(TypeError, match="write"):
        ZipStore(Reader(), mode="a")


def test_zip_obstore_reader(tmp_path):
    obstore = pytest.importorskip("obstore")
    from obstore.store import LocalStore as ObLocal

    (tmp_path / "o.zip").write_bytes(_archive({"zarr.json": json_doc(), "c/0": b"\x05\x00"}))
    store = ZipStore(obstore.open_reader(ObLocal(str(tmp_path)), "o.zip"))
    assert_array_equal(cs.open_array(store, mode="r")[:], [5])


def json_doc() -> bytes:
    a = cs.create_array(None, shape=(1,), dtype="<u2", compressors=None)
    return a.store.get("zarr.json")


def test_zip_fileobj_closed_first_is_an_error_not_a_silent_loss():
    f = io.BytesIO()
    z = ZipStore(f, mode="w")
    z.set("k", b"v")
    f.close()
    with pytest.raises(BadArchiveError, match="closed before the ZipStore"):
        z.close()


def test_zip_fileobj_write_only_stream_gets_one_archive(tmp_path):
    """A stream that cannot seek (a remote upload) takes the archive at close()."""
    fs = fsspec.filesystem("memory")
    with fs.open(f"/api32-{tmp_path.name}/out.zip", "wb") as f:
        z = ZipStore(f, mode="w")
        cs.array(np.arange(5, dtype="i8"), store=z, name="q", chunks=(2,))
        z.close()
    with fs.open(f"/api32-{tmp_path.name}/out.zip", "rb") as f:
        assert_array_equal(cs.open_array(ZipStore(f), path="q", mode="r")[:], np.arange(5))


@needs_zarr
def test_zip_fileobj_interop_with_zarr(tmp_path):
    from packaging.version import Version

    if Version(zarr.__version__) < Version("3.3"):
        pytest.skip(f"zarr-python {zarr.__version__} has no ZipStore over a file object (3.3+)")
    theirs = io.BytesIO()
    zs = zarr.storage.ZipStore(theirs, mode="w", read_only=False)
    zarr.create_array(zs, name="a", data=np.arange(7, dtype="u2"), chunks=(3,))
    zs.close()
    assert_array_equal(cs.open_array(ZipStore(io.BytesIO(theirs.getvalue())), path="a")[:],
                       np.arange(7))
    ours = io.BytesIO()
    z = ZipStore(ours, mode="w")
    cs.create_array(z, name="b", shape=(4,), chunks=(2,), dtype="f8")[:] = 0.5
    z.close()
    back = zarr.open_array(zarr.storage.ZipStore(io.BytesIO(ours.getvalue()), mode="r"),
                           path="b", mode="r")
    assert_array_equal(back[:], np.full(4, 0.5))


# -- FsspecStore.from_url ---------------------------------------------------------------------------
def test_fsspec_from_url(tmp_path):
    url = f"memory://api32-from-url-{tmp_path.name}/d.zarr"
    s = FsspecStore.from_url(url, storage_options={}, read_only=False)
    assert s == FsspecStore(url)
    cs.create_array(s, shape=(3,), dtype="i1")[:] = [1, 2, 3]
    ro = FsspecStore.from_url(url, read_only=True)
    assert ro.read_only
    assert_array_equal(cs.open_array(ro, mode="r")[:], [1, 2, 3])
    with pytest.raises(cs.ReadOnlyError):
        ro.set("x", b"1")


# -- zarr-python's store objects ------------------------------------------------------------------
def _zarr_stores(tmp_path):
    return {
        "local": zarr.storage.LocalStore(str(tmp_path / "loc")),
        "memory": zarr.storage.MemoryStore(),
        "fsspec-memory": zarr.storage.FsspecStore.from_url(f"memory://api32-{tmp_path.name}/x"),
        "fsspec-file": zarr.storage.FsspecStore.from_url(f"file://{tmp_path}/ff"),
    }


@needs_zarr
@pytest.mark.parametrize("kind", ["local", "memory", "fsspec-memory", "fsspec-file"])
def test_zarr_store_objects_are_taken_and_share_the_data(kind, tmp_path):
    store = _zarr_stores(tmp_path)[kind]
    a = cs.create_array(store, name="a", shape=(6,), chunks=(4,), dtype="i4")
    a[:] = np.arange(6)
    z = zarr.open_array(store, path="a")
    assert_array_equal(z[:], np.arange(6))  # zarr reads what chunkstore wrote
    z[1] = 100
    assert_array_equal(cs.open_array(store, path="a")[:], [0, 100, 2, 3, 4, 5])
    assert cs.open_array(store, path="a") == a  # one location, however often resolved
    ro = cs.open_array(store.with_read_only(True), path="a")
    assert ro.read_only
    with pytest.raises(cs.ReadOnlyError):
        ro[0] = 1


@needs_zarr
def test_zarr_zip_store_object(tmp_path):
    path = str(tmp_path / "z.zip")
    zs = zarr.storage.ZipStore(path, mode="w")
    zarr.create_array(zs, name="q", shape=(3,), dtype="i2")[:] = 5
    zs.close()
    ours = cs.open_array(zarr.storage.ZipStore(path, mode="r"), path="q")
    assert ours.read_only and isinstance(ours.store, ZipStore)
    assert_array_equal(ours[:], [5, 5, 5])


def test_objects_that_only_look_like_zarr_stores_are_refused(tmp_path):
    class Lookalike:
        root = str(tmp_path)
        read_only = False

    with pytest.raises(TypeError, match="zarr-python's"):
        cs.open_group(Lookalike())
