"""Red-team attacks on sharded reads pinned to the index's version
(``Store.get_versioned_ranges``, ``io.shard_index``): a writer (another client) replaces
or deletes a shard between the index GET and the data GET, on every read path, against
a store without snapshot ranges (S3 through obstore and s3fs, and a memory store read as
S3 reads); each read returns one stored state whole (A, B or fill), never a mix or
garbage."""

from __future__ import annotations

from dataclasses import replace

import numcodecs
import numpy as np
import pytest

import chunkstore as cs
from chunkstore.io.sharded import ShardIO
from chunkstore.storage.wrappers import WrapperStore

A = np.arange(1, 9, dtype="i4")
B = np.array([0, 0, 11, 12, 13, 14, 15, 16], "i4")  # inner chunk 0 fill (left out)
FILL = np.zeros(8, "i4")
#: (what is stored while the data is read, what is stored after: at the index re-read)
SCENARIOS = {"aba": ("B", "A", A), "ab": ("B", "B", B), "delete": (None, None, FILL),
             "delete-back": (None, "A", A), "index-only": ("E", "E", FILL),
             "index-only-back": ("E", "A", A), "garbage-back": ("G", "A", A)}
READS = {
    "region": (lambda a: a[...], lambda w: w),
    "slice": (lambda a: a[2:7], lambda w: w[2:7]),
    "orthogonal": (lambda a: a.get_orthogonal_selection(([0, 3, 6],)), lambda w: w[[0, 3, 6]]),
    "coordinate": (lambda a: a.get_coordinate_selection(([7, 1, 4],)), lambda w: w[[7, 1, 4]]),
    "read_chunk": (lambda a: a.read_chunk((1,)), lambda w: w[2:4]),
}


def _index_only() -> bytes:
    """A shard of 4 inner chunks, none stored: its index alone (bytes + crc32c)."""
    return bytes(numcodecs.CRC32C().encode(b"\xff" * 64))


class _Attacked(WrapperStore):
    """Reads as S3 reads (each range its own request, no snapshot); once ``armed``, the
    first call reading data ranges of ``key`` has ``put(key, during)`` land before each
    of its data requests and ``put(key, after)`` before each index request (and after
    the call)."""

    def __init__(self, inner, key, index_range, put, during, after):
        super().__init__(inner)
        self.key, self.index_range, self.put = key, index_range, put
        self.during, self.after = during, after
        self.armed = self.attacked = False
        self.log: list = []

    def with_read_only(self, read_only=True):
        return self  # one attacker per test

    @property
    def capabilities(self):  # type: ignore[override]
        return replace(self.inner.capabilities, snapshot_ranges=False)

    def get_versioned_ranges(self, requests):
        data = [r for k, r, _ in requests if k == self.key and r != self.index_range]
        attack = bool(data) and self.armed and not self.attacked
        out = []
        for k, rng, pinned in requests:
            if attack and k == self.key:
                self.put(k, self.during if rng in data else self.after)
            self.log.append((k, rng, pinned))
            out.extend(self.inner.get_versioned_ranges([(k, rng, pinned)]))
        if attack:
            self.put(self.key, self.after)
            self.attacked = True
        return out


def _prepare(inner, location) -> dict:
    """The attacked array made at ``inner`` (one shard of 8 elements, index at
    ``location``), holding A; returns what the attacks store: each state's shard bytes
    and ``"zarr.json"``, the array's metadata document."""
    a = cs.create_array(inner, shape=(8,), chunks=(2,),
                        shards={"shape": (8,), "index_location": location}, dtype="i4",
                        fill_value=0, compressors=None)
    a[...] = B
    blob_b = bytes(inner.get("c/0"))
    a[...] = A
    blob_a = bytes(inner.get("c/0"))
    return {"A": blob_a, "B": blob_b, "E": _index_only(), None: None,
            "G": np.random.default_rng(1).bytes(len(blob_a)),
            "zarr.json": bytes(inner.get("zarr.json"))}


