"""Codec chains around ``sharding_indexed`` (issue 32): with an array->array codec before
it or a bytes->bytes codec after it, or a sharding codec nested in another, the shard is
the array's chunk, encoded and decoded whole; sharding alone keeps its own engine.

Checked against NumPy: random region writes (hypothesis), four threads writing distinct
regions of one shard at once, missing inner chunks reading as the fill value through
``cast_value``, and the memory bounds of hostile shards (a gzip bomb after the shard, a
nested shard padded with gigabytes' worth of claimed bytes)."""

from __future__ import annotations

import gzip
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chunkstore as cs
from chunkstore.codecs.sharding import ShardingCodec
from chunkstore.errors import ChunkDecodeError

LE = {"name": "bytes", "configuration": {"endian": "little"}}
GZIP = {"name": "gzip", "configuration": {"level": 1}}
TRANSPOSE = {"name": "transpose", "configuration": {"order": [1, 0]}}


def sharding(chunk_shape, codecs=(LE,)):
    return {"name": "sharding_indexed", "configuration": {
        "chunk_shape": list(chunk_shape), "codecs": list(codecs),
        "index_codecs": [LE, {"name": "crc32c"}], "index_location": "end"}}


CHAINS = {
    "transpose|sharding": lambda inner: [TRANSPOSE, sharding(inner)],
    "sharding|gzip": lambda inner: [sharding(inner), GZIP],
    "transpose|sharding|gzip": lambda inner: [TRANSPOSE, sharding(inner, [LE, GZIP]), GZIP],
    "nested": lambda inner: [sharding(inner, [sharding((1, 1))])],
    "cast|nested|gzip": lambda inner: [
        {"name": "cast_value", "configuration": {"data_type": "int32"}},
        sharding(inner, [sharding((1, 1), [LE, GZIP])]), GZIP],
}


def make(path, chain, shape=(12, 10), chunks=(4, 6), inner=(2, 2), fill=-1, **kw):
    return cs.create_array(str(path) if path is not None else None, shape=shape,
                           chunks=chunks, dtype="i8", fill_value=fill,
                           codecs=CHAINS[chain](inner), **kw)


@pytest.mark.parametrize("chain", list(CHAINS))
def test_the_shard_is_the_chunk(tmp_path, chain):
    a = make(tmp_path / "a", chain)
    whole = chain == "nested"  # sharding alone (nested inside): read in parts (ShardIO)
    assert (a.chunks, a.shards) == (((2, 2), (4, 6)) if whole else ((4, 6), None))
    assert a._engine.kind.__name__ == ("ShardIO" if whole else "ChunkIO")
    if chain.endswith("gzip"):
        assert [c.name for c in a.compressors] == ["gzip"]
    expect = np.full(a.shape, -1, "i8")
    a[1:3, 2:9] = 7
    expect[1:3, 2:9] = 7
    np.testing.assert_array_equal(a[...], expect)
    np.testing.assert_array_equal(cs.open_array(str(tmp_path / "a"), mode="r")[...], expect)
    a[0:4, 0:6] = -1  # all fill: its shard is not stored
    expect[0:4, 0:6] = -1
    assert not (tmp_path / "a" / "c" / "0" / "0").exists()
    np.testing.assert_array_equal(a[...], expect)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chain=st.sampled_from(list(CHAINS)), data=st.data())
