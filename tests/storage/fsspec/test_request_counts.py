"""HTTP requests chunkstore sends to S3 (moto's server on 127.0.0.1), counted honestly.

Every request the S3 client really sends passes botocore's ``before-send`` event, where
it is counted by kind (GET, PUT, HEAD, DELETE, POST, and LIST = a GET on the bucket).
Nothing is mocked: the requests go to the server and their answers are used.
"""

from __future__ import annotations

import asyncio
import gc
from collections import Counter
from urllib.parse import urlsplit

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.storage import FsspecStore
from chunkstore.storage.fsspec import writes as fsspec_writes_module

N = 6  # arrays per group


class RequestCounter:
    """Counts the HTTP requests an s3fs filesystem's client sends, by kind."""

    def __init__(self, fs) -> None:
        self.counts: Counter[str] = Counter()
        fs.s3.meta.events.register("before-send.s3", self)

    def __call__(self, request, **kwargs) -> None:
        parts = urlsplit(request.url)
        on_bucket = len([s for s in parts.path.split("/") if s]) <= 1  # path-style URLs
        kind = "LIST" if request.method == "GET" and on_bucket else request.method
        self.counts[kind] += 1  # returns None: the request is sent as usual

    def take(self) -> dict[str, int]:
        """The counts since the last call, then zero."""
        out = dict(self.counts)
        self.counts.clear()
        return out


@pytest.fixture
def s3(s3_bucket):
    """``(store factory, counter)``: stores below the bucket share one counted client."""
    url, options = s3_bucket
    first = FsspecStore(f"{url}/root.zarr", options)
    counter = RequestCounter(first.fs)

    def store(name: str = "root.zarr") -> FsspecStore:
        st = FsspecStore.from_filesystem(first.fs, f"{url}/{name}")
        assert st.fs is first.fs
        return st

    return store, counter


def test_counter_sees_each_kind_of_request(s3):
    store, counter = s3
    st = store()
    st.set_many({"a/x": b"1", "a/y": b"2"})
    assert st.get_many(["a/x", "a/missing"]) == [b"1", None]
    assert list(st.list_dir("a")) == ["x", "y"]
    assert counter.take() == {"PUT": 2, "GET": 2, "LIST": 1}


def test_open_v3_array_is_one_get(s3):
    store, counter = s3
    cs.create_array(store(), shape=(8, 8), chunks=(4, 4), dtype="i4")
    counter.take()
    a = cs.open_array(store(), mode="r")
    assert a.shape == (8, 8)
    assert counter.take() == {"GET": 1}
    a = cs.open(store(), mode="r")
    assert isinstance(a, cs.Array) and counter.take() == {"GET": 1}


def test_open_v2_array_with_its_format_is_two_gets(s3):
    store, counter = s3
    cs.create_array(store(), shape=(8,), chunks=(4,), dtype="i4", zarr_format=2,
                    attributes={"k": 1})
    counter.take()
    a = cs.open_array(store(), mode="r", zarr_format=2)
    assert a.zarr_format == 2 and a.attrs["k"] == 1
    counts = counter.take()
    assert set(counts) == {"GET"} and counts["GET"] <= 2


def test_open_v3_group_is_one_get_and_listing_its_arrays_one_list_and_a_get_each(s3):
    store, counter = s3
    g = cs.group(store())
    for i in range(N):
        g.create_array(f"a{i}", shape=(10,), chunks=(5,), dtype="f4")
    counter.take()
    g = cs.open_group(store(), mode="r", use_consolidated=False)
    assert counter.take() == {"GET": 1}
    assert len(g.members()) == N
    counts = counter.take()
    assert counts.get("LIST") == 1 and set(counts) == {"LIST", "GET"}
    assert counts["GET"] <= N
    assert sorted(g.array_keys()) == sorted(f"a{i}" for i in range(N))


def test_listing_a_v2_group_reads_only_v2_documents(s3):
    store, counter = s3
    g = cs.group(store(), zarr_format=2)
    for i in range(N):
        g.create_array(f"a{i}", shape=(10,), chunks=(5,), dtype="f4")
    counter.take()
    g = cs.open_group(store(), mode="r", zarr_format=2, use_consolidated=False)
    assert counter.take() == {"GET": 2}  # .zgroup and .zattrs
    assert len(g.members()) == N
    counts = counter.take()
    assert counts.get("LIST") == 1 and counts["GET"] <= 3 * N  # .zarray .zgroup .zattrs


