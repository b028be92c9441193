"""Red team round 5: S3 through both backends (obstore, the default of s3:// URLs, and
fsspec). Keys with characters that URL encodings treat specially name one object on
both backends (written by one, read and updated by the other); legitimate incompressible
chunks (the largest encodings the bounds must allow) cross backends exactly, also with
read-modify-writes; a pickled array keeps its backend and place."""

from __future__ import annotations

import pickle

import numcodecs
import numpy as np
import pytest

import chunkstore as cs

pytest.importorskip("obstore")


@pytest.mark.parametrize("name", ["my data.zarr", "a%20b.zarr", "x+y.zarr", "caf\u00e9.zarr",
                                  "q=1&r.zarr", "star*.zarr"])
def test_odd_key_names_are_one_object_on_both_backends(s3_bucket, name):
    url, options = s3_bucket
    url = f"{url}/{name}"
    ob, fs = {**options, "backend": "obstore"}, {**options, "backend": "fsspec"}
    a = cs.create_array(url, storage_options=ob, shape=(4,), chunks=(2,), dtype="i4")
    a[:] = np.arange(4)
    b = cs.open_array(url, storage_options=fs, mode="r+", cache=0)
    assert b[:].tolist() == [0, 1, 2, 3]
    b[0] = 9
    assert cs.open_array(url, storage_options=ob, mode="r", cache=0)[:].tolist() == [9, 1, 2, 3]
    assert a.store.location() == b.store.location()


@pytest.mark.parametrize("writer", ["obstore", "fsspec"])
@pytest.mark.parametrize("layout", ["zstd", "raw", "v2-bz2", "sharded-gzip"])
def test_incompressible_chunks_cross_backends_exactly(s3_bucket, writer, layout):
    url, options = s3_bucket
    url += "/r.zarr"
    kw = {"zstd": {"compressors": cs.codecs.ZstdCodec(level=-3)},
          "raw": {"compressors": None},
          "v2-bz2": {"zarr_format": 2, "compressors": numcodecs.BZ2(1)},
          "sharded-gzip": {"shards": (64, 128), "compressors": cs.codecs.GzipCodec(1)}}[layout]
    reader = "fsspec" if writer == "obstore" else "obstore"
    data = np.random.default_rng(2).integers(0, 2**63, (100, 128), dtype=np.uint64)
    a = cs.create_array(url, storage_options={**options, "backend": writer}, shape=data.shape,
                        chunks=(32, 64), dtype="u8", **kw)
    a[...] = data
    b = cs.open_array(url, storage_options={**options, "backend": reader}, mode="r+", cache=0)
    np.testing.assert_array_equal(b[...], data)
    np.testing.assert_array_equal(b[10:20, 100:], data[10:20, 100:])
    b[99, 127] = 1
    b[0, 0] = 2
    want = data.copy()
    want[99, 127], want[0, 0] = 1, 2
    back = cs.open_array(url, storage_options={**options, "backend": writer}, mode="r",
                         cache=0)
    np.testing.assert_array_equal(back[...], want)


def test_pickled_array_keeps_backend_and_place(s3_bucket):
    url, options = s3_bucket
    a = cs.create_array(url + "/p.zarr", storage_options=options, shape=(6,), chunks=(3,),
                        dtype="f8")
    a[:] = np.arange(6.0)
    assert a.store.backend == "obstore"
    b = pickle.loads(pickle.dumps(a))
    assert b.store.backend == "obstore" and b.store.location() == a.store.location()
    b[1] = -1.0
    assert a[:].tolist() == [0.0, -1.0, 2.0, 3.0, 4.0, 5.0]