def test_region_writes_match_numpy(chain, data):
    shape = (data.draw(st.integers(1, 13)), data.draw(st.integers(1, 11)))
    a = make(None, chain, shape=shape)
    model = np.full(shape, -1, "i8")
    for step in range(data.draw(st.integers(1, 5))):
        region = tuple(slice(*sorted(data.draw(st.tuples(st.integers(0, n), st.integers(0, n)))))
                       for n in shape)
        values = np.arange(model[region].size, dtype="i8").reshape(model[region].shape)
        values += 1000 * (step + 1)
        a[region] = values
        model[region] = values
        np.testing.assert_array_equal(a[...], model)
    sel = tuple(slice(n // 3, n) for n in shape)
    np.testing.assert_array_equal(a[sel], model[sel])


@pytest.mark.parametrize("chain", ["transpose|sharding|gzip", "cast|nested|gzip"])
def test_four_threads_write_distinct_regions_of_one_shard(tmp_path, chain):
    """Each thread writes its own rows of the one shard, many times, all at once: every
    write is a read-modify-write of the same object, committed only if unchanged."""
    a = make(tmp_path / "a", chain, shape=(8, 6), chunks=(8, 6))
    rounds, barrier = 12, threading.Barrier(4)
    errors = []

    def work(k: int) -> None:
        try:
            mine = cs.open_array(str(tmp_path / "a"))
            for r in range(rounds):
                barrier.wait()
                mine[2 * k:2 * k + 2, :] = np.full((2, 6), 100 * k + r, "i8")
        except Exception as e:  # reported below, with the thread's number
            errors.append((k, e))
            barrier.abort()

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    expect = np.repeat(np.array([100 * k + rounds - 1 for k in range(4)], "i8"), 2)
    np.testing.assert_array_equal(a[...], np.repeat(expect[:, None], 6, axis=1))


def test_missing_inner_chunks_read_as_fill_through_cast_value(tmp_path):
    """The fill value goes through ``cast_value`` (NaN -> 0 by the scalar map) into the
    shard, where inner chunks of nothing but it are left out, and comes back as NaN."""
    codecs = [{"name": "cast_value", "configuration": {
        "data_type": "uint8", "scalar_map": {"encode": [["NaN", 0]], "decode": [[0, "NaN"]]}}},
        sharding((2, 2)), GZIP]
    a = cs.create_array(str(tmp_path / "a"), shape=(4, 4), chunks=(4, 4), dtype="f8",
                        fill_value=np.nan, codecs=codecs)
    a[0, 0] = 5.0
    shard = gzip.decompress((tmp_path / "a" / "c" / "0" / "0").read_bytes())
    index = np.frombuffer(shard[-4 - 64:-4], "<u8").reshape(4, 2)
    assert (index[1:] == 2**64 - 1).all() and index[0, 1] == 4  # one inner chunk stored
    got = cs.open_array(str(tmp_path / "a"), mode="r")[...]
    assert got[0, 0] == 5.0 and np.isnan(got.reshape(-1)[1:]).all()


def test_a_new_array_whose_fill_does_not_come_back_is_refused(tmp_path):
    with pytest.raises(cs.errors.CodecError, match="fill value 0.5 comes back as 0.0"):
        cs.create_array(str(tmp_path / "a"), shape=(4,), chunks=(4,), dtype="f8",
                        fill_value=0.5, filters=[{"name": "cast_value", "configuration": {
                            "data_type": "int8"}}])
    assert not (tmp_path / "a" / "zarr.json").exists()


def test_values_the_stored_type_cannot_hold_are_refused_naming_the_array(tmp_path):
    a = cs.create_array(str(tmp_path / "a"), shape=(4,), chunks=(4,), dtype="f8",
                        filters=[{"name": "cast_value", "configuration": {"data_type": "int8"}}])
    with pytest.raises(cs.errors.CodecError, match=r"array '/'.*200.0.*int8.*out_of_range"):
        a[:] = [1, 2, 200, 3]
    np.testing.assert_array_equal(a[...], np.zeros(4))


def test_a_gzip_bomb_after_the_shard_is_refused_before_it_inflates(tmp_path):
    a = make(tmp_path / "a", "sharding|gzip", shape=(4, 6), chunks=(4, 6))
    a[...] = 1
    bound = a._engine.io_of().max_stored
    assert bound is not None and bound < 2**20  # the shard's bound: kilobytes
    (tmp_path / "a" / "c" / "0" / "0").write_bytes(gzip.compress(bytes(64 * 2**20), 1))
    with pytest.raises(ChunkDecodeError, match=r"array '/'.*c/0/0.*more than"):
        cs.open_array(str(tmp_path / "a"), mode="r")[...]


def test_a_nested_shard_claiming_more_than_its_bound_is_refused(tmp_path):
    """An inner chunk that is itself a shard may take at most twice its packed size (the
    spec allows unused space); an index entry claiming more is refused before its
    range is read, instead of reading and decoding megabytes for a 4-element shard."""
    a = make(tmp_path / "a", "nested", shape=(4, 4), chunks=(4, 4), inner=(2, 2))
    a[...] = np.arange(16).reshape(4, 4)
    outer = a._engine.io_of().codec
    key = tmp_path / "a" / "c" / "0" / "0"
    shard = key.read_bytes()
    index = outer.parse(shard)
    parts = {i: bytes(outer.inner_bytes(shard, index, i)) for i in range(4)}
    nested: ShardingCodec = outer.inner.array_bytes
    padded = bytearray(8 * 2**20) + parts[0]  # unused space, then the nested shard
    inner_index = nested.parse(parts[0]).copy()
    inner_index[inner_index[:, 1] != 2**64 - 1, 0] += 8 * 2**20
    padded[-nested.index_nbytes:] = bytes(nested.index.encode(
        inner_index.reshape(*nested.chunks_per_shard, 2)))
    # a valid nested shard, 8 MiB of it unused: decodes to the same 4 values
    np.testing.assert_array_equal(outer.inner.decode(bytes(padded)),
                                  np.arange(16).reshape(4, 4)[:2, :2])
    key.write_bytes(outer.build({**parts, 0: bytes(padded)})[0])
    with pytest.raises(ChunkDecodeError, match=r"array '/'.*c/0/0"):
        cs.open_array(str(tmp_path / "a"), mode="r")[...]
    assert outer.inner.array_bytes.serialized_limit(None) < 2**12