def _attack(inner, put, scenario, read, location, cache, cached_index, monkeypatch,
            wrap=None, before_read=None, blobs=None):
    """One attack; ``blobs``: what :func:`_prepare` returned for an array that ``put``
    has stored again at ``inner`` (else the array is made here)."""
    blobs = _prepare(inner, location) if blobs is None else blobs
    during, after, want = SCENARIOS[scenario]
    index_range = (0, 68) if location == "start" else (-68, None)
    store = _Attacked(inner if wrap is None else wrap(inner), "c/0", index_range, put,
                      blobs[during], blobs[after])
    reader = cs.open_array(store, mode="r+" if cached_index == "written" else "r",
                           cache=cache)
    if cached_index == "written":  # the engine's own write: an index without generation
        reader[...] = A
        assert bytes(inner.get("c/0")) == blobs["A"]
    elif cached_index:  # the index cached by an earlier read (with its generation), and
        # with a decoded-chunk cache inner chunk 0 of A kept
        np.testing.assert_array_equal(reader[0:2], A[0:2])
    if read in ("orthogonal", "coordinate", "read_chunk"):
        monkeypatch.setattr(ShardIO, "_region", lambda self, projections, shape: None)
    if before_read is not None:
        before_read()
    store.armed = True
    get, expect = READS[read]
    got = get(reader)
    assert store.attacked, store.log
    np.testing.assert_array_equal(got, expect(want), err_msg=f"{scenario} {store.log}")
    np.testing.assert_array_equal(reader[...], want)  # and what is stored now
    return store


def _memory_put(inner):
    def put(key, value):
        if value is None:
            inner.delete(key)
        else:
            inner.set(key, bytes(bytearray(value)))  # a new object: a new generation
    return put


@pytest.mark.parametrize("cached_index", [False, True, "written"])
@pytest.mark.parametrize("cache", [0, 1 << 20])
@pytest.mark.parametrize("location", ["end", "start"])
@pytest.mark.parametrize("read", list(READS))
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_rewrite_between_the_gets_memory(monkeypatch, scenario, read, location, cache,
                                         cached_index):
    from chunkstore.storage.memory import MemoryStore

    inner = MemoryStore()
    _attack(inner, _memory_put(inner), scenario, read, location, cache, cached_index,
            monkeypatch)


#: the S3 matrix: every scenario, on both read paths, with each way the index is had
S3_CASES = [(scenario, read, location, cached_index) for scenario in SCENARIOS
            for read in ("region", "read_chunk")
            for location, cached_index in (("end", False), ("start", True), ("end", "written"))]


def _each_case(cases, body) -> None:
    """``body(i, case, monkeypatch)`` for each case, with its own monkeypatch (undone
    after the case); a failure names its case. The S3 tests run their cases in one
    bucket, each in its own array: one bucket and client per backend, not per case."""
    for i, case in enumerate(cases):
        with pytest.MonkeyPatch.context() as mp:
            try:
                body(i, case, mp)
            except AssertionError as e:
                raise AssertionError(f"case {case}: {e}") from e


def test_rewrite_between_the_gets_s3(s3_bucket_both):
    """Every case of :data:`S3_CASES` against the backend, each with its own reader and
    writer stores and its own array: the first of each index location is made through
    the engine, the others are its two objects put again (2 PUTs instead of the ~10
    requests of making and writing it twice: the same bytes, the same ETags)."""
    made: dict[str, dict] = {}

    def case(i, case, mp):
        inner, put = _s3_pair(s3_bucket_both, f"p{i}.zarr")
        scenario, read, location, cached_index = case
        blobs = made.get(location)
        if blobs is None:
            blobs = made[location] = _prepare(inner, location)
        else:
            put("zarr.json", blobs["zarr.json"])
            put("c/0", blobs["A"])
        _attack(inner, put, scenario, read, location, 0, cached_index, mp, blobs=blobs)
    _each_case(S3_CASES, case)


def _s3_pair(s3_bucket_both, name="p.zarr"):
    """A reader store and a ``put(key, value)`` through another store (``None``
    deletes), both at ``name`` in the bucket."""
    from chunkstore.storage.resolve import resolve_store

    url, options = s3_bucket_both
    inner = resolve_store(f"{url}/{name}", storage_options=options)
    writer = resolve_store(f"{url}/{name}", storage_options=options)

    def put(key, value):
        if value is None:
            writer.delete(key)
        else:
            writer.set(key, value)
    return inner, put


