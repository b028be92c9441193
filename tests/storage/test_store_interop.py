"""ZipStore and FsspecStore (S3 on moto) against zarr-python in both directions, and
``resolve_store``."""

from __future__ import annotations

import zipfile
from collections import OrderedDict
from types import MappingProxyType

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.storage import FsspecStore, LocalStore, MemoryStore, ZipStore
from chunkstore.storage.obstore.setup import available as obstore_available
from chunkstore.storage.resolve import resolve_store

zarr = pytest.importorskip("zarr")

RNG = np.random.default_rng(42)
DATA_A = RNG.standard_normal((37, 23)).astype("f4")
DATA_B = np.arange(100, dtype="i8").reshape(10, 10)


def write_with_chunkstore(store, zarr_format: int) -> None:
    a = cs.create_array(store, name="g/a", shape=DATA_A.shape, dtype="f4", chunks=(8, 10),
                        zarr_format=zarr_format, attributes={"units": "m"})
    a[:] = DATA_A
    b = cs.create_array(a.store, name="g/sub/b", shape=DATA_B.shape, dtype="i8", chunks=(4, 4),
                        zarr_format=zarr_format, fill_value=-1)
    b[:6] = DATA_B[:6]
    a.store.close()


def check_with_zarr(group) -> None:
    np.testing.assert_array_equal(group["g/a"][:], DATA_A)
    assert dict(group["g/a"].attrs) == {"units": "m"}
    expected = DATA_B.copy()
    expected[6:] = -1
    np.testing.assert_array_equal(group["g/sub/b"][:], expected)


def write_with_zarr(store, zarr_format: int) -> None:
    root = zarr.open_group(store, mode="w", zarr_format=zarr_format)
    a = root.create_array("g/a", shape=DATA_A.shape, dtype="f4", chunks=(8, 10),
                          attributes={"units": "m"})
    a[:] = DATA_A
    b = root.create_array("g/sub/b", shape=DATA_B.shape, dtype="i8", chunks=(4, 4),
                          fill_value=-1)
    b[:6] = DATA_B[:6]


def check_with_chunkstore(store) -> None:
    a = cs.open_array(store, mode="r", path="g/a")
    np.testing.assert_array_equal(a[:], DATA_A)
    assert dict(a.attrs) == {"units": "m"}
    expected = DATA_B.copy()
    expected[6:] = -1
    np.testing.assert_array_equal(cs.open_array(store, mode="r", path="g/sub/b")[:], expected)


# -- zip ----------------------------------------------------------------------------------
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_zip_chunkstore_to_zarr(tmp_path, zarr_format):
    path = tmp_path / "cs.zip"
    write_with_chunkstore(str(path), zarr_format)
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        assert zf.testzip() is None and len(names) == len(set(names))
    zstore = zarr.storage.ZipStore(path, mode="r")
    try:
        check_with_zarr(zarr.open_group(zstore, mode="r", zarr_format=zarr_format))
    finally:
        zstore.close()


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_zip_zarr_to_chunkstore(tmp_path, zarr_format):
    path = tmp_path / "zarr.zip"
    zstore = zarr.storage.ZipStore(path, mode="w")
    write_with_zarr(zstore, zarr_format)
    zstore.close()
    check_with_chunkstore(str(path))  # resolved to a read-only ZipStore
    with ZipStore(path) as z:
        check_with_chunkstore(z)


def test_zip_append_array_to_zarr_written_archive(tmp_path):
    path = tmp_path / "mixed.zip"
    zstore = zarr.storage.ZipStore(path, mode="w")
    write_with_zarr(zstore, 3)
    zstore.close()
    with ZipStore(path, mode="a") as z:
        a = cs.open_array(z, path="g/a")
        a[0, :] = 7  # rewrites chunks zarr-python wrote: superseded entries are compacted
        cs.create_array(z, name="extra", shape=(3,), dtype="u1", fill_value=5)
    zstore = zarr.storage.ZipStore(path, mode="r")
    try:
        root = zarr.open_group(zstore, mode="r")
        expected = DATA_A.copy()
        expected[0, :] = 7
        np.testing.assert_array_equal(root["g/a"][:], expected)
        np.testing.assert_array_equal(root["extra"][:], [5, 5, 5])
    finally:
        zstore.close()
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        assert len(names) == len(set(names))


# -- S3 -----------------------------------------------------------------------------------
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_s3_chunkstore_to_zarr(s3_bucket, zarr_format):
    url, options = s3_bucket
    write_with_chunkstore(FsspecStore(url + "/x.zarr", storage_options=options), zarr_format)
    zstore = zarr.storage.FsspecStore.from_url(url + "/x.zarr", storage_options=options,
                                               read_only=True)
    check_with_zarr(zarr.open_group(zstore, mode="r", zarr_format=zarr_format))


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_s3_zarr_to_chunkstore(s3_bucket, zarr_format):
    url, options = s3_bucket
    zstore = zarr.storage.FsspecStore.from_url(url + "/z.zarr", storage_options=options)
    write_with_zarr(zstore, zarr_format)
    check_with_chunkstore(FsspecStore(url + "/z.zarr", storage_options=options))