def test_creating_arrays_in_a_group_costs_a_few_requests_each(s3):
    store, counter = s3
    g = cs.group(store())
    counter.take()
    for i in range(N):
        g.create_array(f"a{i}", shape=(10,), chunks=(5,), dtype="f4")
    counts = counter.take()
    # per array: one batched existence check (zarr.json, .zarray, .zgroup: a v2 node
    # there must be refused too), in the same batch the root's zarr.json (a consolidated
    # copy made since the handle was opened must be kept current), and one PUT
    assert counts == {"GET": 4 * N, "PUT": N}
    g.create_array("deep/er/x", shape=(3,), dtype="i1")  # two new groups between
    assert counter.take() == {"GET": 10, "PUT": 3}


def test_existing_v2_node_blocks_a_v3_one(s3):
    store, _ = s3
    g = cs.group(store())
    cs.create_array(store(), "old", shape=(2,), dtype="i1", zarr_format=2)
    with pytest.raises(cs.ContainsArrayError, match="old"):
        g.create_array("old", shape=(2,), dtype="i1")
    g.create_array("old", shape=(3,), dtype="i1", overwrite=True)
    assert cs.open_array(store(), path="old", mode="r").zarr_format == 3
    assert not store().exists("old/.zarray")


def test_array_reads_and_writes_never_list(s3):
    store, counter = s3
    data = np.arange(64 * 64, dtype="i4").reshape(64, 64)
    a = cs.create_array(store(), shape=data.shape, chunks=(16, 16), dtype="i4")
    counter.take()
    a[...] = data
    assert counter.take() == {"PUT": 16}
    a = cs.open_array(store(), mode="r+")
    np.testing.assert_array_equal(a[...], data)
    assert counter.take() == {"GET": 1 + 16}
    a[3:5, 3:40] = -1  # read-modify-write of 3 chunks
    data[3:5, 3:40] = -1
    assert counter.take() == {"GET": 3, "PUT": 3}
    np.testing.assert_array_equal(a[0:16, 0:16], data[0:16, 0:16])
    a[...] = 0  # all fill: chunks are deleted (one bulk DELETE request)
    counts = counter.take()
    assert "LIST" not in counts and "PUT" not in counts


# fsspec makes every PUT's coroutine up front: those not started after an error are dropped
@pytest.mark.filterwarnings("ignore:coroutine .* was never awaited:RuntimeWarning")
def test_set_many_streams_through_a_bounded_window(s3, monkeypatch):
    store, counter = s3
    st = store()
    fs = st.fs
    monkeypatch.setattr(fsspec_writes_module, "PUT_WINDOW_REQUESTS", 3)
    monkeypatch.setattr(fsspec_writes_module, "PUT_WINDOW_BYTES", 2500)
    real = fs._pipe_file
    active = peak = 0

    async def tracked(path, value, **kwargs):
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        try:
            await asyncio.sleep(0.01)
            return await real(path, value, **kwargs)
        finally:
            active -= 1

    monkeypatch.setattr(fs, "_pipe_file", tracked)
    values = {f"k/{i}": bytes([i]) * 1000 for i in range(20)}
    st.set_many(values)
    assert peak == 2  # 2 x 1000 bytes fit the 2500-byte window
    assert counter.take() == {"PUT": 20}
    assert st.get_many(list(values)) == list(values.values())
    peak = 0
    monkeypatch.setattr(fsspec_writes_module, "PUT_WINDOW_BYTES", 1 << 20)
    st.set_many(values)
    assert peak == 3
    counter.take()

    async def failing(path, value, **kwargs):
        if path.endswith("/k/5"):
            raise PermissionError(f"refused: {path}")
        return await real(path, value, **kwargs)

    monkeypatch.setattr(fs, "_pipe_file", failing)
    with pytest.raises(PermissionError, match="k/5"):
        st.set_many({f"k/{i}": b"new" for i in range(20)})
    assert counter.take()["PUT"] < 19  # nothing new started after the error
    gc.collect()  # (the dropped coroutines warn here, under this test's filter)
