"""Red team, round 4: the decoded-chunk cache (``chunkstore/io/chunk_cache.py``).

New angles after round 3: the same files reached through other roots (a symlinked
directory, ``file://`` URLs, relative paths, S3 endpoint spellings and ``s3a://``), node
re-creation with other chunks / codecs / format at the same path of a store whose
entries are never revalidated (fsspec ``memory://``), the byte budget with
variable-length strings, and values a dict store holds that change in place.

Each test asserts the exact content (NumPy as the oracle).
"""

from __future__ import annotations

import copy
import os
import uuid

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.io.cache import chunk_cache
from chunkstore.io.cache.chunk_cache import ChunkCache
from tests.multiproc import context

CTX = context()


def _uid() -> str:
    return uuid.uuid4().hex[:12]


def _in_process(target, *args, timeout=180):
    p = CTX.Process(target=target, args=args)
    p.start()
    p.join(timeout)
    if p.exitcode is None:
        p.kill()
    assert p.exitcode == 0, f"child exit code {p.exitcode}"


# -- the same local files through other roots ------------------------------------------------
def _roots(tmp_path):
    real = tmp_path / "real" / "a.zarr"
    real.parent.mkdir()
    link = tmp_path / "link"
    os.symlink(tmp_path / "real", link)
    return {
        "absolute": str(real),
        "symlinked-dir": str(link / "a.zarr"),
        "file-url": "file://" + str(real),
        "file-url-via-link": "file://" + str(link / "a.zarr"),
        "dotted": str(tmp_path / "real" / "." / "a.zarr"),
    }


@pytest.mark.parametrize("reader", ["absolute", "symlinked-dir", "file-url",
                                    "file-url-via-link", "dotted"])
@pytest.mark.parametrize("writer", ["absolute", "symlinked-dir", "file-url", "relative"])
def test_local_writes_through_any_root_are_seen_by_cached_reader(tmp_path, monkeypatch,
                                                                  reader, writer):
    roots = _roots(tmp_path)
    shared = ChunkCache("1MiB")
    data = np.arange(7 * 5, dtype="i4").reshape(7, 5)
    a = cs.create_array(roots["absolute"], shape=(7, 5), chunks=(3, 2), dtype="i4",
                        fill_value=-1, cache=0)
    a[...] = data
    r = cs.open_array(roots[reader], mode="r", cache=shared)
    np.testing.assert_array_equal(r[...], data)  # every chunk cached now
    if writer == "relative":
        monkeypatch.chdir(tmp_path / "link")
        w = cs.open_array("a.zarr", mode="r+", cache=shared)
    else:
        w = cs.open_array(roots[writer], mode="r+", cache=shared)
    expected = data.copy()
    w[1:6, 1:4] = -5  # unaligned: read-modify-writes of 6 chunks
    expected[1:6, 1:4] = -5
    np.testing.assert_array_equal(r[...], expected)
    np.testing.assert_array_equal(r[2:4, 0:5], expected[2:4, 0:5])
    w.resize((2, 5))  # chunks outside deleted, the cut chunk cleared
    w.resize((7, 5))
    expected[2:] = -1
    np.testing.assert_array_equal(cs.open_array(roots[reader], mode="r", cache=shared)[...],
                                  expected)


def _write_through(where, value):
    a = cs.open_array(where, mode="r+", cache=0)
    a[1:7] = value


def test_process_writes_through_symlink_cached_reader_on_real_path(tmp_path):
    roots = _roots(tmp_path)
    a = cs.create_array(roots["absolute"], shape=(9,), chunks=(4,), dtype="f8",
                        compressors=None, cache="1MiB")
    a[...] = np.arange(9.0)
    np.testing.assert_array_equal(a[...], np.arange(9.0))
    expected = np.arange(9.0)
    for value in (1.5, 2.5):
        _in_process(_write_through, roots["symlinked-dir"], value)
        expected[1:7] = value
        np.testing.assert_array_equal(a[...], expected)


# -- S3: one bucket reached through equivalent spellings -----------------------------------
def _s3_variants(url, options):
    endpoint = options["client_kwargs"]["endpoint_url"]
    slash = copy.deepcopy(options)
    slash["client_kwargs"]["endpoint_url"] = endpoint + "/"
    return {
        "endpoint-trailing-slash": (url, slash),
        "s3a-scheme": (url.replace("s3://", "s3a://"), options),
        "endpoint-top-level": (url, {**{k: v for k, v in options.items()
                                        if k != "client_kwargs"}, "endpoint_url": endpoint}),
    }


@pytest.mark.parametrize("backend", ["fsspec", "obstore"])
@pytest.mark.parametrize("variant", ["endpoint-trailing-slash", "s3a-scheme",
                                     "endpoint-top-level"])
