"""Sharded reads without the wait between their attempts, for tests of a lying shard index
alone in their process. A shard whose index names bytes past its end reads like a shard
that another writer replaced meanwhile: the reader tries again ``READ_ATTEMPTS`` times
before its ChunkDecodeError, waiting up to 50 ms between attempts (~2 s a read, asleep).
With no other writer the waits change nothing but the test's length; the attempts, and
the error after them, stay."""

from __future__ import annotations

import types

import pytest

from chunkstore.io import sharded


def without_read_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sharded reads of this test try again at once (``sharded.py``'s ``time.sleep`` a
    no-op; the number of attempts unchanged)."""
    monkeypatch.setattr(sharded, "time", types.SimpleNamespace(sleep=lambda seconds: None))
