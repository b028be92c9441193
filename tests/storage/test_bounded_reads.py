"""Bounded reads: a stored object larger than any encoding of its chunk (or shard) is
refused by the store before it is read, and a raw chunk of the wrong size read by byte
ranges is an error, on every store (local, memory, zip, fsspec ``memory://``).

Stores: ``max_bytes`` on get / get_many / get_views / get_versioned_many and
``object_size`` on get_ranges (ObjectSizeError naming the key). Engines: the bound of
the array's codecs is passed on every whole read (ChunkDecodeError naming array and
key); valid data still reads its exact values. Memory is measured in a child process
under an address-space cap (the chunk files are sparse: gigabytes of apparent size).
S3 (fsspec and obstore): ``test_bounded_reads_s3.py``.
"""

from __future__ import annotations

import json
import os
import textwrap
import uuid
import zipfile

import numcodecs
import numpy as np
import pytest

import chunkstore as cs
from chunkstore.codecs import build_pipeline
from chunkstore.codecs.bounded import shard_bound
from chunkstore.codecs.limits import compressed_bound
from chunkstore.errors import ChunkDecodeError
from chunkstore.storage.bounds import ObjectSizeError
from chunkstore.storage.zip.store import ZipStore
from tests.code_child import run_code

MiB = 2**20


def _stores(tmp_path):
    return {
        "local": cs.LocalStore(str(tmp_path / "l")),
        "memory": cs.MemoryStore(),
        "zip": ZipStore(str(tmp_path / "z.zip"), mode="a"),
        "fsspec-memory": cs.FsspecStore(f"memory://bounded-{uuid.uuid4().hex[:10]}"),
    }


STORE_KINDS = ["local", "memory", "zip", "fsspec-memory"]


# -- the stores ------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", STORE_KINDS)
def test_store_whole_reads_refuse_values_over_max_bytes(tmp_path, kind):
    store = _stores(tmp_path)[kind]
    store.set("a/small", b"x" * 100)
    store.set("a/big", b"y" * 5000)
    assert store.get("a/small", max_bytes=100) == b"x" * 100
    assert store.get_many(["a/small", "a/none"], max_bytes=100) == [b"x" * 100, None]
    assert [bytes(v) if v is not None else None
            for v in store.get_views(["a/small", "a/none"], max_bytes=100)] == [b"x" * 100, None]
    (value, _), (missing, _) = store.get_versioned_many(["a/small", "a/none"], max_bytes=100)
    assert (value, missing) == (b"x" * 100, None)
    calls = [lambda: store.get("a/big", max_bytes=100),
             lambda: store.get_many(["a/small", "a/big"], max_bytes=100),
             lambda: store.get_views(["a/big"], max_bytes=100),
             lambda: store.get_versioned_many(["a/big"], max_bytes=100)]
    for call in calls:
        with pytest.raises(ObjectSizeError, match="'a/big'") as info:
            call()
        assert isinstance(info.value, ChunkDecodeError)
        assert info.value.key == "a/big"
    # without a bound, nothing changes
    assert store.get_many(["a/big"]) == [b"y" * 5000]
    assert store.get("a/big", (10, 20)) == b"y" * 10
    if kind == "zip":
        store.close()


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_store_ranged_reads_check_object_size(tmp_path, kind):
    store = _stores(tmp_path)[kind]
    store.set("k/good", bytes(range(256)) * 16)  # 4096 bytes
    store.set("k/long", bytes(8192))
    store.set("k/short", bytes(2000))
    got = store.get_ranges([("k/good", (0, 4)), ("k/good", (4092, 4096)), ("k/none", (0, 4))],
                           object_size=4096)
    assert got == [bytes([0, 1, 2, 3]), bytes([252, 253, 254, 255]), None]
    for key, size in (("k/long", 8192), ("k/short", 2000)):
        for rng in ((0, 4), (3000, 3100)):
            with pytest.raises(ObjectSizeError, match=f"'{key}'.*{size} bytes, expected 4096"):
                store.get_ranges([("k/good", (0, 4)), (key, rng)], object_size=4096)
    assert store.get_ranges([("k/long", (0, 2))]) == [b"\0\0"]  # unchecked without it
    if kind == "zip":
        store.close()


