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
    pytest.param("dict", marks=pytest.mark.xfail(strict=True, reason=(
        "MemoryStore: a partial read of an uncompressed chunk of the wrong size (8192 "
        "or 2000 bytes for a 4096-byte chunk) returns values through byte ranges instead "
        "of the ChunkDecodeError a whole read (or LocalStore) gives"))),
    pytest.param("memory-url", marks=pytest.mark.xfail(strict=True, reason=(
        "FsspecStore: a partial read of an uncompressed chunk of the wrong size returns "
        "values through byte ranges instead of the ChunkDecodeError a whole read (or "
        "LocalStore) gives"))),
])
def test_partial_read_of_wrong_size_chunk_is_chunk_decode_error(tmp_path, kind, change):
    r = _corrupt(kind, tmp_path, (lambda b: b + b"\x00" * 4096) if change == "oversized"
                 else (lambda b: b[:2000]))
    for sel in SELECTIONS:
        with pytest.raises(ChunkDecodeError, match="c/0"):
            r[sel]
