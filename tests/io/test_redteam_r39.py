"""Red team r39: seams between features - rectilinear grids with sharding and resize,
one stored array reached through several identities (symlink, file:// URL, relative path,
group member) with the decoded-chunk cache, copies onto themselves, struct dtypes, and
concurrent / killed writer processes. Three bugs were found (a refused resize that had
cleared data, copies of other libraries' handles onto themselves, arrays nested with
other stores' arrays on disk), fixed, and are tested here; the others are attacks that
held, kept as guards. Every read is compared with exact NumPy content."""

from __future__ import annotations

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.io.cache import chunk_cache


@pytest.fixture(autouse=True)
def _fresh_cache():
    chunk_cache.clear()
    yield
    chunk_cache.clear()


# -- 1. a refused resize must not change anything -----------------------------------------
@pytest.mark.parametrize("local", [False, True])
def test_refused_resize_of_rectilinear_shards_changes_nothing(tmp_path, local):
    """``resize(2, 5)`` of a 4x4 array with rectilinear shards (4,)x(4,) of inner chunks
    2x2 is refused (a shard of length 1 on axis 1 is not a multiple of the inner chunk
    length). It cleared the rows 2:4 that the shrink of axis 0 would cut before it was
    refused: the data was lost and the shape stayed (4, 4). Now the new grid is checked
    first, and the error names the array."""
    store = str(tmp_path / "a.zarr") if local else None
    a = cs.create_array(store, shape=(4, 4), chunks=(2, 2), shards=((4,), (4,)), dtype="i4",
                        fill_value=0)
    data = np.arange(1, 17, dtype="i4").reshape(4, 4)
    a[:] = data
    with pytest.raises(ValueError, match=r"array '/': .*multiple of the inner chunk"):
        a.resize(2, 5)
    assert a.shape == (4, 4)
    np.testing.assert_array_equal(a[:], data)
    if local:
        np.testing.assert_array_equal(cs.open_array(store, mode="r")[:], data)


# -- 2. copy onto its own source, the source being another library's handle -------------
def test_copy_of_zarr_python_array_onto_its_own_directory_is_refused(tmp_path):
    """``cs.copy(zarr.open_array(p), p, overwrite=True)`` deleted the array at ``p`` and
    then copied the (now empty) source into it: the result read all fill value, with no
    error. ``cs.array(za, store=p, overwrite=True)`` and ``cs.save(p, za)`` refuse the
    same thing with SameLocationError (README "Never over its own source": copy refuses a
    target that is an array its source holds)."""
    zarr = pytest.importorskip("zarr")
    p = str(tmp_path / "z.zarr")
    cs.create_array(p, data=np.arange(1, 11), chunks=(3,))
    za = zarr.open_array(p, mode="r")
    with pytest.raises(cs.errors.SameLocationError):
        cs.array(za, store=p, overwrite=True)  # held: refused
    with pytest.raises(cs.errors.SameLocationError, match="copy"):
        cs.copy(za, p, overwrite=True)
    np.testing.assert_array_equal(cs.open_array(p, mode="r")[:], np.arange(1, 11))


def test_copy_of_dask_from_zarr_onto_its_own_directory_is_refused(tmp_path):
    """The same through ``dask.array.from_zarr`` of the target (a value README names as a
    reader of the target's place): copied onto itself it read back all zeros."""
    zarr = pytest.importorskip("zarr")
    da = pytest.importorskip("dask.array")
    p = str(tmp_path / "z.zarr")
    cs.create_array(p, data=np.arange(1, 11), chunks=(3,))
    x = da.from_zarr(zarr.open_array(p, mode="r"))
    with pytest.raises(cs.errors.SameLocationError, match="copy"):
        cs.copy(x, p, overwrite=True)
    np.testing.assert_array_equal(cs.open_array(p, mode="r")[:], np.arange(1, 11))


