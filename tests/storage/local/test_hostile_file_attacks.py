"""Red team: hostile stores on every read path. FIFOs and directories where chunk files
should be, sparse (apparent-size) chunk files, bombs inside shards, lying shard indexes,
a v2 ``.zarray`` claiming a huge chunk. Each case runs in a new process (from the suite's
fork server) with a CPU-time limit and (where memory is the point) an address-space cap, and must end in a
clear chunkstore error naming the key (or a correct answer), never a hang or a
MemoryError. A hang is an event, not a wall-clock limit (which a loaded machine reaches
by itself): a thread of the child waiting in the kernel for a FIFO's writer, or the
child's CPU time running out (``RLIMIT_CPU``)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import numcodecs
import numpy as np
import pytest

import chunkstore as cs
from chunkstore.api.verify import verify
from chunkstore.codecs import build_pipeline
from chunkstore.errors import ChunkDecodeError
from tests.multiproc import context
from tests.read_backoff import without_read_backoff
from tests.storage.local import hostile_child

MiB = 2**20


#: CPU seconds the operation may use (each case needs well under one)
CPU_SECONDS = 20


def waiting_for_a_fifo_writer(pid: int) -> bool:
    """Whether a thread of ``pid`` sleeps in the kernel's FIFO open (``wait_for_partner``:
    an open without O_NONBLOCK that returns only once a writer opens the FIFO)."""
    for wchan in Path(f"/proc/{pid}/task").glob("*/wchan"):
        try:
            if wchan.read_text() == "wait_for_partner":
                return True
        except OSError:  # the thread ended
            pass
    return False


def child(root: str, op: str, cap: int = 0) -> dict:
    """``op`` on the array at ``root`` in a new process (``hostile_child.run``; ``cap``: its
    address-space limit on top of what it holds after opening the array): ``{"ok" |
    "error" | "raw": ...}``, or ``{"hang": ...}`` when the process blocks opening a FIFO or
    uses up its CPU time."""
    ctx = context()
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=hostile_child.run, args=(root, op, cap, CPU_SECONDS, send))
    proc.start()
    send.close()
    try:
        while not receive.poll(0.05):  # the answer, the process's end, or that it hangs
            if waiting_for_a_fifo_writer(proc.pid):
                return {"hang": f"{op} blocked opening a FIFO"}
            if not proc.is_alive():
                break
        try:
            out = receive.recv()
        except EOFError:  # it ended without an answer
            out = None
    finally:
        proc.kill()
        proc.join()
    if proc.exitcode == -signal.SIGXCPU:
        return {"hang": f"{op} used more than {CPU_SECONDS} s of CPU"}
    assert out is not None, f"{op}: the process ended with status {proc.exitcode}"
    return out


# -- 7a. a chunk file that is a FIFO: must not hang ---------------------------------------------
FIFO_OPS = ["a[:]", "a.__setitem__(1, 9)", "verify(a.store).bad", "a.read_chunk((0,))",
            "cs.dask.from_store(a).compute()", "a.store.exists('c/0')", "a.nchunks_initialized"]


@pytest.mark.parametrize("op", FIFO_OPS)
@pytest.mark.parametrize("sharded", [False, True], ids=["plain", "sharded"])
def test_chunk_file_that_is_a_fifo_does_not_hang(tmp_path, sharded, op):
    """Observed: ``a[:]``, ``a[1] = 9``, ``verify`` ... block forever in ``open()`` of
    the FIFO (LocalStore opens keys with O_RDONLY and no O_NONBLOCK, and checks S_ISREG
    only after the open returns)."""
    root = str(tmp_path / "f.zarr")
    a = cs.create_array(root, shape=(8,), chunks=(2,), shards=(4,) if sharded else None,
                        dtype="i4")
    a[:] = 5
    path = os.path.join(root, "c", "0")
    os.unlink(path)
    os.mkfifo(path)
    out = child(root, op)
    assert "hang" not in out, out["hang"]
    assert "raw" not in out, out["raw"]


# -- 7b. a chunk key that is a directory -----------------------------------------------------------
def test_chunk_key_that_is_a_directory(tmp_path):
    """Reading treats it as missing (fill); writing must fail with a chunkstore error naming
    the key, and leave no temporary file.

    Observed: a raw IsADirectoryError naming the temporary file
    ('.chunkstore-tmp-...' -> '0'), not the key."""
    root = str(tmp_path / "d.zarr")
    a = cs.create_array(root, shape=(8,), chunks=(4,), dtype="i4")
    a[:] = 5
    os.unlink(os.path.join(root, "c", "0"))
    os.mkdir(os.path.join(root, "c", "0"))
    np.testing.assert_array_equal(a[:], [0, 0, 0, 0, 5, 5, 5, 5])
    for value in (9, np.arange(4)):
        with pytest.raises(cs.errors.ChunkstoreError, match="c/0"):
            a[0:4] = value if np.ndim(value) else value
        with pytest.raises(cs.errors.ChunkstoreError, match="c/0"):
            a[1] = 9
    assert [n for n in os.listdir(os.path.join(root, "c")) if n.startswith(".chunkstore-tmp")] \
        == []


# -- 7c. a sparse chunk file: a few bytes on disk, gigabytes of apparent size -------------------
SPARSE = 1 << 30


@pytest.mark.parametrize("op", ["a.__setitem__(5, 7)", "a.read_chunk((0,))"])
@pytest.mark.parametrize("layout", ["plain", "raw", "v2-zlib", "sharded"])
def test_sparse_chunk_file_costs_bounded_memory(tmp_path, layout, op):
    """A chunk file truncated up to 1 GiB (sparse: nothing on disk). The declared chunk
    is 1 KiB; decoding it must be refused before its bytes are read (the engines pass
    the chunk's or shard's largest legitimate encoding to the store as ``max_bytes``).

    Was observed: MemoryError under a 256 MiB address-space cap (the partial write's
    versioned read and ``read_chunk`` read the whole file: ``read_all`` / ``read_exact``
    of ``st_size`` bytes) -- without a cap, +1 GiB of RSS per chunk."""
    root = str(tmp_path / "sp.zarr")
    kw = {"plain": {}, "raw": {"compressors": None},
          "v2-zlib": {"zarr_format": 2, "compressors": numcodecs.Zlib(1)},
          "sharded": {"shards": (512,)}}[layout]
    a = cs.create_array(root, shape=(512,), chunks=(256,), dtype="i4", **kw)
    a[:] = np.arange(512, dtype="i4")
    path = os.path.join(root, a.chunk_key((0,)))
    with open(path, "r+b") as f:
        f.truncate(SPARSE)
    out = child(root, op, cap=256 * MiB)
    assert "raw" not in out and "hang" not in out, out
    assert "error" in out and a.chunk_key((0,)) in out["error"], out


# -- 7d. a bomb inside an inner chunk of a shard --------------------------------------------------
def _shard_with_inner(a, local: int, payload: bytes) -> bytes:
    codec = build_pipeline(a.metadata).array_bytes
    key = a.chunk_key((0,))
    shard = bytes(a.store.get(key))
    index = codec.parse(shard)
    parts = {i: bytes(codec.inner_bytes(shard, index, i)) for i in range(len(index))
             if codec.inner_bytes(shard, index, i) is not None}
    parts[local] = payload
    return codec.build(parts)[0]


@pytest.mark.parametrize("op", ["a[:]", "a.__setitem__(1, 7)", "verify(a.store).bad",
                                "cs.dask.from_store(a).compute()", "a.read_chunk((0,))"])
def test_bomb_in_an_inner_chunk_of_a_shard(tmp_path, op):
    root = str(tmp_path / "sb.zarr")
    a = cs.create_array(root, shape=(1024,), chunks=(256,), shards=(1024,), dtype="i4",
                        compressors=[cs.codecs.ZstdCodec(1)])
    a[:] = np.arange(1024, dtype="i4")
    bomb = bytes(numcodecs.Zstd(level=3).encode(np.zeros(256 * MiB, "u1")))
    a.store.set(a.chunk_key((0,)), _shard_with_inner(a, 0, bomb))
    out = child(root, op, cap=128 * MiB)
    assert "raw" not in out and "hang" not in out, out
    if op.startswith("verify"):
        assert "c/0" in out["ok"], out
    else:
        assert "error" in out and "c/0" in out["error"], out


# -- 7e. lying shard indexes on the read path --------------------------------------------------------
def _sharded_raw(tmp_path):
    a = cs.create_array(str(tmp_path / "ix.zarr"), shape=(16,), chunks=(4,), shards=(16,),
                        dtype="i4", compressors=None)
    a[:] = np.arange(16, dtype="i4")
    return a, build_pipeline(a.metadata).array_bytes, a.chunk_key((0,))


def _set_entry(codec, shard, i, offset, nbytes):
    index = codec.parse(shard).copy()
    index[i] = (offset, nbytes)
    encoded = bytes(codec.index.encode(index.reshape(*codec.chunks_per_shard, 2)))
    return shard[:-len(encoded)] + encoded


@pytest.mark.parametrize("entry", [(2**64 - 2, 4), (4, 2**64 - 2), (2**63, 2**63 + 8),
                                   (1 << 40, 16)])
def test_shard_index_outside_on_every_read_path(tmp_path, monkeypatch, entry):
    without_read_backoff(monkeypatch)  # (1 << 40, 16) reads like a shard being replaced
    a, codec, key = _sharded_raw(tmp_path)
    hostile = _set_entry(codec, bytes(a.store.get(key)), 1, *entry)
    a.store.set(key, hostile)
    b = cs.open_array(str(tmp_path / "ix.zarr"), mode="r+")
    for call in (lambda: b[4:8], lambda: b.read_chunk((1,)),
                 lambda: cs.dask.from_store(b).compute(), lambda: b.__setitem__(5, 1)):
        with pytest.raises(ChunkDecodeError, match=key):
            call()
    assert bytes(a.store.get(key)) == hostile
    assert key in verify(a.store).bad


def test_shard_index_overlapping_entries(tmp_path):
    """Two entries naming the same bytes: both inner chunks read those bytes (a lying
    but harmless index); a partial write elsewhere keeps both as read."""
    a, codec, key = _sharded_raw(tmp_path)
    shard = bytes(a.store.get(key))
    index = codec.parse(shard)
    hostile = _set_entry(codec, shard, 1, int(index[0, 0]), int(index[0, 1]))
    a.store.set(key, hostile)
    b = cs.open_array(str(tmp_path / "ix.zarr"), mode="r+")
    np.testing.assert_array_equal(b[:8], [0, 1, 2, 3, 0, 1, 2, 3])
    b[9] = 99
    expected = np.arange(16)
    expected[4:8] = [0, 1, 2, 3]
    expected[9] = 99
    np.testing.assert_array_equal(b[:], expected)


# -- 7f. a v2 .zarray claiming a huge chunk -------------------------------------------------------------
def test_v2_zarray_claiming_a_huge_chunk(tmp_path):
    """``shape [10]``, ``chunks [2**40]``. Reads of a missing chunk are fine; a partial
    write of the missing chunk must fail with a chunkstore error naming the array/field,
    not allocate the declared 4 TiB.

    Observed: raw ``MemoryError: Unable to allocate 4.00 TiB``."""
    root = tmp_path / "h.zarr"
    root.mkdir()
    (root / ".zarray").write_text(json.dumps({
        "zarr_format": 2, "shape": [10], "chunks": [2**40], "dtype": "<i4",
        "compressor": None, "fill_value": 0, "order": "C", "filters": None}))
    # the 4 GiB address-space cap on top of what the process holds (hostile_child): a write
    # allocating the declared 4 TiB chunk fails as MemoryError ("raw"), not a clear error
    assert child(str(root), "a[:].tolist()", cap=4 << 30) == {"ok": repr([0] * 10)}
    out = child(str(root), "(a.__setitem__(0, 1), a[:].tolist())[1]", cap=4 << 30)
    assert "error" in out or out == {"ok": repr([1] + [0] * 9)}, out
