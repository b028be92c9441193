"""Red team, round 4: the obstore S3 backend on a real moto server (tests/conftest.py's
``s3_bucket``; nothing mocked): write / read / overwrite / delete exactness compared with
NumPy and with the bytes the fsspec backend and zarr-python see, partial writes into
existing chunks and shards, the backend chosen by ``CHUNKSTORE_S3_BACKEND``, resize and
``write_empty_chunks`` deleting objects, and four processes writing unaligned regions.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("obstore")
# (no module-level import of moto.server: the s3_bucket fixture skips without it, and the
# writer processes, which import this module, start ~0.5 s sooner)

import chunkstore as cs  # noqa: E402
from chunkstore.storage import FsspecStore  # noqa: E402
from chunkstore.storage.obstore.store import ObstoreStore  # noqa: E402
from tests.multiproc import run_together  # noqa: E402

ZSTD = {"name": "zstd", "configuration": {"level": 1, "checksum": False}}


def _ob(options):
    return {**options, "backend": "obstore"}


def _fs(options):
    """The fsspec backend, named (obstore is the default of s3:// URLs when installed)."""
    return {**options, "backend": "fsspec"}


def _keys(url, options, prefix):
    st = FsspecStore(url, options)
    return sorted(k for k in st.list_prefix(prefix))


@pytest.mark.parametrize("layout", ["plain", "sharded", "v2"])
@pytest.mark.parametrize("compressors", [None, ZSTD])
def test_partial_writes_into_existing_chunks_exact(s3_bucket, layout, compressors):
    url, options = s3_bucket
    where = f"{url}/p-{layout}.zarr"
    kw = {"zarr_format": 2, "compressor": None if compressors is None else
          {"id": "zstd", "level": 1}} if layout == "v2" else {"compressors": compressors}
    if layout == "sharded":
        kw["shards"] = (6, 8)
    a = cs.create_array(where, shape=(11, 13), chunks=(3, 4), dtype="<i4", fill_value=-1,
                        storage_options=_ob(options), cache=0, **kw)
    assert isinstance(a.store, ObstoreStore)
    expected = np.full((11, 13), -1, "<i4")
    rng = np.random.default_rng(4)
    for _ in range(6):  # random unaligned boxes over existing chunks
        r0, c0 = rng.integers(0, 10), rng.integers(0, 12)
        r1, c1 = rng.integers(r0 + 1, 12), rng.integers(c0 + 1, 14)
        value = rng.integers(-1000, 1000, size=(r1 - r0, c1 - c0)).astype("<i4")
        a[r0:r1, c0:c1] = value
        expected[r0:r1, c0:c1] = value
        np.testing.assert_array_equal(a[...], expected)
    a[2::3, 1::5] = 77  # strided single elements in many chunks
    expected[2::3, 1::5] = 77
    np.testing.assert_array_equal(a[...], expected)
    # the fsspec backend and zarr-python read the same objects the same
    np.testing.assert_array_equal(
        cs.open_array(where, mode="r", storage_options=_fs(options), cache=0)[...], expected)
    zarr = pytest.importorskip("zarr")
    z = zarr.open_array(where, mode="r", storage_options=options)
    np.testing.assert_array_equal(z[...], expected)


def test_overwrite_recreate_and_delete_leave_exact_objects(s3_bucket):
    url, options = s3_bucket
    where = f"{url}/g"
    g = cs.group(where, storage_options=_ob(options))
    a = g.create_array("x", shape=(10,), chunks=(3,), dtype="f8", fill_value=0.0)
    a[...] = np.arange(10.0) + 1
    assert _keys(url, options, "g/x/") == ["g/x/c/0", "g/x/c/1", "g/x/c/2", "g/x/c/3",
                                          "g/x/zarr.json"]
    a[3:6] = 0.0  # chunk c/1 becomes all fill: deleted
    assert "g/x/c/1" not in _keys(url, options, "g/x/")
    a.resize((4,))  # c/2, c/3 outside: deleted; c/1 cut (empty)
    assert _keys(url, options, "g/x/") == ["g/x/c/0", "g/x/zarr.json"]
    a.resize((10,))
    expected = np.zeros(10)
    expected[:3] = [1, 2, 3]
    np.testing.assert_array_equal(a[...], expected)
    # re-created with another dtype and chunks: nothing of the old array shows
    b = g.create_array("x", shape=(5,), chunks=(5,), dtype="i2", fill_value=9,
                       overwrite=True)
    assert _keys(url, options, "g/x/") == ["g/x/zarr.json"]
    np.testing.assert_array_equal(b[...], np.full(5, 9, "i2"))
    b[1:3] = [4, 5]
    np.testing.assert_array_equal(
        cs.open_array(where + "/x", mode="r", storage_options=_fs(options), cache=0)[...],
        [9, 4, 5, 9, 9])
    del g["x"]
    assert _keys(url, options, "g/x") == []
    assert "x" not in [name for name, _ in g.members()]


def test_backend_from_environment_variable(s3_bucket, monkeypatch):
    url, options = s3_bucket
    monkeypatch.setenv("CHUNKSTORE_S3_BACKEND", "obstore")
    a = cs.create_array(f"{url}/env.zarr", shape=(7,), chunks=(2,), dtype="u1",
                        storage_options=options)
    assert isinstance(a.store, ObstoreStore)
    a[...] = np.arange(7)
    a[1:6] = 200
    monkeypatch.setenv("CHUNKSTORE_S3_BACKEND", "fsspec")
    r = cs.open_array(f"{url}/env.zarr", mode="r", storage_options=options, cache=0)
    assert isinstance(r.store, FsspecStore)
    np.testing.assert_array_equal(r[...], [0, 200, 200, 200, 200, 200, 6])
    monkeypatch.setenv("CHUNKSTORE_S3_BACKEND", "bogus")
    with pytest.raises(Exception, match="bogus"):
        cs.open_array(f"{url}/env.zarr", mode="r", storage_options=options)


def test_write_empty_chunks_and_fill_nan_on_obstore(s3_bucket):
    url, options = s3_bucket
    where = f"{url}/nan.zarr"
    a = cs.create_array(where, shape=(12,), chunks=(4,), dtype="f4", fill_value=np.nan,
                        storage_options=_ob(options), compressors=None)
    a[...] = np.nan
    assert _keys(url, options, "nan.zarr/c") == []
    a[5] = 1.5
    assert _keys(url, options, "nan.zarr/c") == ["nan.zarr/c/1"]
    a[5] = np.nan
    assert _keys(url, options, "nan.zarr/c") == []
    with cs.config.set({"array.write_empty_chunks": True}):
        w = cs.open_array(where, mode="r+", storage_options=_ob(options))
        w[...] = np.nan
    assert _keys(url, options, "nan.zarr/c") in ([], ["nan.zarr/c/0", "nan.zarr/c/1",
                                                      "nan.zarr/c/2"])
    assert np.isnan(a[...]).all()


def _unaligned_writer(where, options, k, start):
    a = cs.open_array(where, mode="r+", storage_options=_ob(options), cache=0)
    start.wait()
    for r in range(3):
        a[k::4] = 10 * (r + 1) + k  # every chunk and shard touched by every process
    import os
    import sys
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@pytest.mark.parametrize("sharded", [False, True])
def test_four_processes_unaligned_elements_exact(s3_bucket, sharded):
    url, options = s3_bucket
    where = f"{url}/mp-{sharded}.zarr"
    kw = {"shards": (30,)} if sharded else {}
    cs.create_array(where, shape=(60,), chunks=(5,), dtype="i4", fill_value=0,
                    storage_options=_ob(options), compressors=ZSTD, **kw)
    run_together(_unaligned_writer, lambda k: (where, options, k), n=4, timeout=240)
    expected = (30 + np.arange(60) % 4).astype("i4")
    np.testing.assert_array_equal(
        cs.open_array(where, mode="r", storage_options=_ob(options), cache=0)[...], expected)
    np.testing.assert_array_equal(
        cs.open_array(where, mode="r", storage_options=_fs(options), cache=0)[...], expected)