def test_copy_of_zarr_python_group_onto_itself_is_refused(tmp_path):
    """``cs.copy(zarr.open_group(p), p, overwrite=True)`` (a group-like mapping source)
    replaced the group at ``p`` with an empty one before reading its members: both
    arrays were gone, no error."""
    zarr = pytest.importorskip("zarr")
    p = str(tmp_path / "g.zarr")
    g = cs.group(p)
    g.create_array("x", data=np.arange(6), chunks=(4,))
    g.create_array("y", data=np.arange(3))
    with pytest.raises(cs.errors.SameLocationError, match="copy"):
        cs.copy(zarr.open_group(p, mode="r"), p, overwrite=True)
    np.testing.assert_array_equal(cs.open_array(p + "/x", mode="r")[:], np.arange(6))
    np.testing.assert_array_equal(cs.open_array(p + "/y", mode="r")[:], np.arange(3))


@pytest.mark.parametrize("spelling", ["abs", "link", "file_url", "dotdot", "group_root",
                                      "store_trailing_slash", "group_into_itself"])
def test_copy_of_chunkstore_source_onto_itself_refused_through_any_spelling(tmp_path,
                                                                           monkeypatch,
                                                                           spelling):
    """Held: a chunkstore Array / Group copied onto its own place through an absolute,
    symlinked, file:// (trailing slash), '..' path, a containing group root, or a store
    rooted at the parent: SameLocationError, and the source is intact."""
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    monkeypatch.chdir(tmp_path)
    g = cs.group("real/g.zarr")
    a = g.create_array("sub/x", data=np.arange(10), chunks=(3,))
    target = {
        "abs": lambda: cs.copy(a, str(tmp_path / "real/g.zarr/sub/x"), overwrite=True),
        "link": lambda: cs.copy(a, "link/g.zarr/sub/x", overwrite=True),
        "file_url": lambda: cs.copy(a, f"file://{tmp_path}/link/g.zarr/sub/x/", overwrite=True),
        "dotdot": lambda: cs.copy(a, "real/../link/./g.zarr", path="sub/x", overwrite=True),
        "group_root": lambda: cs.copy(a, "link/g.zarr", overwrite=True),
        "store_trailing_slash": lambda: cs.copy(a, cs.LocalStore("link/g.zarr/sub/"), path="x",
                                                overwrite=True),
        "group_into_itself": lambda: cs.copy(g, "link/g.zarr/sub/new", overwrite=True),
    }[spelling]
    with pytest.raises(cs.errors.SameLocationError):
        target()
    np.testing.assert_array_equal(cs.open_array("real/g.zarr/sub/x", mode="r")[:], np.arange(10))
    assert sorted(p.name for p in (tmp_path / "real/g.zarr/sub").iterdir()) == ["x", "zarr.json"]


# -- 3. processes writing strided rows of rectilinear shards while another appends -------
def _strided_writer(where, k, rounds, start):
    start.wait()
    a = cs.open_array(where, mode="r+")
    for r in range(rounds):
        a[k:20:3, :] = np.full((len(range(k, 20, 3)), 8), 100 * (k + 1) + r, "i4")


def _chunk_appender(where, k, rounds, start):
    start.wait()
    a = cs.open_array(where, mode="r+")
    for r in range(rounds):
        a.append(np.full((2, 8), 10_000 + 100 * k + r, "i4"), new_chunk=True)


def _writer_or_appender(where, k, rounds, start):
    (_strided_writer if k < 3 else _chunk_appender)(where, k, rounds, start)