def test_server_ignoring_if_match_is_caught_by_the_etag(s3_bucket_both):
    """A server known to ignore conditions is sent no If-Match, so the attacked GET is
    answered with the version stored then (B, garbage, 404): the ETag the answer carries
    is not the pinned one, and the read is still one stored state whole."""
    from chunkstore.storage.s3_conditional import ETag

    def case(i, scenario, monkeypatch):
        inner, put = _s3_pair(s3_bucket_both, f"p{i}.zarr")
        sent = []
        if s3_bucket_both[1]["backend"] == "obstore":
            import obstore

            real = obstore.get

            def get(client, path, options=None):
                sent.append(dict(options or {}))
                return real(client, path, options=options)
            monkeypatch.setattr(obstore, "get", get)

        def ignoring():
            monkeypatch.setattr(type(inner), "_versioned_reads", property(lambda self: False))

        store = _attack(inner, put, scenario, "region", "end", 0, False, monkeypatch,
                        before_read=ignoring)
        assert any(isinstance(pin, ETag) for _, _, pin in store.log), store.log
        assert not any("if_match" in o for o in sent), sent
    _each_case(["aba", "ab", "delete-back", "garbage-back"], case)


def test_wrappers_over_s3_keep_reads_pinned(s3_bucket_both):
    """MetricsStore / LatencyStore around an S3 store forward the pinned ranges (not
    unpinned ``get_ranges``): an A -> B -> A rewrite between the GETs reads A whole."""
    from chunkstore.storage.s3_conditional import ETag
    from chunkstore.storage.wrappers import LatencyStore, MetricsStore

    def case(i, wrapper, monkeypatch):
        inner, put = _s3_pair(s3_bucket_both, f"p{i}.zarr")
        made = []

        def wrap(store):
            if wrapper in ("latency", "both"):
                store = LatencyStore(store, 0.001)
            if wrapper in ("metrics", "both"):
                store = MetricsStore(store)
            made.append(store)
            return store
        store = _attack(inner, put, "aba", "region", "end", 0, False, monkeypatch, wrap=wrap)
        data = [pin for _, rng, pin in store.log if rng != (-68, None)]
        assert data and all(isinstance(pin, ETag) for pin in data), store.log
        if isinstance(made[0], MetricsStore):
            assert made[0].calls["get_versioned_ranges"] >= 2
            assert made[0].calls["get_ranges"] == 0
    _each_case(["metrics", "latency", "both"], case)


def test_whole_shard_fallback_refuses_an_oversized_shard_before_reading_it(monkeypatch):
    """A shard rewritten before every pinned read is read whole after ``WHOLE_AFTER``
    refusals; the version then stored keeps a valid index but is padded past the largest
    a shard of this array may be (a hostile or sparse object): it is refused before it is
    read, and the error names the array and the key."""
    import chunkstore.io.sharded as sharded
    from chunkstore.errors import ChunkDecodeError
    from chunkstore.storage.memory import MemoryStore

    KEY = "victim/c/0"
    inner = MemoryStore()
    a = cs.create_array(inner, shape=(8,), chunks=(2,), shards=(8,), dtype="i4",
                        fill_value=0, compressors=None, name="victim")
    a[...] = A
    blob_a = bytes(inner.get(KEY))
    a[...] = A + 1
    blob_a1 = bytes(inner.get(KEY))
    seen_bounds = []

    class Rewriting(WrapperStore):
        n = 0

        @property
        def capabilities(self):  # type: ignore[override]
            return replace(inner.capabilities, snapshot_ranges=False)

        def with_read_only(self, read_only=True):
            return self

        def get_versioned_many(self, keys, max_bytes=None):
            seen_bounds.append(max_bytes)
            return self.inner.get_versioned_many(keys, max_bytes)

        def get_versioned_ranges(self, requests):
            if any(r != (-68, None) for _, r, _ in requests):
                Rewriting.n += 1
                if Rewriting.n == 1:
                    inner.set(KEY, blob_a1)
                else:  # the same index, padded far past any legitimate shard
                    pad = 40 << 20  # past the 16 MiB of unused bytes a shard may hold
                    inner.set(KEY, blob_a[:-68] + bytes(pad) + blob_a[-68:])
            return self.inner.get_versioned_ranges(requests)

    inner.set(KEY, blob_a)
    reader = cs.open_array(Rewriting(inner), path="victim", mode="r", cache=0)
    with pytest.raises(ChunkDecodeError) as e:
        reader[...]
    assert Rewriting.n == sharded.WHOLE_AFTER
    assert seen_bounds and seen_bounds[-1] is not None and seen_bounds[-1] < len(
        inner.get(KEY)), seen_bounds
    assert "array '/victim'" in str(e.value) and "'victim/c/0'" in str(e.value), str(e.value)


