"""Fixes of red-team round 9 (arrays): shard indexes bounded by what they index, errors
of codec resolution named by document and field."""

from __future__ import annotations

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.codecs.sharding import MAX_INDEX_FLOOR_BYTES
from chunkstore.errors import CodecError


def test_an_index_larger_than_its_shard_is_fine_below_the_floor(tmp_path):
    """65,536 inner chunks of one byte: a 1 MiB index for 64 KiB of data (legal, and
    what zarr-python writes too), below ``MAX_INDEX_FLOOR_BYTES``."""
    a = cs.create_array(str(tmp_path / "a.zarr"), shape=(256, 256), chunks=(1, 1),
                        shards=(256, 256), dtype="u1", compressors=None)
    a[3, 4:7] = [1, 2, 3]
    expect = np.zeros((256, 256), "u1")
    expect[3, 4:7] = [1, 2, 3]
    np.testing.assert_array_equal(cs.open_array(str(tmp_path / "a.zarr"))[...], expect)
    assert 16 * 256 * 256 < MAX_INDEX_FLOOR_BYTES


def test_an_index_beyond_its_shard_and_the_floor_is_refused_before_anything_is_made(tmp_path):
    where = tmp_path / "b.zarr"
    with pytest.raises(CodecError, match=r"8388608 inner chunks.*134217732 bytes.*larger "
                                         r"inner chunks"):
        cs.create_array(str(where), shape=(4096, 2048), chunks=(1, 1), shards=(4096, 2048),
                        dtype="u1", compressors=None)
    assert not where.exists() or not any(where.iterdir())


def test_resolution_errors_name_the_document_and_the_field(tmp_path):
    import json
    root = tmp_path / "c.zarr"
    root.mkdir()
    inner = [{"name": "sharding_indexed", "configuration": {"chunk_shape": [3, 3]}}]
    doc = {"zarr_format": 3, "node_type": "array", "shape": [8, 8], "data_type": "uint8",
           "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [8, 8]}},
           "chunk_key_encoding": {"name": "default"}, "fill_value": 0, "attributes": {},
           "codecs": [{"name": "sharding_indexed",
                       "configuration": {"chunk_shape": [4, 4], "codecs": inner}}]}
    (root / "zarr.json").write_text(json.dumps(doc))
    with pytest.raises(CodecError) as e:
        cs.open_array(str(root), mode="r")[...]
    assert str(e.value).startswith(f"{root / 'zarr.json'}: field 'codecs': codec "
                                   "'sharding_indexed': field 'codecs': codec "
                                   "'sharding_indexed': the shard shape [4, 4] must be")


@pytest.mark.parametrize("zarr_format", [2, 3])
@pytest.mark.parametrize("codec, field", [
    (lambda: __import__("numcodecs").Blosc(shuffle=7), "shuffle"),
    (lambda: __import__("numcodecs").Blosc(blocksize=2**40), "blocksize"),
    (lambda: __import__("numcodecs").Zstd(level=100), "level"),
    (lambda: __import__("numcodecs").Zstd(level=-200000), "level"),
], ids=["blosc-shuffle-7", "blosc-blocksize-2**40", "zstd-100", "zstd-minus-200000"])
def test_out_of_range_compressors_are_refused_at_creation(tmp_path, zarr_format, codec, field):
    where = tmp_path / "d.zarr"
    with pytest.raises(CodecError, match=field):
        cs.create_array(str(where), shape=(8,), chunks=(4,), dtype="i4",
                        compressors=codec(), zarr_format=zarr_format)
    assert not (where / "zarr.json").exists() and not (where / ".zarray").exists()


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_autoshuffle_and_negative_zstd_levels_still_work(tmp_path, zarr_format):
    import numcodecs
    x = np.arange(64, dtype="u1")
    for i, codec in enumerate([numcodecs.Blosc(shuffle=-1), numcodecs.Zstd(level=-5),
                               numcodecs.Zstd(level=22)]):
        a = cs.create_array(str(tmp_path / f"e{i}.zarr"), shape=x.shape, chunks=(16,),
                            dtype="u1", compressors=codec, zarr_format=zarr_format)
        a[:] = x
        np.testing.assert_array_equal(cs.open_array(str(tmp_path / f"e{i}.zarr"))[:], x)


def test_copy_keeps_shards_between_v3_arrays_unless_told(tmp_path):
    src = cs.create_array(str(tmp_path / "s.zarr"), shape=(12, 10), chunks=(2, 5),
                          shards=(6, 10), dtype="i2", fill_value=-1)
    src[:] = np.arange(120, dtype="i2").reshape(12, 10)
    same = cs.copy(src, str(tmp_path / "c.zarr"))
    assert (same.chunks, same.shards) == ((2, 5), (6, 10))
    np.testing.assert_array_equal(same[...], src[...])
    v2 = cs.copy(src, str(tmp_path / "v2.zarr"), zarr_format=2)
    assert (v2.chunks, v2.shards) == ((2, 5), None)
    other = cs.copy(src, str(tmp_path / "o.zarr"), chunks=(4, 4))
    assert (other.chunks, other.shards) == ((4, 4), None)
    np.testing.assert_array_equal(other[...], src[...])