def test_processes_write_interleaved_rows_of_rectilinear_shards_while_one_appends(tmp_path):
    """Held: 3 processes write rows k::3 (every inner chunk shared by all three, shards of
    lengths 6, 10, 4) while a 4th appends 2-row batches as shards of their own
    (new_chunk=True): every last write and every batch is there, once."""
    from tests.multiproc import run_together

    where = str(tmp_path / "a.zarr")
    cs.create_array(where, shape=(20, 8), dtype="i4", chunks=(2, 4), shards=((6, 10, 4), 8),
                    fill_value=-1)
    rounds = 6
    run_together(_writer_or_appender, lambda i: (where, i, rounds), n=4, timeout=120)
    a = cs.open_array(where, mode="r")
    got = a[:]
    assert got.shape == (20 + 2 * rounds, 8)
    expected = np.full((20, 8), -1, "i4")
    for k in range(3):
        expected[k:20:3] = 100 * (k + 1) + rounds - 1
    np.testing.assert_array_equal(got[:20], expected)
    batches = [got[20 + 2 * i:22 + 2 * i] for i in range(rounds)]
    assert [int(b[0, 0]) for b in batches] == [10_300 + r for r in range(rounds)]
    assert all((b == b[0, 0]).all() for b in batches)
    assert a.write_chunk_sizes[0] == (6, 10, 4) + (2,) * rounds


# -- 4. a node created with its store rooted inside (or above) another array ---------------
_V2_SLASH = dict(zarr_format=2, chunk_key_encoding={"name": "v2", "separator": "/"},
                 fill_value=0, compressors=None, dtype="i4")


def test_array_created_in_a_directory_inside_an_array_is_refused(tmp_path):
    """``cs.create_array("a.zarr/0", ...)`` where ``a.zarr`` is a v2 array with '/' chunk
    keys (as OME-Zarr writes them) was allowed, and the new array's chunk '0' was the
    file of a.zarr's chunk (0, 0): a.zarr silently read the new array's values. The same
    creation through the parent store (``create_array("a.zarr", name="0")``) is refused
    with ContainsArrayError ("only groups may have child nodes")."""
    p = str(tmp_path / "a.zarr")
    a = cs.create_array(p, shape=(4, 4), chunks=(2, 2), **_V2_SLASH)
    data = np.arange(1, 17, dtype="i4").reshape(4, 4)
    a[:] = data
    with pytest.raises(cs.errors.ContainsArrayError):  # held: refused through the parent
        cs.create_array(p, name="0", shape=(4,), chunks=(4,), **_V2_SLASH)
    with pytest.raises(cs.errors.ContainsArrayError, match="above the store's root"):
        cs.create_array(p + "/0", shape=(4,), chunks=(4,), **_V2_SLASH)
    assert not (tmp_path / "a.zarr" / "0" / ".zarray").exists()
    np.testing.assert_array_equal(cs.open_array(p, mode="r")[:], data)


def test_v3_array_opened_mode_w_inside_another_arrays_chunk_dir_is_refused(tmp_path):
    """``cs.open_array("c.zarr/c/0", mode="w", ...)`` (v2 chunk keys) inside a v3 array's
    chunk directory: its chunk '0' replaced c.zarr's chunk (0, 0); c.zarr read -1..-4.
    A group there is refused too."""
    p = str(tmp_path / "c.zarr")
    c = cs.create_array(p, shape=(4, 4), chunks=(2, 2), dtype="i4", fill_value=0,
                        compressors=None)
    data = np.arange(1, 17, dtype="i4").reshape(4, 4)
    c[:] = data
    with pytest.raises(cs.errors.ContainsArrayError, match="above the store's root"):
        cs.open_array(p + "/c/0", mode="w", shape=(4,), chunks=(4,), dtype="i4",
                      chunk_key_encoding={"name": "v2", "separator": "/"}, fill_value=0,
                      compressors=None)
    with pytest.raises(cs.errors.ContainsArrayError):
        cs.group(p + "/c/g")
    np.testing.assert_array_equal(cs.open_array(p, mode="r")[:], data)


