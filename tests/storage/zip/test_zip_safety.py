"""ZipStore: bad archives are one-line errors, entries are read with bounded memory, and a
path re-opened in the same process sees what its other stores wrote."""

from __future__ import annotations

import os
import struct
import tracemalloc
import zipfile

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import ChunkstoreError, ReadOnlyError
from chunkstore.storage import BadArchiveError, ZipStore
from chunkstore.storage.resolve import resolve_store


def test_capabilities_and_location(tmp_path):
    z = ZipStore(tmp_path / "a.zip", mode="w")
    assert not z.capabilities.conditional_writes and not z.capabilities.conditional_delete
    assert z.location() == ("zip", os.path.realpath(tmp_path / "a.zip"))
    z.close()


@pytest.mark.parametrize("payload", [b"not a zip at all", b""], ids=["garbage", "empty"])
def test_non_zip_is_one_line_error(tmp_path, payload):
    path = tmp_path / "bad.zip"
    path.write_bytes(payload)
    for mode in ("r", "a"):
        with pytest.raises(BadArchiveError, match="bad.zip: not a zip archive") as info:
            ZipStore(path, mode=mode)
        assert "\n" not in str(info.value) and isinstance(info.value, ChunkstoreError)
    with pytest.raises(BadArchiveError, match="not a zip archive"):
        cs.open(str(path), mode="r")


def test_truncated_zip_is_one_line_error(tmp_path):
    path = tmp_path / "t.zip"
    with ZipStore(path, mode="w") as z:
        z.set("zarr.json", b"{}" * 100)
    path.write_bytes(path.read_bytes()[:-30])  # the end-of-archive record is cut
    with pytest.raises(BadArchiveError, match="truncated"):
        ZipStore(path, mode="r")


def test_zip_url_errors_are_one_line(tmp_path):
    bad = tmp_path / "bad.zip"
    bad.write_bytes(b"garbage")
    with pytest.raises(BadArchiveError, match="not a zip archive"):
        resolve_store(f"zip::file://{bad}", mode="r").get("zarr.json")
    good = tmp_path / "good.zip"
    with ZipStore(good, mode="w") as z:
        z.set("k", b"v")
    st = resolve_store(f"zip::file://{good}", mode="a")
    assert st.read_only and st.get("k") == b"v"
    with pytest.raises(ReadOnlyError, match="read-only .*ZipStore"):
        st.set("k", b"w")


def test_reopening_a_path_in_the_same_process_sees_pending_writes(tmp_path):
    path = str(tmp_path / "x.zip")
    writer = cs.open(path, mode="w", shape=(4,), chunks=(2,), dtype="i4")
    writer[:] = 5
    assert not os.path.exists(path)  # nothing committed yet ...
    assert cs.open(path, mode="r")[:].tolist() == [5] * 4  # ... but visible here
    writer[:2] = 7
    reader = cs.open_array(path, mode="r")
    assert reader[:].tolist() == [7, 7, 5, 5]
    reader.store.close()  # any store of the archive commits it
    with zipfile.ZipFile(path) as zf:
        assert "zarr.json" in zf.namelist()
    writer[2:] = 1  # writing goes on in a new session on top of the commit
    writer.store.close()
    assert cs.open_array(path, mode="r")[:].tolist() == [7, 7, 1, 1]


def test_pending_session_counts_as_existing(tmp_path):
    path = tmp_path / "p.zip"
    z = ZipStore(path, mode="w")
    z.set("k", b"v")
    with pytest.raises(FileExistsError):
        ZipStore(path, mode="x")
    assert ZipStore(path, mode="r").get("k") == b"v"
    z.close()
    assert sorted(os.listdir(tmp_path)) == ["p.zip"]


def test_last_store_garbage_collected_commits(tmp_path):
    path = tmp_path / "g.zip"
    z = ZipStore(path, mode="w")
    z.set("k", b"v")
    del z
    import gc

    gc.collect()
    with zipfile.ZipFile(path) as zf:
        assert zf.read("k") == b"v"


def _bomb(path, size: int, declare: int | None = None) -> None:
    """A deflated entry of ``size`` zero bytes; ``declare`` forges its declared size."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("c/0", bytes(size))
    if declare is None:
        return
    raw = bytearray(path.read_bytes())
    for sig, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):  # local, central
        at = raw.index(sig)
        struct.pack_into("<L", raw, at + offset, declare)
    path.write_bytes(bytes(raw))


def test_entry_declaring_more_than_the_limit_is_refused_before_allocating(tmp_path):
    path = tmp_path / "bomb.zip"
    _bomb(path, 64 * 2**20)  # 64 MiB of zeros in ~64 KB
    assert path.stat().st_size < 2**20
    z = ZipStore(path, max_entry_bytes=2**20)
    tracemalloc.start()
    try:
        with pytest.raises(BadArchiveError, match="more than the limit"):
            z.get("c/0")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2**20
    assert ZipStore(path).get("c/0", (0, 4)) == bytes(4)  # within the default limit


def test_entry_larger_than_declared_is_refused_with_bounded_memory(tmp_path):
    path = tmp_path / "liar.zip"
    _bomb(path, 64 * 2**20, declare=1024)  # says 1 KiB, inflates to 64 MiB
    z = ZipStore(path)
    tracemalloc.start()
    try:
        with pytest.raises(BadArchiveError, match="more than the 1024 bytes"):
            z.get("c/0")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2**20


def test_corrupt_entry_is_refused(tmp_path):
    path = tmp_path / "crc.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("k", b"hello world")
    raw = path.read_bytes().replace(b"hello world", b"HELLO world")
    path.write_bytes(raw)
    with pytest.raises(BadArchiveError, match="'k'.*corrupt"):
        ZipStore(path).get("k")


@pytest.mark.parametrize("method", [zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
def test_compressed_entries_round_trip(tmp_path, method):
    value = np.arange(50_000, dtype="i4").tobytes()
    with ZipStore(tmp_path / "m.zip", mode="w", compression=method) as z:
        z.set("v", value)
    z = ZipStore(tmp_path / "m.zip")
    assert z.get("v") == value and z.get("v", (10, 20)) == value[10:20]
    assert z.get("v", (-3, None)) == value[-3:]


def test_symlinked_archive_is_updated_through_the_link(tmp_path):
    real = tmp_path / "real.zip"
    with ZipStore(real, mode="w") as z:
        z.set("a", b"1")
    os.symlink(real, tmp_path / "link.zip")
    with ZipStore(tmp_path / "link.zip", mode="a") as z:
        assert ZipStore(real, mode="r").location() == z.location()
        z.set("b", b"2")
        assert ZipStore(real, mode="r").get("b") == b"2"  # one session for both names
    assert os.path.islink(tmp_path / "link.zip")
    with zipfile.ZipFile(real) as zf:
        assert sorted(zf.namelist()) == ["a", "b"]