# -- processes: 4 writers of one shard on S3, 2 readers --------------------------------------
ROUNDS = 6  # (12 cost twice the requests; both breaks below still show at 6)


def _s3_worker(url, options, mode, i, start):
    from chunkstore.storage.resolve import resolve_store

    store = resolve_store(f"{url}/mp.zarr", storage_options=options)
    if i == 5:  # this reader keeps decoded inner chunks and reads chunk by chunk
        with cs.config.set({"cache.chunk_bytes": 1 << 20}):
            return _s3_worker_(store, mode, i, start)
    return _s3_worker_(store, mode, i, start)


def _s3_worker_(store, mode, i, start):
    a = cs.open_array(store, mode="r+" if i < 4 else "r")
    start.wait()
    if i < 4 and mode == "inner":  # writer i owns inner chunk i: read-modify-writes
        for r in range(1, ROUNDS + 1):
            a[2 * i:2 * i + 2] = 100 * i + r
        return
    if i < 4:  # whole shards, one value each, as fast as the server takes them
        for r in range(1, 4 * ROUNDS + 1):
            a[...] = 1000 * (i + 1) + r
        return
    last = np.full(4, -1)
    for _ in range(3 * ROUNDS):
        got = a[...] if i == 4 else a.get_orthogonal_selection((list(range(8)),))
        if mode == "whole":  # one version of the shard, whole
            assert len(set(got.tolist())) == 1, got
            v = int(got[0])
            assert v == -1 or (1 <= v % 1000 <= 4 * ROUNDS and 1 <= v // 1000 <= 4), got
            continue
        pairs = got.reshape(4, 2)
        assert (pairs[:, 0] == pairs[:, 1]).all(), got  # each inner chunk whole
        rounds = np.where(pairs[:, 0] == -1, 0, pairs[:, 0] - 100 * np.arange(4))
        assert ((rounds >= 0) & (rounds <= ROUNDS)).all(), got  # a state that existed
        assert (rounds >= last).all(), (got, last)  # never older than one read before
        last = rounds


@pytest.mark.parametrize("mode", ["inner", "whole"])
def test_four_s3_writers_of_one_shard_and_two_readers(s3_bucket_both, mode):
    """4 processes write one shard on S3 (``inner``: each its own inner chunk, by
    read-modify-writes committed with If-Match; ``whole``: the whole shard, the same
    sizes every time, so the index never changes) while 2 read it continuously (region
    path, and chunk by chunk with a decoded-chunk cache): every read is a state that
    existed (each inner chunk / the shard old or new whole, never older than the reader's
    last read), no reader gives up, and the final content is exact."""
    from chunkstore.storage.resolve import resolve_store
    from tests.multiproc import run_together

    url, options = s3_bucket_both
    store = resolve_store(f"{url}/mp.zarr", storage_options=options)
    cs.create_array(store, shape=(8,), chunks=(2,), shards=(8,), dtype="i4", fill_value=-1,
                    compressors=None if mode == "whole" else [numcodecs.Zstd(1)])
    run_together(_s3_worker, lambda i: (url, options, mode, i), n=6)
    got = cs.open_array(store, mode="r")[...]
    if mode == "inner":
        want = np.repeat(100 * np.arange(4) + ROUNDS, 2).astype("i4")
        np.testing.assert_array_equal(got, want)
    else:  # the last writer's last value
        assert len(set(got.tolist())) == 1 and got[0] % 1000 == 4 * ROUNDS, got


@pytest.mark.parametrize("read", ["region", "read_chunk"])
def test_rewrite_between_the_gets_fsspec_without_versions(monkeypatch, read):
    """The A -> B -> A attack on an fsspec store of another filesystem (ranges not read
    from one snapshot, no ETags): the read must still be one stored state whole."""
    import uuid

    from chunkstore.storage.fsspec.store import FsspecStore

    inner = FsspecStore(f"memory://rt-{uuid.uuid4().hex}/a.zarr")
    assert not inner.capabilities.snapshot_ranges
    _attack(inner, _memory_put(inner), "aba", read, "end", 0, False, monkeypatch)


@pytest.mark.parametrize("location", ["end", "start"])
def test_fsspec_without_versions_reads_data_and_index_in_one_get(location):
    """Without versions, each shard's data and its index come from one ranged GET (the
    range from the first needed byte through the index, or from byte 0), after the index
    GET: 2 GETs per shard, and the inner chunks read right."""
    import uuid

    from chunkstore.storage.fsspec.store import FsspecStore

    inner = FsspecStore(f"memory://one-{uuid.uuid4().hex}/a.zarr")
    a = cs.create_array(inner, shape=(16,), chunks=(2,),
                        shards={"shape": (8,), "index_location": location}, dtype="i4",
                        fill_value=0, compressors=None)
    a[...] = np.arange(16, dtype="i4")
    log = []

    class Logging(WrapperStore):
        def with_read_only(self, read_only=True):
            return self

        def get_versioned_ranges(self, requests):
            log.extend((k, r) for k, r, _ in requests)
            return self.inner.get_versioned_ranges(requests)

    got = cs.open_array(Logging(inner), mode="r", cache=0).get_orthogonal_selection(
        ([2, 12],))
    np.testing.assert_array_equal(got, [2, 12])
    index = (0, 68) if location == "start" else (-68, None)
    # shard 0: inner chunk 1 at [8, 16) after a start index; shard 1: inner chunk 2
    want = {"end": [("c/0", (8, 32 + 68)), ("c/1", (16, 32 + 68))],
            "start": [("c/0", (0, 68 + 16)), ("c/1", (0, 68 + 24))]}[location]
    assert sorted(log) == sorted([("c/0", index), ("c/1", index), *want]), log


def test_shard_rewritten_before_every_pinned_read_on_s3_is_read_whole(s3_bucket_both):
    """Another client replaces the shard (the same index, other values) before every read
    of its data ranges: each pinned GET is refused (412), so after ``WHOLE_AFTER`` the
    shard is read whole through the backend's bounded versioned GET, and the read is the
    version then stored, whole (index at either end)."""
    import chunkstore.io.sharded as sharded
    from chunkstore.storage.wrappers import MetricsStore

    def case(i, location_read, monkeypatch):
        location, read = location_read
        inner, put = _s3_pair(s3_bucket_both, f"p{i}.zarr")
        a = cs.create_array(inner, shape=(8,), chunks=(2,),
                            shards={"shape": (8,), "index_location": location}, dtype="i4",
                            fill_value=-1, compressors=None)
        versions = []
        for v in range(6):
            a[...] = v
            versions.append(bytes(inner.get("c/0")))
        assert len({len(v) for v in versions}) == 1  # the same sizes: the same index
        index_range = (0, 68) if location == "start" else (-68, None)
        rewrites = []

        class Rewriting(WrapperStore):
            def with_read_only(self, read_only=True):
                return self

            def get_versioned_ranges(self, requests):
                if any(r != index_range for _, r, _ in requests):
                    rewrites.append(None)
                    put("c/0", versions[len(rewrites)])
                return self.inner.get_versioned_ranges(requests)

        put("c/0", versions[0])
        store = MetricsStore(Rewriting(inner))
        if read == "read_chunk":
            monkeypatch.setattr(ShardIO, "_region", lambda self, projections, shape: None)
        reader = cs.open_array(store, mode="r", cache=0)
        got = reader[...] if read == "region" else reader.read_chunk((2,))
        assert len(rewrites) == sharded.WHOLE_AFTER
        assert set(got.tolist()) == {len(rewrites)}  # one version, whole: the one stored
        assert store.calls["get_versioned_many"] == 1
    _each_case([(loc, read) for read in ("region", "read_chunk") for loc in ("end", "start")],
               case)
