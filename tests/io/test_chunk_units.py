"""Write units made when a run takes them: indexers with random access, windows of a
sequence, lazy unit sequences in ``commit_units``, and a write of many chunks that never
holds all of its units (or projections) at once."""

from __future__ import annotations

import gc

import numcodecs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chunkstore as cs
from chunkstore.indexing import ChunkProjection
from chunkstore.indexing.projections import BasicIndexer, OrthogonalIndexer
from chunkstore.io import buffers
from chunkstore.io.rmw import WriteUnit, commit_units
from chunkstore.runtime.pool import windows
from chunkstore.storage import LocalStore, MemoryStore


def _same(a: ChunkProjection, b: ChunkProjection) -> bool:
    def eq(x, y):
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            return np.array_equal(x, y)
        return x == y
    return (a.chunk_coords == b.chunk_coords and a.is_complete == b.is_complete
            and len(a.chunk_selection) == len(b.chunk_selection)
            and all(eq(x, y) for x, y in zip(a.chunk_selection, b.chunk_selection, strict=True))
            and len(a.out_selection) == len(b.out_selection)
            and all(eq(x, y) for x, y in zip(a.out_selection, b.out_selection, strict=True)))


@st.composite
def _selections(draw):
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 12)) for _ in range(ndim))
    chunks = tuple(draw(st.integers(1, 5)) for _ in range(ndim))
    sel = []
    for n in shape:
        kind = draw(st.sampled_from(["slice", "int", "array", "mask"]))
        if kind == "int":
            sel.append(draw(st.integers(-n, n - 1)))
        elif kind == "array":
            sel.append(np.array(draw(st.lists(st.integers(-n, n - 1), min_size=1,
                                               max_size=5))))
        elif kind == "mask":
            sel.append(np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n))))
        else:
            start = draw(st.one_of(st.none(), st.integers(-n, n)))
            stop = draw(st.one_of(st.none(), st.integers(-n, n)))
            step = draw(st.one_of(st.none(), st.integers(-3, 3).filter(bool)))
            sel.append(slice(start, stop, step))
    return tuple(sel), shape, chunks


@settings(max_examples=300, deadline=None)
@given(_selections())
def test_indexer_random_access_matches_iteration(case):
    sel, shape, chunks = case
    ix = OrthogonalIndexer(sel, shape, chunks)
    listed = list(ix)
    assert len(ix) == len(listed)
    for i, p in enumerate(listed):
        assert _same(ix[i], p)
        assert _same(ix[i - len(listed)], p)
    for bad in (len(listed), -len(listed) - 1):
        with pytest.raises(IndexError):
            ix[bad]


def test_indexer_of_a_0d_array_and_of_nothing():
    ix = BasicIndexer((), (), ())
    assert len(ix) == 1 and ix[0] == ChunkProjection((), (), (), True) == list(ix)[0]
    empty = BasicIndexer((slice(3, 3),), (10,), (4,))
    assert len(empty) == 0 and list(empty) == []
    with pytest.raises(IndexError):
        empty[0]


@pytest.mark.parametrize("n,per", [(0, 3), (1, 3), (7, 3), (9, 3), (9, 100)])
def test_windows_cover_every_item_once_in_order(n, per):
    items = list(range(n))
    parts = list(windows(items, per))
    assert [list(w) for w in parts] == [items[i:i + per] for i in range(0, n, per)]
    for w in parts:
        assert w[-1] == list(w)[-1]
        with pytest.raises(IndexError):
            w[len(w)]


class _CountingUnits:
    """A lazy sequence of units: each index says how often it was made."""

    def __init__(self, n: int) -> None:
        self.made = [0] * n

    def __len__(self) -> int:
        return len(self.made)

    def __getitem__(self, i: int) -> WriteUnit:
        self.made[i] += 1
        return WriteUnit(f"k/{i}", lambda old, i=i: (old or b"") + b"%d," % i,
                         needs_old=i % 2 == 0)


@pytest.mark.parametrize("store_cls", [MemoryStore, LocalStore])
def test_commit_units_takes_a_lazy_sequence_each_unit_once(tmp_path, store_cls):
    store = MemoryStore() if store_cls is MemoryStore else LocalStore(str(tmp_path))
    store.set("k/4", b"old,")
    units = _CountingUnits(300)
    results = commit_units(store, units, item_bytes=16)
    assert units.made == [1] * 300  # one attempt each, no retry: made exactly once
    assert results[4] == b"old,4," and results[5] == b"5,"
    assert store.get("k/4") == b"old,4," and store.get("k/299") == b"299,"


def test_commit_units_remakes_a_unit_that_lost_a_race():
    store = MemoryStore()
    units = _CountingUnits(3)
    real = store.commit_many
    lost = [True]

    def commit_many(items):
        done = real(items)
        if lost[0]:  # another writer changed k/0 right after it was read
            lost[0] = False
            store.set("k/0", b"theirs,")
            return [False] + done[1:]
        return done

    store.commit_many = commit_many
    commit_units(store, units, cpu_bound=False)
    assert units.made == [2, 1, 1]
    assert store.get("k/0") == b"theirs,0,"


def _live(kind: type) -> int:
    """Objects of ``kind`` still held: the young generations' garbage collected first
    (uncollected cycles of finished runs counted 259 against 256 once under load)."""
    gc.collect(1)
    return sum(1 for o in gc.get_objects() if type(o) is kind)


def test_a_write_of_many_chunks_holds_only_a_run_of_units(tmp_path, monkeypatch):
    """The units and projections of a batch are made when a run takes them, so a
    2,000-chunk write never holds more than a few runs of them: a write that made them
    all first held 2,000 of each (and made the interpreter collect the whole heap)."""
    data = (np.arange(400 * 500) % 977 + 1).astype("i4").reshape(400, 500)
    a = cs.create_array(str(tmp_path / "a.zarr"), shape=data.shape, dtype="i4",
                        chunks=(10, 10), fill_value=0,
                        compressors=numcodecs.Blosc(cname="lz4", clevel=5, shuffle=1))
    store = a.store
    seen: list[tuple[int, int]] = []
    real = type(store).commit_session
    calls = [0]

    def session(self):
        ctx = real(self)

        class Wrapped:
            def __enter__(_self):
                commit = ctx.__enter__()

                def counted(items):
                    calls[0] += 1
                    if calls[0] % 5 == 1:
                        seen.append((_live(WriteUnit), _live(ChunkProjection)))
                    return commit(items)
                return counted

            def __exit__(_self, *exc):
                return ctx.__exit__(*exc)
        return Wrapped()

    monkeypatch.setattr(type(store), "commit_session", session)
    a[...] = data
    np.testing.assert_array_equal(a[...], data)
    assert calls[0] >= 2000 // buffers.WARM_RUN_UNITS  # the write ran as many small runs
    assert seen
    limit = 4 * buffers.WARM_RUN_UNITS
    assert max(units for units, _ in seen) <= limit, seen
    assert max(projections for _, projections in seen) <= limit, seen
