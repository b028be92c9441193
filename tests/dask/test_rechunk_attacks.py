"""Red team, round 4: the Dask layer (``chunkstore/dask``): transpose / rechunk with edge
chunks, non-divisible shapes, every 3-D permutation, sharded targets, tiny ``max_mem``
(several stages), and writing onto the source itself (must refuse, the source intact)
through other spellings of the same place; ``to_store(x, url, storage_options=...)``.

Every result is compared with NumPy; the source is re-read uncached after refusals.
"""

from __future__ import annotations

import copy
import itertools
import os
import uuid

import dask
import dask.array as da
import numpy as np
import pytest

import chunkstore as cs
import chunkstore.dask as csd
from chunkstore.errors import SameLocationError


@pytest.fixture(autouse=True)
def threaded():
    with dask.config.set(scheduler="threads", num_workers=2):
        yield


def _uid() -> str:
    return uuid.uuid4().hex[:12]


DATA = np.arange(7 * 5 * 6, dtype="i4").reshape(7, 5, 6) * 3 - 100


@pytest.mark.parametrize("axes", list(itertools.permutations(range(3))) + [None, (-1, 0, -2)],
                         ids=str)
def test_transpose_every_permutation_edge_chunks(axes):
    src = cs.create_array({}, shape=DATA.shape, chunks=(3, 2, 4), dtype="i4", fill_value=-1)
    src[...] = DATA
    src[6, 4, 5] = -1  # a fill-valued element in the last edge chunk
    expected = np.transpose(src[...], axes)
    out = csd.transpose(src, axes, cs.MemoryStore(), max_mem="64KiB")
    assert out.shape == expected.shape
    np.testing.assert_array_equal(out[...], expected)


@pytest.mark.parametrize("chunks,shards", [((2, 3, 1), (4, 3, 5)), ((1, 1, 1), (7, 5, 6)),
                                           ((4, 4, 4), (4, 4, 4))])
def test_transpose_into_sharded_target_with_tiny_max_mem(chunks, shards):
    src = cs.create_array({}, shape=DATA.shape, chunks=(7, 1, 5), dtype="i4",
                          compressors={"name": "zstd", "configuration": {"level": 1}})
    src[...] = DATA
    axes = (2, 0, 1)
    expected = np.transpose(DATA, axes)
    out = csd.transpose(src, axes, cs.MemoryStore(), chunks=chunks, shards=shards,
                        max_mem="4KiB")
    np.testing.assert_array_equal(out[...], expected)
    assert out.chunks == chunks
    # zarr-python reads the sharded result the same
    zarr = pytest.importorskip("zarr")
    store = zarr.storage.MemoryStore({k: zarr.core.buffer.cpu.Buffer.from_bytes(
        out.store.get(k)) for k in out.store.list_prefix("")})
    np.testing.assert_array_equal(zarr.open_array(store, mode="r")[...], expected)


@pytest.mark.parametrize("target", [(1, 5, 6), (7, 1, 1), (5, 4, 3), (None, 2, -1),
                                    {0: 2, -1: 5}])
def test_rechunk_non_divisible_multi_stage(target):
    src = cs.create_array({}, shape=DATA.shape, chunks=(1, 5, 1), dtype="i4", zarr_format=2)
    src[...] = DATA
    plan = csd.rechunk(src, target, cs.MemoryStore(), max_mem="2KiB")
    out = plan.execute()
    np.testing.assert_array_equal(out[...], DATA)
    assert out.zarr_format == 2


def test_rechunk_fill_only_source_writes_no_chunks():
    src = cs.create_array({}, shape=(9, 8), chunks=(2, 3), dtype="f8", fill_value=np.nan)
    out = csd.rechunk(src, (4, 4), cs.MemoryStore(), max_mem="1MiB").execute()
    assert np.isnan(out[...]).all()
    assert [k for k in out.store.list_prefix("") if "/c/" in "/" + k] == []