def test_fsspec_bounded_read_fetches_at_most_one_byte_more(tmp_path):
    store = cs.FsspecStore(f"memory://bounded-{uuid.uuid4().hex[:10]}")
    store.set("big", b"z" * MiB)
    asked = []
    fs = store.fs
    original = fs.cat_ranges

    def spy(paths, starts, ends, **kw):
        asked.extend(zip(starts, ends, strict=True))
        return original(paths, starts, ends, **kw)

    fs.cat_ranges = spy
    try:
        with pytest.raises(ObjectSizeError, match="'big' .* at least 1001 bytes"):
            store.get_many(["big"], max_bytes=1000)
    finally:
        del fs.cat_ranges
    assert asked == [(0, 1001)]


def test_store_subclass_without_max_bytes_is_checked_after():
    """A subclass written before bounded reads (``get_many(keys)``) still works: the
    engine checks the sizes after the read, before decoding."""
    class Old(cs.MemoryStore):
        def get_many(self, keys):
            return [cs.MemoryStore.get(self, k) for k in keys]

        def get_versioned_many(self, keys):
            return cs.MemoryStore.get_versioned_many(self, keys)

    store = Old()
    a = cs.create_array(store, shape=(8,), chunks=(4,), dtype="i4", cache=0)
    a[:] = np.arange(8)
    np.testing.assert_array_equal(a[:], np.arange(8))
    a[1] = 9
    np.testing.assert_array_equal(a[:4], [0, 9, 2, 3])
    store._data["c/0"] = bytes(compressed_bound(16) + 1)
    for op in (lambda: a.read_chunk((0,)), lambda: a.__setitem__(1, 7)):
        with pytest.raises(ChunkDecodeError, match="c/0"):
            op()


# -- the bounds ------------------------------------------------------------------------------
def test_stored_bounds_of_codec_chains():
    def pipeline(**kw):
        a = cs.create_array(None, **{"shape": (512,), "chunks": (256,), "dtype": "i4", **kw})
        return build_pipeline(a.metadata)

    assert pipeline(compressors=None).stored_bound == 1024
    assert pipeline(zarr_format=2, compressors=None).stored_bound == 1024
    assert pipeline().stored_bound == compressed_bound(1024)
    assert pipeline(zarr_format=2, compressors=numcodecs.Zlib(1)).stored_bound == \
        compressed_bound(1024)
    crc = pipeline(compressors=[cs.codecs.ZstdCodec(1), cs.codecs.Crc32cCodec()])
    assert crc.stored_bound == compressed_bound(1024) + 4
    assert pipeline(dtype=str).stored_bound is None  # variable-length: no bound
    sharded = pipeline(shards=(512,), compressors=None).array_bytes
    assert shard_bound(sharded) == sharded.index_nbytes + 2 * 1024


# -- the engines, every store ----------------------------------------------------------------
LAYOUTS = {"plain": {}, "raw": {"compressors": None},
           "v2-zlib": {"zarr_format": 2, "compressors": numcodecs.Zlib(1)},
           "sharded": {"shards": (512,)}}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("kind", STORE_KINDS)
