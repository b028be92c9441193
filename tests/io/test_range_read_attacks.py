"""Red team, round 3: partial (byte-range) reads of uncompressed chunks whose stored size
is wrong. A whole read is a ChunkDecodeError naming the key on every store, and so is a
partial read on LocalStore (it sees the file's size); a partial read through byte ranges
must not return values from a chunk of the wrong size either."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import ChunkDecodeError
from tests.read_backoff import without_read_backoff

SELECTIONS = [slice(None), 1, slice(0, 10), slice(600, 700)]


def _where(kind, tmp_path):
    if kind == "local":
        return str(tmp_path / "a.zarr")
    if kind == "dict":
        return {}
    return f"memory://rt3-ranges-{uuid.uuid4().hex[:10]}/a.zarr"


def _corrupt(kind, tmp_path, change):
    where = _where(kind, tmp_path)
    a = cs.create_array(where, shape=(1024,), chunks=(1024,), dtype="i4", compressors=None,
                        cache=0)
    a[...] = np.arange(1024)
    good = a.store.get("c/0")
    a.store.set("c/0", change(good))
    return cs.open_array(where, mode="r", cache=0)


@pytest.mark.parametrize("change", ["oversized", "truncated"])
@pytest.mark.parametrize("kind", [
    "local",
    "dict",  # MemoryStore hands out its values in place: sizes checked as on files
    "memory-url",  # FsspecStore: the object's size from ``info`` (S3: Content-Range)
])
def test_partial_read_of_wrong_size_chunk_is_chunk_decode_error(tmp_path, kind, change):
    r = _corrupt(kind, tmp_path, (lambda b: b + b"\x00" * 4096) if change == "oversized"
                 else (lambda b: b[:2000]))
    for sel in SELECTIONS:
        with pytest.raises(ChunkDecodeError, match="c/0"):
            r[sel]


def _sharded_with_index(kind, tmp_path, edit):
    """A sharded array (raw inner chunks of 4 int32, 4 per shard, index at the end with
    crc32c) whose shard index ``edit(offsets_lengths)`` changes, the checksum recomputed."""
    import google_crc32c

    where = _where(kind, tmp_path)
    a = cs.create_array(where, shape=(16,), chunks=(4,), shards=(16,), dtype="<i4",
                        compressors=None, cache=0)
    a[...] = np.arange(16)
    blob = bytearray(a.store.get("c/0"))
    index = np.frombuffer(bytes(blob[-(4 * 16 + 4):-4]), "<u8").reshape(4, 2).copy()
    edit(index)
    raw = index.astype("<u8").tobytes()
    blob[-(4 * 16 + 4):] = raw + google_crc32c.value(raw).to_bytes(4, "little")
    a.store.set("c/0", bytes(blob))
    return cs.open_array(where, mode="r", cache=0)


def _longer(index):
    index[0, 1] += 4  # inner chunk 0 claims 20 bytes (4 of chunk 1's)


def _shorter(index):
    index[1, 1] -= 4


def _beyond(index):
    index[2, 0] = 10**6  # starts past the end of the shard


def _overflow(index):
    index[3, 0] = 2**64 - 8  # offset + length overflows


@pytest.mark.parametrize("edit", [_longer, _shorter, _beyond, _overflow],
                         ids=["longer", "shorter", "beyond", "overflow"])
@pytest.mark.parametrize("kind", ["local", "dict", "memory-url"])
def test_shard_index_with_wrong_inner_chunk_sizes(tmp_path, monkeypatch, kind, edit):
    without_read_backoff(monkeypatch)  # "beyond" reads like a shard being replaced
    r = _sharded_with_index(kind, tmp_path, edit)
    bad = {_longer: 0, _shorter: 1, _beyond: 2, _overflow: 3}[edit]
    with pytest.raises(ChunkDecodeError, match="c/0"):
        r[...]
    with pytest.raises(ChunkDecodeError, match="c/0"):
        r[4 * bad + 1]
    if edit is _overflow:  # an impossible entry: refusing the whole index is fair
        return
    good = (bad + 2) % 4  # another inner chunk of the same shard still reads
    np.testing.assert_array_equal(r[4 * good:4 * good + 4], np.arange(4 * good, 4 * good + 4))