@pytest.mark.parametrize("backend", [None, "fsspec", "obstore"])
def test_s3_create_array_by_url(s3_bucket, backend):
    """Both S3 backends (None: the default, obstore when installed) against zarr-python
    (which reads and writes through s3fs)."""
    if backend == "obstore":
        pytest.importorskip("obstore")
    url, options = s3_bucket
    ours = {**options, "backend": backend} if backend else options
    data = np.arange(60, dtype="f8").reshape(6, 10)
    a = cs.create_array(url + "/x.zarr", shape=data.shape, dtype="f8", chunks=(4, 4),
                        storage_options=ours)
    expected = backend or ("obstore" if obstore_available() else "fsspec")
    assert a.store.backend == expected
    assert isinstance(a.store, FsspecStore) == (expected == "fsspec")
    a[:] = data
    back = zarr.open_array(url + "/x.zarr", mode="r", storage_options=options)
    np.testing.assert_array_equal(back[:], data)
    z = zarr.create_array(url + "/y.zarr", shape=(5,), dtype="i2", chunks=(2,),
                          storage_options=options)
    z[:] = [1, 2, 3, 4, 5]
    mine = cs.open_array(url + "/y.zarr", mode="r", storage_options=ours)
    assert mine.store.backend == expected
    np.testing.assert_array_equal(mine[:], [1, 2, 3, 4, 5])
    np.testing.assert_array_equal(
        cs.open(url + "/y.zarr", mode="r", storage_options=ours)[1:3], [2, 3])


# -- resolve_store --------------------------------------------------------------------------
def test_resolve_store_kinds(tmp_path):
    assert isinstance(resolve_store(None), MemoryStore)
    mem = MemoryStore()
    assert resolve_store(mem) is mem
    ro = resolve_store(mem, mode="r")
    assert ro.read_only and not mem.read_only
    local = resolve_store(tmp_path / "x.zarr")
    assert isinstance(local, LocalStore) and not local.read_only
    assert resolve_store(str(tmp_path / "x.zarr"), mode="r").read_only
    url = resolve_store("memory://resolve-test", storage_options={"skip_instance_cache": False})
    assert isinstance(url, FsspecStore) and url.storage_options == {"skip_instance_cache": False}
    assert resolve_store(f"file://{tmp_path}/y.zarr", mode="r").read_only


@pytest.mark.parametrize("mode, zip_mode", [("r", "r"), ("w", "a"), ("a", "a"), ("r+", "a"),
                                            ("w-", "a")])
def test_resolve_store_zip_modes(tmp_path, mode, zip_mode):
    """Every mode but "r" appends: "w" overwrites the node opened (which the hierarchy
    deletes), never the archive's other entries (tests/storage/zip/test_zip_overwrite_node.py)."""
    path = tmp_path / "x.ZIP"
    with ZipStore(path, mode="w") as z:
        z.set("k", b"v")
    st = resolve_store(str(path), mode=mode)
    assert isinstance(st, ZipStore) and st.mode == zip_mode
    assert st.read_only == (mode == "r")
    assert st.get("k") == b"v"
    st.close()


def test_resolve_store_mappings_and_errors(tmp_path):
    backing: dict = {}
    st = resolve_store(backing)
    st.set("a", b"1")
    assert backing == {"a": b"1"}
    assert resolve_store(OrderedDict(a=b"1"), mode="r").read_only
    frozen = resolve_store(MappingProxyType({"a": b"1"}))  # not mutable: read-only
    assert frozen.read_only and frozen.get("a") == b"1"
    with pytest.raises(TypeError, match="int"):
        resolve_store(42)
    with pytest.raises(TypeError, match="storage_options"):
        resolve_store(str(tmp_path / "x.zarr"), storage_options={"anon": True})


def test_zip_chained_url_reads_through_fsspec(tmp_path):
    path = tmp_path / "chain.zip"
    write_with_chunkstore(str(path), 3)
    st = resolve_store(f"zip::file://{path}", mode="r")
    assert isinstance(st, FsspecStore) and st.read_only
    assert sorted(st.list_dir("g")) == ["a", "sub", "zarr.json"]
    check_with_chunkstore(st)


def test_zip_store_by_path_in_the_api(tmp_path):
    path = str(tmp_path / "api.zip")
    a = cs.create_array(path, shape=(4,), dtype="i4", chunks=(2,))
    assert isinstance(a.store, ZipStore)
    a[:] = [1, 2, 3, 4]
    a.store.close()
    np.testing.assert_array_equal(cs.open_array(path, mode="r")[:], [1, 2, 3, 4])