def test_array_created_above_an_array_is_refused(tmp_path):
    """The other direction: an array at ``p.zarr/0`` (no group at p.zarr), then
    ``create_array("p.zarr", ...)`` with '/' chunk keys: allowed, and its chunk (0, 0) was
    the file of p.zarr/0's chunk 0 - the inner array read the outer one's values. In a
    single store the same order is refused (ContainsGroupError: creating 'q/0' made the
    group 'q')."""
    p = str(tmp_path / "p.zarr")
    child = cs.create_array(p + "/0", shape=(4,), chunks=(4,), **_V2_SLASH)
    child[:] = [1, 2, 3, 4]
    for overwrite in (False, True):  # nothing at p.zarr itself to overwrite
        with pytest.raises(cs.errors.ContainsArrayError, match="'0' below it"):
            cs.create_array(p, shape=(4, 4), chunks=(2, 2), overwrite=overwrite,
                            **_V2_SLASH)
    assert not (tmp_path / "p.zarr" / ".zarray").exists()
    # a group there is fine: the array becomes its member, as zarr-python reads it
    assert [name for name, _ in cs.group(p, zarr_format=2).members()] == ["0"]
    np.testing.assert_array_equal(cs.open_array(p + "/0", mode="r")[:], [1, 2, 3, 4])


# -- 5. guards: other identities of one array ---------------------------------------------
def test_dask_from_zarr_of_the_target_is_refused_or_staged(tmp_path):
    """Held: to_store / rechunk onto the directory a ``da.from_zarr`` value or the source
    reads (trailing slash, file:// URL) are refused; ``a[:] = from_zarr(a)[::-1]`` gives
    NumPy's result."""
    zarr = pytest.importorskip("zarr")
    da = pytest.importorskip("dask.array")
    import chunkstore.dask as csd

    p = str(tmp_path / "z.zarr")
    cs.create_array(p, data=np.arange(1, 11), chunks=(3,))
    x = da.from_zarr(zarr.open_array(p, mode="r"))
    with pytest.raises(cs.errors.SameLocationError):
        csd.to_store(x + 1, p)
    with pytest.raises(cs.errors.SameLocationError):
        csd.rechunk(p + "/", (5,), f"file://{p}", max_mem="1MB")
    np.testing.assert_array_equal(cs.open_array(p, mode="r")[:], np.arange(1, 11))
    cs.open_array(p, mode="r+")[:] = x[::-1]
    np.testing.assert_array_equal(cs.open_array(p, mode="r")[:], np.arange(10, 0, -1))


@pytest.mark.parametrize("other", ["memory://r39g/x", "memory://r39g/x/", "memory:///r39g/x"])
def test_cached_group_member_and_direct_memory_url_handles_agree(other):
    """Held: with the decoded-chunk cache on, a member of a ``memory://`` group and the
    same array opened by another spelling of its URL see each other's writes at once."""
    with cs.config.set({"cache.chunk_bytes": 2**24}):
        g = cs.open_group("memory://r39g", mode="w")
        a = g.create_array("x", shape=(8,), chunks=(4,), dtype="i4", fill_value=0)
        a[:] = 1
        b = cs.open_array(other, mode="r+")
        np.testing.assert_array_equal(b[:], np.ones(8))
        a[:] = 2
        np.testing.assert_array_equal(b[:], np.full(8, 2))
        b[0:4] = 3
        np.testing.assert_array_equal(a[:], [3, 3, 3, 3, 2, 2, 2, 2])


@pytest.mark.parametrize("fmt", [2, 3])
def test_struct_fill_and_partial_writes_bit_exact(fmt):
    """Held: struct arrays with a NaN fill field: a chunk of -0.0 and one of a NaN with
    another payload are stored and read back bit for bit; copies between formats keep
    every field."""
    dt = np.dtype([("a", "<f8"), ("b", "<i2")])
    a = cs.create_array(None, shape=(6,), chunks=(3,), dtype=dt, zarr_format=fmt,
                        fill_value=np.array((np.nan, 1), dt))
    v = np.zeros(3, dt)
    v["a"] = -0.0
    w = np.zeros(3, dt)
    w["a"] = np.frombuffer(np.uint64(0x7FF8000000000001).tobytes(), "<f8")[0]
    w["b"] = 1
    a[0:3] = v
    a[3:6] = w
    expected = np.concatenate([v, w])
    assert a[:].tobytes() == expected.tobytes()
    assert a.nchunks_initialized == 2
    c = cs.copy(a, None, zarr_format=5 - fmt)
    assert c[:].astype(dt).tobytes() == expected.tobytes()


