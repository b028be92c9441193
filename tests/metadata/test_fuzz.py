"""Untrusted input: fuzzed metadata documents and chunk payloads.

Whatever bytes a store holds, opening and reading raise only chunkstore's documented
exceptions (subclasses of ChunkstoreError) or succeed with correctly shaped results:
no other exception, no crash, no hang. CI runs a bounded number of examples; set
CHUNKSTORE_FUZZ_EXAMPLES for a longer run by hand.
"""

from __future__ import annotations

import json
import math
import os
import tracemalloc

import numcodecs
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chunkstore as cs
from chunkstore.errors import ChunkstoreError

EXAMPLES = int(os.environ.get("CHUNKSTORE_FUZZ_EXAMPLES", "150"))
READ_BYTES = 64 << 20  # arrays whose metadata declares more are opened, not read
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=12)


def _valid_v3() -> dict:
    a = cs.create_array(None, shape=(6, 5), chunks=(4, 3), dtype="f4", fill_value=1.5)
    return json.loads(a.store.get("zarr.json"))


def _valid_v2() -> dict:
    a = cs.create_array(None, shape=(6, 5), chunks=(4, 3), dtype="<i2", zarr_format=2,
                        filters=[{"id": "delta", "dtype": "<i2"}])
    return json.loads(a.store.get(".zarray"))


def _mutations(doc: dict):
    keys = sorted(doc)
    return st.one_of(
        st.builds(lambda k: {x: v for x, v in doc.items() if x != k}, st.sampled_from(keys)),
        st.builds(lambda k, v: {**doc, k: v}, st.sampled_from(keys), json_values),
        st.builds(lambda k, v: {**doc, k: v}, st.text(max_size=10), json_values),
    )


def _open_and_read(store: cs.MemoryStore) -> None:
    try:
        node = cs.open(store, mode="r")
    except ChunkstoreError:
        return
    if not isinstance(node, cs.Array):
        return
    try:
        shape, itemsize = node.shape, node.dtype.itemsize
        assert node.size == math.prod(shape) and (not shape or len(node) == shape[0])
        if math.prod(node.chunks) * itemsize > READ_BYTES:
            return  # a declared size too large to read here (legal, not hostile)
        if 0 < np.prod(shape, dtype=float) <= 10_000 and math.prod(shape) * itemsize <= READ_BYTES:
            assert node[...].shape == shape
        if all(shape):
            first = node[(0,) * len(shape)]
            assert np.ndim(first) == 0
    except ChunkstoreError:
        pass


@FUZZ
@given(st.one_of(json_values, _mutations(_valid_v3())))
def test_fuzzed_v3_metadata(doc):
    store = cs.MemoryStore()
    store.set("zarr.json", json.dumps(doc).encode())
    _open_and_read(store)


@FUZZ
@given(st.one_of(json_values, _mutations(_valid_v2())), st.one_of(st.none(), json_values))
def test_fuzzed_v2_metadata(doc, attrs):
    store = cs.MemoryStore()
    store.set(".zarray", json.dumps(doc).encode())
    if attrs is not None:
        store.set(".zattrs", json.dumps(attrs).encode())
    _open_and_read(store)


@FUZZ
@given(st.binary(max_size=64))
def test_raw_garbage_metadata(raw):
    store = cs.MemoryStore()
    store.set("zarr.json", raw)
    _open_and_read(store)


def _chunk_cases():
    out = []
    for compressors in (None, "auto", {"id": "zstd", "level": 1}, {"id": "gzip", "level": 1}):
        for fmt in (2, 3):
            a = cs.create_array(None, shape=(8, 8), chunks=(4, 4), dtype="i4",
                                compressors=compressors, zarr_format=fmt)
            a[:] = np.arange(64).reshape(8, 8)
            key = a.chunk_key((0, 0))
            out.append((a.store, key, a.store.get(key)))
    return out


CHUNKS = _chunk_cases()


@FUZZ
@given(st.sampled_from(range(len(CHUNKS))), st.data())
def test_fuzzed_chunk_payloads(case, data):
    store, key, valid = CHUNKS[case]
    kind = data.draw(st.sampled_from(["random", "flip", "truncate", "extend"]))
    if kind == "random":
        payload = data.draw(st.binary(max_size=200))
    elif kind == "flip":
        pos = data.draw(st.integers(0, len(valid) - 1))
        payload = valid[:pos] + bytes([valid[pos] ^ data.draw(st.integers(1, 255))]) + \
            valid[pos + 1:]
    elif kind == "truncate":
        payload = valid[:data.draw(st.integers(0, len(valid) - 1))]
    else:
        payload = valid + data.draw(st.binary(min_size=1, max_size=16))
    fuzzed = cs.MemoryStore(dict(store._data))
    fuzzed.set(key, payload)
    a = cs.open_array(fuzzed, mode="r")
    try:
        result = a[:]
    except ChunkstoreError:
        return
    assert result.shape == (8, 8) and result.dtype == np.dtype("i4")