def test_s3_write_through_equivalent_url_invalidates_cache(s3_bucket, backend, variant):
    """A write through chunkstore in this process must be seen by every cached array on
    the same data: here the writer spells the same bucket with a trailing slash on the
    endpoint or the s3a:// scheme (both reach the same objects, as the uncached read
    shows), and the cached reader keeps serving the old chunks."""
    if backend == "obstore":
        pytest.importorskip("obstore")
    url, options = s3_bucket
    where = url + "/a.zarr"
    a = cs.create_array(where, shape=(8,), chunks=(4,), dtype="i4",
                        storage_options={**options, "backend": backend}, cache="1MiB")
    a[...] = 1
    np.testing.assert_array_equal(a[...], np.ones(8, "i4"))
    other_url, other_options = _s3_variants(url, options)[variant]
    b = cs.open_array(other_url + "/a.zarr", mode="r+",
                      storage_options={**other_options, "backend": backend}, cache=0)
    b[2:7] = 2
    expected = np.array([1, 1, 2, 2, 2, 2, 2, 1], "i4")
    np.testing.assert_array_equal(
        cs.open_array(where, mode="r", storage_options=options, cache=0)[...], expected)
    np.testing.assert_array_equal(a[...], expected)


# -- re-creation at the same path of a never-revalidated store -----------------------------
RECREATE = {
    "other-chunks": dict(shape=(12,), chunks=(3,), dtype="i4", fill_value=0),
    "other-codecs": dict(shape=(12,), chunks=(4,), dtype="i4", fill_value=0,
                         compressors={"name": "gzip", "configuration": {"level": 1}}),
    "no-compressor": dict(shape=(12,), chunks=(4,), dtype="i4", fill_value=0,
                          compressors=None),
    "zarr-v2-same-keys": dict(shape=(12,), chunks=(4,), dtype="i4", fill_value=0,
                              zarr_format=2, chunk_key_encoding={"name": "v2",
                                                                 "separator": "/"}),
    "other-fill": dict(shape=(12,), chunks=(4,), dtype="i4", fill_value=-9),
    "other-endianness": dict(shape=(12,), chunks=(4,), dtype=">i4", fill_value=0),
}


@pytest.mark.parametrize("how", sorted(RECREATE))
def test_recreate_with_other_layout_never_serves_old_chunks(how):
    root = f"memory://rt4-{_uid()}"
    shared = ChunkCache("1MiB")
    x = cs.create_array(root + "/x", shape=(12,), chunks=(4,), dtype="i4", fill_value=0,
                        chunk_key_encoding={"name": "default", "separator": "/"},
                        cache=shared)
    x[...] = np.arange(12) + 100
    np.testing.assert_array_equal(x[...], np.arange(12) + 100)
    kwargs = dict(RECREATE[how])
    if kwargs.get("zarr_format") == 2:
        kwargs.pop("chunk_key_encoding")
        kwargs["dimension_separator"] = "/"
    y = cs.create_array(root + "/x", overwrite=True, cache=shared, **kwargs)
    fill = kwargs["fill_value"]
    np.testing.assert_array_equal(y[...], np.full(12, fill, kwargs["dtype"]))
    y[5:9] = np.arange(4) - 50
    expected = np.full(12, fill, kwargs["dtype"])
    expected[5:9] = np.arange(4) - 50
    np.testing.assert_array_equal(y[...], expected)
    np.testing.assert_array_equal(cs.open_array(root + "/x", cache=shared)[...], expected)
    np.testing.assert_array_equal(cs.open_array(root + "/x", cache=0)[...], expected)


def test_group_replaced_by_array_of_same_name_forgets_member_chunks():
    root = f"memory://rt4-{_uid()}"
    shared = ChunkCache("1MiB")
    g = cs.group(root)
    sub = g.create_group("g")
    m = sub.create_array("c", shape=(4,), chunks=(2,), dtype="i4", fill_value=0)
    m[...] = [1, 2, 3, 4]
    r = cs.open_array(root, path="g/c", cache=shared)
    np.testing.assert_array_equal(r[...], [1, 2, 3, 4])
    # "g" becomes an array whose chunk keys are "g/c/0", "g/c/1": the member's old keys
    arr = g.create_array("g", shape=(4,), chunks=(2,), dtype="i4", fill_value=7,
                         overwrite=True)
    np.testing.assert_array_equal(arr[...], np.full(4, 7, "i4"))
    np.testing.assert_array_equal(cs.open_array(root, path="g", cache=shared)[...],
                                  np.full(4, 7, "i4"))