def test_oversized_chunk_is_chunk_decode_error_naming_it(tmp_path, kind, layout):
    store = _stores(tmp_path)[kind]
    a = cs.create_array(store, shape=(512,), chunks=(256,), dtype="i4", cache=0,
                        **LAYOUTS[layout])
    a[:] = np.arange(512, dtype="i4")
    np.testing.assert_array_equal(a[:], np.arange(512))
    a[5] = 7  # a read-modify-write of a valid chunk (or shard)
    want = np.arange(512, dtype="i4")
    want[5] = 7
    np.testing.assert_array_equal(a[:], want)
    np.testing.assert_array_equal(a.read_chunk((1,)), want[256:])
    key = a.chunk_key((0,))
    bound = a._engine.io_of().max_shard if layout == "sharded" else a._engine.io_of().max_stored
    store.set(key, bytes(bound + 1))
    ops = [lambda: a.__setitem__(5, 9), lambda: a.read_chunk((0,))]
    if layout != "sharded":  # (a shard's index is read by range, and fails its checksum)
        ops.append(lambda: a[:])
    for op in ops:
        with pytest.raises(ChunkDecodeError, match=key) as info:
            op()
        if layout != "sharded" or op is ops[0]:
            assert f"more than the {bound}" in str(info.value)
    if kind == "zip":
        store.close()


@pytest.mark.parametrize("kind", ["zip", "fsspec-memory"])
@pytest.mark.parametrize("change", ["oversized", "truncated"])
def test_partial_read_of_wrong_size_raw_chunk(tmp_path, kind, change):
    """Stores read by byte ranges (no zero-copy views): the object's size is checked."""
    store = _stores(tmp_path)[kind]
    a = cs.create_array(store, shape=(1024,), chunks=(1024,), dtype="i4", compressors=None,
                        cache=0)
    a[:] = np.arange(1024)
    assert a[600:700].tolist() == list(range(600, 700))
    good = bytes(store.get("c/0"))
    store.set("c/0", good + bytes(4096) if change == "oversized" else good[:2000])
    for sel in (1, slice(0, 10), slice(600, 700), slice(None)):
        with pytest.raises(ChunkDecodeError, match="c/0"):
            a[sel]
    if kind == "zip":
        store.close()


def test_lying_shard_index_entry_is_refused_before_its_range_is_read(tmp_path):
    import google_crc32c

    store = cs.MemoryStore()
    a = cs.create_array(store, shape=(16,), chunks=(4,), shards=(16,), dtype="<i4",
                        compressors=None, cache=0)
    a[:] = np.arange(16)
    blob = bytearray(store.get("c/0"))
    n = 4 * 16 + 4
    index = np.frombuffer(bytes(blob[-n:-4]), "<u8").reshape(4, 2).copy()
    blob += bytes(1000)  # room for the lie (the entry must lie within the shard)
    index[1] = (0, 1000)
    raw = index.astype("<u8").tobytes()
    blob = bytes(blob[:-n - 1000]) + bytes(1000) + raw + \
        google_crc32c.value(raw).to_bytes(4, "little")
    store.set("c/0", blob)
    with pytest.raises(ChunkDecodeError, match=r"c/0 \(inner chunk \(1,\)\).*1000 bytes"):
        a[4:8]
    assert a[0:4].tolist() == [0, 1, 2, 3]


# -- memory: sparse objects under an address-space cap ----------------------------------------
# (in a process of its own, forked from the suite's fork server: tests/code_child.py)
CHILD = r"""
import json, resource, sys
import chunkstore as cs
from chunkstore.errors import ChunkstoreError
from chunkstore.storage.zip.store import ZipStore
where, ops, cap = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
store = ZipStore(where, mode="a") if where.endswith(".zip") else cs.LocalStore(where)
a = cs.open_array(store, mode="r+", cache=0)
with open("/proc/self/status") as f:
    vm = [int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize")][0]
resource.setrlimit(resource.RLIMIT_AS, (vm + cap, vm + cap))
out = {}
for op in ops:
    try:
        out[op] = {"ok": repr(eval(op))[:200]}
    except ChunkstoreError as e:
        out[op] = {"error": f"{type(e).__name__}: {e}"}
    except BaseException as e:
        out[op] = {"raw": f"{type(e).__name__}: {e}"[:300]}
print(json.dumps(out))
"""


def _child(where: str, ops: list[str], cap: int = 128 * MiB) -> dict:
    r = run_code(CHILD, where, json.dumps(ops), str(cap))  # from the suite's fork server
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


