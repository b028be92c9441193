"""Red team, round 4: ``chunkstore.config.set`` with values of the wrong kind for the keys
that are not byte sizes (round 3 covered the ``*_bytes`` keys).

A bad value must be refused when set, with an error naming the key, and leave the config
as it was; it must not be taken silently (``"no"`` read as True) nor fail later in an
unrelated read or write with an error that does not say which setting is wrong.
"""

from __future__ import annotations

import numpy as np
import pytest

import chunkstore as cs


@pytest.fixture(autouse=True)
def _config_back_to_defaults():
    """A value wrongly accepted must not leak into the next test."""
    cs.config.reset()
    yield
    cs.config.reset()


BAD = [
    ("array.write_empty_chunks", "no"),
    ("array.write_empty_chunks", "false"),
    ("array.write_empty_chunks", 2),
    ("array.write_empty_chunks", None),
    ("array.order", "X"),
    ("array.order", "c "),
    ("array.order", 0),
    ("array.default_compressor", "nonsense"),
    ("array.default_compressor", 5),
    ("threading.max_workers", "abc"),
    ("threading.max_workers", -3),
    ("threading.max_workers", 0),
    ("threading.max_workers", 2.5),
    ("threading.max_workers", True),
]


@pytest.mark.parametrize("key,value", BAD, ids=repr)
def test_bad_value_refused_at_set_naming_the_key(key, value):
    before = cs.config.get(key)
    with pytest.raises((ValueError, TypeError)) as info:
        cs.config.set({key: value})
    assert key in str(info.value)
    assert cs.config.get(key) == before


@pytest.mark.parametrize("value", ["no", "false", "0", "off"])
def test_write_empty_chunks_string_is_not_silently_true(value):
    """``config.set({"array.write_empty_chunks": "no"})`` must not store empty chunks:
    either it is refused or it means False."""
    try:
        restore = cs.config.set({"array.write_empty_chunks": value})
    except (ValueError, TypeError) as e:
        assert "array.write_empty_chunks" in str(e)
        return
    with restore:
        d = {}
        a = cs.create_array(d, shape=(6,), chunks=(2,), dtype="i4", fill_value=0)
        a[...] = 0
        a[2:4] = 5
        assert sorted(k for k in d if k.startswith("c/")) == ["c/1"]
        np.testing.assert_array_equal(a[...], [0, 0, 5, 5, 0, 0])


@pytest.mark.parametrize("key,good", [("array.write_empty_chunks", True),
                                      ("array.order", "F"),
                                      ("array.default_compressor", None),
                                      ("threading.max_workers", 3)])
def test_good_values_accepted_and_used(key, good):
    with cs.config.set({key: good}):
        assert cs.config.get(key) == good
        d = {}
        a = cs.create_array(d, shape=(6, 4), chunks=(3, 2), dtype="i4", fill_value=0,
                            zarr_format=2 if key == "array.order" else 3)
        a[...] = np.arange(24).reshape(6, 4)
        np.testing.assert_array_equal(a[...], np.arange(24).reshape(6, 4))


def test_unknown_key_and_kwargs_spelling():
    with pytest.raises(KeyError, match="cache.chunk_byte"):
        cs.config.set({"cache.chunk_byte": 10})
    with cs.config.set(cache__chunk_bytes="1KiB"):
        assert cs.config.get("cache.chunk_bytes") == 1024
    assert cs.config.get("cache.chunk_bytes") == 0
    with pytest.raises(ValueError, match="cache.chunk_bytes"):
        cs.config.set(cache__chunk_bytes="lots")


def test_nested_set_restores_in_order():
    with cs.config.set({"cache.chunk_bytes": "1MiB"}):
        with cs.config.set({"cache.chunk_bytes": "2MiB", "threading.write_bytes": 4096}):
            assert cs.config.get("cache.chunk_bytes") == 2 * 2**20
        assert cs.config.get("cache.chunk_bytes") == 2**20
        assert cs.config.get("threading.write_bytes") == 32 * 2**20
    assert cs.config.get("cache.chunk_bytes") == 0