# -- the byte budget ---------------------------------------------------------------------------
def test_budget_counts_the_bytes_of_variable_length_strings():
    """A cache of 64 KiB must not keep 10 MB alive: the entries of a string array are
    counted by ``ndarray.nbytes`` (16 bytes per StringDType element, 8 per object),
    not by the strings they hold."""
    import tracemalloc

    cache = ChunkCache("64KiB")
    a = cs.create_array({}, shape=(40,), chunks=(1,), dtype=str, cache=cache)
    values = np.array(["x" * 250_000 + str(i) for i in range(40)], dtype=object)
    a[...] = values
    tracemalloc.start()
    try:
        got = a[...]
        assert list(got) == list(values)
        del got
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert cache.nbytes <= cache.budget
    # what the cache keeps alive after the read: at most its budget (plus slack)
    assert held <= 4 * cache.budget, (f"{held} bytes held after the read by a cache of "
                                      f"{cache.budget} bytes ({cache!r})")


def test_budget_respected_with_many_arrays_and_fill_chunks():
    cache = ChunkCache(10_000)
    arrays = []
    for i in range(5):
        a = cs.create_array({}, shape=(4000,), chunks=(100,), dtype="u1", fill_value=i,
                            cache=cache)
        a[::7] = 200  # every chunk stored
        a[3000:] = i  # the last 10 chunks all fill: not stored, cached as FILL
        arrays.append(a)
    for _ in range(2):
        for i, a in enumerate(arrays):
            expected = np.full(4000, i, "u1")
            expected[:3000:7] = 200
            np.testing.assert_array_equal(a[...], expected)
            assert cache.nbytes <= cache.budget


# -- a dict store whose value changes in place ----------------------------------------------
def test_dict_store_value_mutated_in_place_is_seen():
    """``MemoryStore`` hits are validated against "the stored bytes object itself"; a
    user dict may hold a bytearray changed in place (same object), which an uncached
    read shows at once."""
    d = {}
    a = cs.create_array(d, shape=(8,), chunks=(4,), dtype="<i4", compressors=None,
                        cache="1MiB")
    a[...] = np.arange(8)
    d["c/0"] = bytearray(d["c/0"])
    np.testing.assert_array_equal(a[...], np.arange(8))
    d["c/0"][0:4] = np.array([-1], "<i4").tobytes()
    expected = np.arange(8)
    expected[0] = -1
    np.testing.assert_array_equal(cs.open_array(d, cache=0)[...], expected)
    np.testing.assert_array_equal(a[...], expected)


# -- results never alias entries (more read paths than round 3) ------------------------------
@pytest.mark.parametrize("dtype", ["i4", ">f8", str, [("a", "<i2"), ("b", "S3")]])
def test_results_of_every_read_path_are_private(dtype):
    dt = np.dtype(dtype) if dtype is not str else None
    a = cs.create_array({}, shape=(6, 4), chunks=(3, 2), dtype=dtype, cache="1MiB")
    if dtype is str:
        data = np.array([[f"s{i}{j}" for j in range(4)] for i in range(6)], dtype=object)
    elif dt.fields:
        data = np.zeros((6, 4), dt)
        data["a"] = np.arange(24).reshape(6, 4)
        data["b"] = b"xyz"
    else:
        data = np.arange(24).reshape(6, 4).astype(dt)
    a[...] = data
    reads = [lambda: a[...], lambda: a[0:3, 0:2], lambda: a[1], lambda: a[:, 1],
             lambda: a.vindex[[0, 5], [1, 3]], lambda: a.oindex[[4, 0], :],
             lambda: a.get_mask_selection(np.ones((6, 4), bool)),
             lambda: a.blocks[1, 1], lambda: np.asarray(a)]
    for read in reads:
        read()  # fill the cache
        r = read()
        r[...] = data.flat[0] if dtype is not str else "mutated"
    got = a[...]
    if dtype is str:
        assert got.tolist() == data.tolist()
    else:
        np.testing.assert_array_equal(got, data)


def test_clear_then_budget_zero_then_back_reads_exact(tmp_path):
    where = str(tmp_path / "a.zarr")
    a = cs.create_array(where, shape=(20,), chunks=(6,), dtype="i2", cache=0)
    a[...] = np.arange(20)
    with cs.config.set({"cache.chunk_bytes": "1MiB"}):
        r = cs.open_array(where)
        np.testing.assert_array_equal(r[...], np.arange(20))
        with cs.config.set({"cache.chunk_bytes": 0}):
            a[0:20] = -1  # writes while the shared cache is off still invalidate it
        np.testing.assert_array_equal(r[...], np.full(20, -1, "i2"))
        chunk_cache.clear()
        np.testing.assert_array_equal(r[...], np.full(20, -1, "i2"))
