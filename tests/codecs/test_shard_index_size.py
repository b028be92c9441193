"""Issue 30 item 10: a shard of 2**30 inner chunks has a 16 GiB index. Writing one
ended in a raw ``MemoryError`` (``Unable to allocate 16.0 GiB``). Now an index larger
than the memory the process can have (physical memory, or ``RLIMIT_AS``) is refused
before anything is allocated or read, and an allocation that fails all the same is
reported too: an ``OutOfMemoryError`` (a ChunkstoreError and a MemoryError) naming the
array (and shard) and the bytes the index needs. Creating such an array is refused
before its metadata is written; reading where no shard is stored still gives the fill.

Each case runs in a child process under an address-space limit: nothing large is ever
allocated (the shard on disk is a sparse file)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.codecs.base import ChunkSpec
from chunkstore.codecs.sharding import ShardingCodec
from chunkstore.errors import OutOfMemoryError

N_INNER = 2**30  # inner chunks per shard: 16 GiB of index
INDEX_NBYTES = 16 * N_INNER + 4  # with its crc32c

HEAD = """
import json, resource, sys
import numpy as np
import chunkstore as cs

def status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024

def limit(headroom):
    # warm the thread pool up first: its threads' stacks count too
    w = cs.create_array(None, shape=(64,), chunks=(4,), shards=(16,), dtype="f8")
    w[:] = 1
    cap = status("VmSize") + headroom
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

def attempt(f):
    try:
        return "ok " + json.dumps(f())
    except cs.errors.ChunkstoreError as e:
        return f"{type(e).__name__} {isinstance(e, MemoryError)} {e}"
    except MemoryError as e:
        return f"raw MemoryError {e}"
"""


def _run(body: str) -> list[str]:
    env = {**os.environ, "MALLOC_ARENA_MAX": "2", "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-c", HEAD + textwrap.dedent(body)],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.strip().splitlines()


def _big_array(root, shards: int, inner: int = 4) -> None:
    """The document of a sharded float64 array of one shard of ``shards // inner`` inner
    chunks, written by hand (creation on this machine might refuse it)."""
    root.mkdir()
    codec = ShardingCodec((inner,), [{"name": "bytes", "configuration": {"endian": "little"}}])
    (root / "zarr.json").write_text(json.dumps({
        "zarr_format": 3, "node_type": "array", "shape": [shards], "data_type": "float64",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [shards]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0, "codecs": [codec.to_json()], "attributes": {}}))


def test_index_size_is_worked_out_without_allocating():
    codec = ShardingCodec((4,)).resolve(ChunkSpec((4 * N_INNER,), np.dtype("f8")))
    assert codec.index_nbytes == INDEX_NBYTES


def test_creation_is_refused_before_the_metadata_is_written(tmp_path):
    root = tmp_path / "c.zarr"
    out = _run(f"""
        limit(1 << 30)
        print(attempt(lambda: cs.create_array({str(root)!r}, shape=(4 * {N_INNER},),
                                              chunks=(4,), shards=(4 * {N_INNER},),
                                              dtype="f8") and None))
    """)
    assert out[-1].startswith("OutOfMemoryError True ")
    assert "c.zarr" in out[-1] and f"shards=[{4 * N_INNER}]" in out[-1]
    assert f"the shard index of {N_INNER} inner chunks needs {INDEX_NBYTES} bytes" in out[-1]
    assert not root.exists() or not any(root.iterdir())


def test_write_and_read_refused_naming_the_array_and_shard(tmp_path):
    root = tmp_path / "big.zarr"
    _big_array(root, 4 * N_INNER)
    out = _run(f"""
        limit(1 << 30)
        a = cs.open_array({str(root)!r}, mode="r+")
        print(attempt(lambda: a[:8].tolist()))  # no shard stored: the fill, no index read
        print(attempt(lambda: a.__setitem__(slice(0, 8), 1.5)))
        # a stored shard (a sparse file: nothing on disk) cannot be read here either
        import os
        os.makedirs({str(root / "c")!r})
        with open({str(root / "c" / "0")!r}, "wb") as f:
            f.truncate({INDEX_NBYTES} + 64)
        print(attempt(lambda: a[:8].tolist()))
    """)
    assert out[0] == "ok " + json.dumps([0.0] * 8)
    for line in (out[1], out[2]):
        assert line.startswith("OutOfMemoryError True "), line
        assert "big.zarr" in line, line
        assert "shard 'c/0'" in line, line
        assert f"needs {INDEX_NBYTES} bytes" in line, line
    assert sorted(os.listdir(root)) == ["c", "zarr.json"]


def test_an_allocation_that_fails_all_the_same_is_reported(tmp_path):
    """An index of 256 MiB passes the check against a limit of the process's size +
    384 MiB, but the write needs it several times over (decoded, encoded, joined)."""
    n_inner = 2**24
    root = tmp_path / "mid.zarr"
    _big_array(root, 4 * n_inner)
    out = _run(f"""
        a = cs.open_array({str(root)!r}, mode="r+")
        limit(384 << 20)
        print(attempt(lambda: a.__setitem__(slice(0, 8), 1.5)))
        print(attempt(lambda: a[:8].tolist()))
    """)
    assert out[0].startswith("OutOfMemoryError True "), out
    assert "shard 'c/0'" in out[0] and f"needs {16 * n_inner + 4} bytes" in out[0]
    assert "do not fit in memory" in out[0]
    assert out[1] == "ok " + json.dumps([0.0] * 8)  # nothing was written
    assert sorted(os.listdir(root)) == ["zarr.json"]


def test_the_error_is_a_memory_error_and_a_chunkstore_error():
    assert issubclass(OutOfMemoryError, MemoryError)
    assert issubclass(OutOfMemoryError, cs.errors.ChunkstoreError)


@pytest.mark.parametrize("shards", [(64,), (16,)])
def test_ordinary_shards_are_unaffected(shards):
    a = cs.create_array(None, shape=(64,), chunks=(4,), shards=shards, dtype="i4")
    a[3:50] = np.arange(47)
    want = np.zeros(64, "i4")
    want[3:50] = np.arange(47)
    np.testing.assert_array_equal(a[:], want)
