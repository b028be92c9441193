"""Untrusted input: fuzzed metadata documents and chunk payloads.

Whatever bytes a store holds, opening and reading raise only chunkstore's documented
exceptions (subclasses of ChunkstoreError) or succeed with correctly shaped results:
no other exception, no crash, no hang. CI runs a bounded number of examples; set
CHUNKSTORE_FUZZ_EXAMPLES for a longer run by hand.
"""

from __future__ import annotations

import json
import os

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chunkstore as cs
from chunkstore.errors import ChunkstoreError

EXAMPLES = int(os.environ.get("CHUNKSTORE_FUZZ_EXAMPLES", "150"))
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
        shape = node.shape
        if 0 < np.prod(shape, dtype=float) <= 10_000:
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