# -- hostile shapes: length fields, headers, nesting, sizes ------------------------------------
HOSTILE = settings(max_examples=max(10, EXAMPLES // 3), deadline=None,
                   suppress_health_check=[HealthCheck.too_slow])
u32 = st.integers(0, 2**32 - 1)
huge = st.integers(0, 2**80)


def _nested(depth: int) -> object:
    value: object = 0
    for _ in range(depth):
        value = [value]
    return value


@HOSTILE
@given(st.sampled_from(["v3", "v2"]), st.integers(1, 3000), st.data())
def test_fuzzed_nesting(fmt, depth, data):
    doc = _valid_v3() if fmt == "v3" else _valid_v2()
    key = data.draw(st.sampled_from(sorted(doc) + ["attributes"]))
    store = cs.MemoryStore()
    raw = json.dumps({**doc, key: "@"}).replace('"@"', "[" * depth + "0" + "]" * depth)
    store.set("zarr.json" if fmt == "v3" else ".zarray", raw.encode())
    _open_and_read(store)


@HOSTILE
@given(st.lists(huge, min_size=1, max_size=3), st.lists(huge, min_size=1, max_size=3),
       st.sampled_from(["v3", "v2"]))
def test_fuzzed_huge_sizes(shape, chunks, fmt):
    store = cs.MemoryStore()
    if fmt == "v3":
        doc = {**_valid_v3(), "shape": shape,
               "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}}}
        store.set("zarr.json", json.dumps(doc).encode())
    else:
        store.set(".zarray", json.dumps({**_valid_v2(), "shape": shape, "chunks": chunks}).encode())
    _open_and_read(store)


@HOSTILE
@given(huge, st.sampled_from(["<U{}", "|S{}", "<M8[{}ns]", "<m8[{}s]"]),
       st.sampled_from(["null_terminated_bytes", "fixed_length_utf32", "numpy.datetime64"]))
def test_fuzzed_item_sizes(n, v2_pattern, v3_name):
    store = cs.MemoryStore()
    store.set(".zarray", json.dumps({**_valid_v2(), "dtype": v2_pattern.format(n),
                                     "filters": None, "fill_value": None}).encode())
    _open_and_read(store)
    config = ({"unit": "ns", "scale_factor": n} if v3_name == "numpy.datetime64"
              else {"length_bytes": n})
    store = cs.MemoryStore()
    store.set("zarr.json", json.dumps({**_valid_v3(), "fill_value": 0, "data_type": {
        "name": v3_name, "configuration": config}}).encode())
    _open_and_read(store)


def _hostile_cases():
    out = {}
    for name, dtype, compressors, fmt in [
            ("zstd", "i4", numcodecs.Zstd(1), 3), ("blosc", "i4", "auto", 3),
            ("lz4", "i4", numcodecs.LZ4(), 2), ("gzip", "i4", numcodecs.GZip(1), 2),
            ("vlen", str, None, 3), ("vlen-v2", str, None, 2)]:
        a = cs.create_array(None, shape=(8, 8), chunks=(4, 4), dtype=dtype,
                            compressors=compressors, zarr_format=fmt)
        a[:] = (np.arange(64).reshape(8, 8) if dtype == "i4"
                else np.array([f"s{i}" for i in range(64)], dtype=object).reshape(8, 8))
        key = a.chunk_key((0, 0))
        out[name] = (a.store, key, bytes(a.store.get(key)))
    return out


HOSTILE_CHUNKS = _hostile_cases()
ZERO_BOMBS = {"zstd": bytes(numcodecs.Zstd(1).encode(np.zeros(64 << 20, "u1"))),
              "gzip": bytes(numcodecs.GZip(1).encode(np.zeros(16 << 20, "u1")))}


def _zstd_with_content_size(frame: bytes, size: int) -> bytes:
    """A numcodecs zstd frame (single segment) re-headed with an 8-byte content size."""
    descriptor = frame[4]
    fcs = (1, 2, 4, 8)[descriptor >> 6]
    return frame[:4] + bytes([0xE0 | (descriptor & 0x07)]) + size.to_bytes(8, "little") + \
        frame[5 + (0, 1, 2, 4)[descriptor & 3] + fcs:]


@HOSTILE
@given(st.sampled_from(sorted(HOSTILE_CHUNKS)), st.data())
def test_fuzzed_length_fields(case, data):
    store, key, valid = HOSTILE_CHUNKS[case]
    payload = bytearray(valid)
    if case == "zstd":
        kind = data.draw(st.sampled_from(["content-size", "bomb"]))
        payload = (ZERO_BOMBS["zstd"] if kind == "bomb"
                   else _zstd_with_content_size(valid, data.draw(st.integers(0, 2**64 - 1))))
    elif case == "blosc":
        for offset in data.draw(st.lists(st.sampled_from([4, 8, 12]), min_size=1)):
            payload[offset:offset + 4] = data.draw(u32).to_bytes(4, "little")
    elif case == "lz4":
        payload[:4] = data.draw(u32).to_bytes(4, "little")
    elif case == "gzip":
        payload = ZERO_BOMBS["gzip"]
    else:  # vlen: the item count, then the first length
        payload[:4] = data.draw(u32).to_bytes(4, "little")
        if data.draw(st.booleans()):
            payload[4:8] = data.draw(u32).to_bytes(4, "little")
    fuzzed = cs.MemoryStore(dict(store._data))
    fuzzed.set(key, bytes(payload))
    a = cs.open_array(fuzzed, mode="r")
    tracemalloc.start()
    try:
        a[:4, :4]
    except ChunkstoreError:
        pass
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < 16 << 20, f"{case}: decoding took {peak / 2**20:.1f} MiB"