# -- 6. guard: rectilinear grids (sharded or not) under writes, resizes, appends ---------
def _rectilinear_case(seed, where):
    import random

    rnd, rng = random.Random(seed), np.random.default_rng(seed)
    nd, sharded = rnd.choice([1, 2]), rnd.random() < 0.5
    inner = tuple(rnd.choice([1, 2, 3]) for _ in range(nd))
    edges, shape = [], []
    for d in range(nd):
        unit = inner[d] if sharded else 1
        e = tuple(unit * rnd.choice([1, 2, 3]) for _ in range(rnd.randint(1, 4)))
        edges.append(e)
        shape.append(rnd.randint(sum(e) - e[-1] + 1, sum(e)))
    dt = rnd.choice(["i4", "f8", "u1"])
    fill = rnd.choice([0, 7, np.nan]) if dt == "f8" else rnd.choice([0, 7])
    kw = dict(shape=tuple(shape), dtype=dt, fill_value=fill,
              compressors=rnd.choice([None, "auto"]),
              config={"write_empty_chunks": rnd.random() < 0.3}, cache=rnd.choice([0, "1MiB"]))
    kw.update(chunks=inner, shards=tuple(edges)) if sharded else kw.update(chunks=tuple(edges))
    a = cs.create_array(where, **kw)
    ref = np.full(tuple(shape), fill, dt)
    for _ in range(10):
        op = rnd.random()
        if op < 0.45:
            sl = tuple(slice(*sorted(rnd.sample(range(n + 1), 2))) if n else slice(0, 0)
                       for n in ref.shape)
            v = rng.integers(0, 5, ref[sl].shape).astype(dt)
            if rnd.random() < 0.3:
                v[...] = fill
            a[sl] = v
            ref[sl] = v
        elif op < 0.65:
            ns = tuple(max(0, n + rnd.randint(-3, 3)) for n in ref.shape)
            try:
                a.resize(ns)
            except ValueError:  # a shard the grid cannot have: refused, nothing changed
                assert sharded and a.shape == ref.shape
                assert np.array_equal(a[...], ref, equal_nan=True), (seed, kw)
                continue
            new = np.full(ns, fill, dt)
            keep = tuple(slice(0, min(x, y)) for x, y in zip(ns, ref.shape, strict=True))
            new[keep] = ref[keep]
            ref = new
        elif op < 0.85:
            ax = rnd.randrange(nd)
            length = rnd.randint(1, 4) * (inner[ax] if sharded else 1)
            v = rng.integers(0, 5, tuple(length if i == ax else n
                                         for i, n in enumerate(ref.shape))).astype(dt)
            try:
                a.append(v, axis=ax, new_chunk=rnd.random() < 0.5)
            except ValueError:  # refused before anything changed
                continue
            ref = np.concatenate([ref, v], axis=ax)
        else:
            b = cs.open_array(where if isinstance(where, str) else a.store, mode="r")
            assert np.array_equal(b[...], ref, equal_nan=True), (seed, kw)
        assert a.shape == ref.shape
        assert np.array_equal(a[...], ref, equal_nan=True), (seed, kw)


@pytest.mark.parametrize("block", range(4))
def test_rectilinear_grids_match_numpy_under_writes_resizes_appends(tmp_path, block):
    """Held: random rectilinear grids (shards too), fill values incl. NaN, write_empty_chunks
    both ways, with and without the cache: writes, shrinking and growing resizes (a refused
    one changes nothing), appends with and without new_chunk equal NumPy, also through a new handle."""
    for seed in range(block * 15, block * 15 + 15):
        _rectilinear_case(seed, str(tmp_path / f"{seed}.zarr") if seed % 2 else None)