STORE_OPS = ["store.get({key!r}, max_bytes=2**20)", "store.get_many([{key!r}], max_bytes=2**20)",
             "store.get_views([{key!r}], max_bytes=2**20)",
             "store.get_versioned_many([{key!r}], max_bytes=2**20)"]
ARRAY_OPS = ["a[:]", "a.__setitem__(5, 7)", "a.read_chunk((0,))", "a[3]"]


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_sparse_local_chunk_costs_no_memory(tmp_path, layout):
    root = str(tmp_path / "sp.zarr")
    a = cs.create_array(root, shape=(512,), chunks=(256,), dtype="i4", **LAYOUTS[layout])
    a[:] = np.arange(512, dtype="i4")
    key = a.chunk_key((0,))
    with open(os.path.join(root, key), "r+b") as f:
        f.truncate(4 << 30)  # 4 GiB of apparent size, nothing on disk
    store_ops = [op.format(key=key) for op in STORE_OPS]
    ops = ARRAY_OPS + store_ops if layout != "sharded" else ARRAY_OPS[1:3] + store_ops
    out = _child(root, ops)
    for op in ops:
        assert "error" in out[op], (op, out[op])
        assert key in out[op]["error"], (op, out[op])
        prefix = "ObjectSizeError" if op.startswith("store.") else "ChunkDecodeError"
        assert out[op]["error"].startswith(prefix), (op, out[op])


def _zip_with_entry(path: str, key: str, data: bytes, compress: int, others: dict) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        for name, value in others.items():
            zf.writestr(name, value)
        zf.writestr(zipfile.ZipInfo(key), data, compress_type=compress)


@pytest.mark.parametrize("layout", ["plain", "raw", "v2-zlib"])
def test_zip_entry_declaring_a_huge_size_is_refused_unread(tmp_path, layout):
    """A deflated entry of zeros declaring 200 MiB (below ZipStore's 256 MiB
    ``max_entry_bytes``) where a 1 KiB chunk belongs: refused from its header."""
    path = str(tmp_path / "a.zip")
    with ZipStore(path, mode="w") as z:
        a = cs.create_array(z, shape=(512,), chunks=(256,), dtype="i4", **LAYOUTS[layout])
        a[:] = np.arange(512, dtype="i4")
        key = a.chunk_key((0,))
    with ZipStore(path) as z:
        others = {k: bytes(z.get(k)) for k in z.list() if k != key}
    _zip_with_entry(path, key, bytes(200 * MiB), zipfile.ZIP_DEFLATED, others)
    del a
    ops = ARRAY_OPS + [op.format(key=key) for op in STORE_OPS]
    out = _child(path, ops, cap=96 * MiB)
    for op in ops:
        assert "error" in out[op], (op, out[op])
        assert key in out[op]["error"] and "209715200 bytes" in out[op]["error"], (op, out[op])
    with ZipStore(path) as z:  # a valid chunk of the same archive still reads exactly
        b = cs.open_array(z, mode="r", cache=0)
        assert b[256:260].tolist() == [256, 257, 258, 259]


def test_child_measures_what_it_claims(tmp_path):
    """The cap is real: the same child reading the 200 MiB entry unbounded fails."""
    path = str(tmp_path / "c.zip")
    _zip_with_entry(path, "x", bytes(200 * MiB), zipfile.ZIP_DEFLATED,
                    {"zarr.json": json.dumps({"zarr_format": 3, "node_type": "group"})})
    code = textwrap.dedent("""
        import resource, sys
        from chunkstore.storage.zip.store import ZipStore
        z = ZipStore(sys.argv[1])
        with open("/proc/self/status") as f:
            vm = [int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize")][0]
        resource.setrlimit(resource.RLIMIT_AS, (vm + 96 * 2**20, vm + 96 * 2**20))
        try:
            z.get("x")
            print("read")
        except MemoryError:
            print("MemoryError")
    """)
    r = run_code(code, path)
    assert r.stdout.strip() == "MemoryError", (r.stdout, r.stderr[-1000:])
