"""``chunkstore.config.set`` checks every key's value: what each key takes, as the code
that reads it takes it, and what is refused (naming the key and the allowed values)."""

from __future__ import annotations

import numcodecs
import numpy as np
import pytest

import chunkstore as cs
from chunkstore.codecs.compressors import ZstdCodec


@pytest.fixture(autouse=True)
def _defaults():
    cs.config.reset()
    yield
    cs.config.reset()


@pytest.mark.parametrize("key,value,stored", [
    ("array.write_empty_chunks", np.bool_(True), True),
    ("array.write_empty_chunks", False, False),
    ("array.order", "F", "F"),
    ("threading.max_workers", np.int64(4), 4),
    ("threading.max_workers", 6.0, 6),
    ("threading.max_workers", None, None),
    ("array.default_compressor", "auto", "auto"),
], ids=repr)
def test_accepted_values_as_stored(key, value, stored):
    with cs.config.set({key: value}):
        got = cs.config.get(key)
        assert got == stored and type(got) is type(stored)


@pytest.mark.parametrize("compressor,fmt", [
    ("zstd", 3), ({"name": "gzip", "configuration": {"level": 1}}, 3), ({"id": "zlib"}, 2),
    ({"id": "zlib"}, 3), (numcodecs.Zstd(level=2), 2), ([ZstdCodec(3)], 3),
    ((numcodecs.Zlib(),), 3), (None, 2),
], ids=repr)
def test_compressors_accepted_and_used(compressor, fmt):
    with cs.config.set({"array.default_compressor": compressor}):
        a = cs.create_array({}, shape=(10,), chunks=(5,), dtype="i4", zarr_format=fmt)
        a[...] = np.arange(10)
        np.testing.assert_array_equal(a[...], np.arange(10))
        assert (len(a.compressors) == 0) == (compressor is None)


@pytest.mark.parametrize("key,value,allowed", [
    ("array.write_empty_chunks", "true", "True or False"),
    ("array.write_empty_chunks", 1, "True or False"),
    ("array.write_empty_chunks", "yes", "True or False"),
    ("array.order", "f", "'C' or 'F'"),
    ("array.order", None, "'C' or 'F'"),
    ("array.default_compressor", "transpose", "compressor"),
    ("array.default_compressor", {"id": "no-such-codec"}, "compressor"),
    ("array.default_compressor", [numcodecs.Zlib(), "nonsense"], "compressor"),
    ("array.default_compressor", {"name": "bytes"}, "bytes->bytes"),
    ("threading.max_workers", "4", ">= 1"),
    ("threading.max_workers", float("nan"), ">= 1"),
    ("threading.max_workers", np.bool_(True), ">= 1"),
], ids=repr)
def test_refused_naming_key_and_allowed_values(key, value, allowed):
    before = cs.config.get(key)
    with pytest.raises(ValueError) as info:
        cs.config.set({key: value})
    assert key in str(info.value) and allowed in str(info.value)
    assert cs.config.get(key) == before


def test_one_bad_value_among_many_changes_nothing():
    with pytest.raises(ValueError, match="array.order"):
        cs.config.set({"array.write_empty_chunks": True, "array.order": "Z",
                       "cache.chunk_bytes": "1MiB"})
    assert cs.config.get("array.write_empty_chunks") is False
    assert cs.config.get("cache.chunk_bytes") == 0


def test_keyword_spelling_is_checked_too():
    with pytest.raises(ValueError, match="threading.max_workers"):
        cs.config.set(threading__max_workers=-1)
    with cs.config.set(array__order="F"):
        assert cs.config.get("array.order") == "F"
    assert cs.config.get("array.order") == "C"


def test_unsafe_codec_as_default_is_refused_at_creation_unless_allowed():
    """``config.set`` does not judge safety: array creation does (allow_unsafe_codecs)."""
    with cs.config.set({"array.default_compressor": {"id": "pickle"}}):
        with pytest.raises(ValueError, match="pickle"):
            cs.create_array({}, shape=(2,), chunks=(2,), dtype="i4", zarr_format=2)


@pytest.mark.parametrize("value", ["abc", "0", "-2", "2.5"])
def test_bad_thread_count_in_the_environment_names_the_variable(monkeypatch, value):
    from chunkstore.runtime import Budgets
    monkeypatch.setenv("CHUNKSTORE_THREADS", value)
    with pytest.raises(ValueError, match="CHUNKSTORE_THREADS"):
        Budgets.from_config()


def test_thread_count_from_the_environment(monkeypatch):
    from chunkstore.runtime import Runtime
    monkeypatch.setenv("CHUNKSTORE_THREADS", "3")
    runtime = Runtime()  # the environment is read when a runtime derives its budgets
    assert runtime.budgets.max_workers == 3
    assert runtime.pool.executor()._max_workers == 3
    runtime.close()