# -- onto the source itself, spelled differently -------------------------------------------
def _local_spellings(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(real, tmp_path / "link")
    return {
        "same": (str(real / "src.zarr"), None),
        "symlink": (str(tmp_path / "link" / "src.zarr"), None),
        "file-url": ("file://" + str(real / "src.zarr"), None),
        "dot": (str(real / "." / "src.zarr"), None),
        "parent-group": (str(tmp_path / "link"), "src.zarr"),
    }


OPS = {
    "rechunk": lambda src, where, path, opts: csd.rechunk(
        src, (2, 2), where, path, overwrite=True, max_mem="1MiB",
        **({"storage_options": opts} if opts else {})).execute(),
    "transpose": lambda src, where, path, opts: csd.transpose(
        src, (1, 0), where, path, overwrite=True, max_mem="1MiB",
        **({"storage_options": opts} if opts else {})),
    "copy": lambda src, where, path, opts: cs.copy(src, where, path, overwrite=True,
                                                   storage_options=opts),
    "to_store": lambda src, where, path, opts: csd.to_store(
        csd.from_store(src) + 1, where, path, overwrite=True, storage_options=opts),
}


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("spelling", ["same", "symlink", "file-url", "dot", "parent-group"])
def test_onto_itself_local_refused_source_intact(tmp_path, op, spelling):
    where, path = _local_spellings(tmp_path)[spelling]
    data = np.arange(24, dtype="i4").reshape(6, 4)
    src = cs.create_array(str(tmp_path / "real" / "src.zarr"), shape=(6, 4), chunks=(3, 3),
                          dtype="i4")
    src[...] = data
    with pytest.raises(SameLocationError):
        OPS[op](src, where, path, None)
    np.testing.assert_array_equal(
        cs.open_array(str(tmp_path / "real" / "src.zarr"), mode="r", cache=0)[...], data)


def _s3_spellings(url, options):
    endpoint = options["client_kwargs"]["endpoint_url"]
    slash = copy.deepcopy(options)
    slash["client_kwargs"]["endpoint_url"] = endpoint + "/"
    return {
        "same": (url, options),
        "endpoint-trailing-slash": (url, slash),
        "s3a-scheme": (url.replace("s3://", "s3a://"), options),
    }


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("spelling", ["same", "endpoint-trailing-slash", "s3a-scheme"])
def test_onto_itself_on_s3_refused_source_intact(s3_bucket_both, op, spelling):
    """The same S3 objects reached with ``s3a://`` or with a trailing slash on the
    endpoint URL are the same place: an ``overwrite=True`` copy / rechunk / transpose
    / to_store there must be refused like the plain spelling, not delete the source
    before reading it. (Each S3 backend: the options name it.)"""
    url, options = s3_bucket_both
    where = url + "/src.zarr"
    data = np.arange(24, dtype="i4").reshape(6, 4)
    src = cs.create_array(where, shape=(6, 4), chunks=(3, 3), dtype="i4",
                          storage_options=options, fill_value=0)
    src[...] = data
    other_url, other_options = _s3_spellings(url, options)[spelling]
    try:
        OPS[op](src, other_url + "/src.zarr", None, other_options)
    except SameLocationError:
        pass
    np.testing.assert_array_equal(
        cs.open_array(where, mode="r", storage_options=options, cache=0)[...], data)


# -- to_store with storage_options ------------------------------------------------------------
@pytest.mark.parametrize("backend", ["fsspec", "obstore"])
def test_to_store_s3_url_with_storage_options_exact(s3_bucket, backend):
    if backend == "obstore":
        pytest.importorskip("obstore")
    url, options = s3_bucket
    data = np.arange(11 * 13, dtype="f4").reshape(11, 13) / 7
    x = da.from_array(data, chunks=(4, 5))
    where = url + f"/out-{backend}.zarr"
    opts = {**options, "backend": backend}
    out = csd.to_store(x, where, chunks=(3, 6), shards=(6, 12), storage_options=opts)
    np.testing.assert_array_equal(out[...], data)
    np.testing.assert_array_equal(
        cs.open_array(where, mode="r", storage_options=options, cache=0)[...], data)
    # a region write into the existing array, unaligned, through the URL again
    y = da.from_array(-np.ones((5, 7), "f4"), chunks=(2, 3))
    csd.to_store(y, where, region=(slice(3, 8), slice(2, 9)), storage_options=opts)
    expected = data.copy()
    expected[3:8, 2:9] = -1
    np.testing.assert_array_equal(
        cs.open_array(where, mode="r", storage_options=opts, cache=0)[...], expected)


def test_to_store_memory_url_storage_options_refused_or_used():
    where = f"memory://rt4-{_uid()}/x"
    data = np.arange(10, dtype="i2")
    out = csd.to_store(da.from_array(data, chunks=3), where, chunks=(4,),
                       storage_options={"skip_instance_cache": False})
    np.testing.assert_array_equal(out[...], data)
    np.testing.assert_array_equal(cs.open_array(where, mode="r", cache=0)[...], data)


def test_transpose_s3_to_s3_with_storage_options(s3_bucket):
    url, options = s3_bucket
    src = cs.create_array(url + "/t.zarr", shape=(5, 3, 4), chunks=(2, 2, 3), dtype="u2",
                          storage_options=options)
    data = np.arange(60, dtype="u2").reshape(5, 3, 4)
    src[...] = data
    out = csd.transpose(src, (1, 2, 0), url + "/tt.zarr", max_mem="1KiB",
                        storage_options={**options, "backend": "obstore"}
                        if _has_obstore() else options)
    np.testing.assert_array_equal(out[...], np.transpose(data, (1, 2, 0)))
    np.testing.assert_array_equal(
        cs.open_array(url + "/tt.zarr", mode="r", storage_options=options, cache=0)[...],
        np.transpose(data, (1, 2, 0)))


def _has_obstore() -> bool:
    try:
        import obstore  # noqa: F401
    except ImportError:
        return False
    return True
