"""Red team 2, round 39: zip archives across processes, consolidated metadata through
stale handles, `*_like` onto their source, fill-value edge dtypes with
write_empty_chunks=False, and the CLI's one-line errors.

Four bugs were found and fixed, tested here (zip writes built on an archive version
another process has since replaced now raise ConcurrentWriteError, three tests; `clean`
of a zip archive removes killed writers' temporary archives; a group opened with
consolidated metadata checks a member's stored document before its first write); the
others guard behaviour that held.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import warnings
import zipfile

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.storage import ZipStore

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _py(code: str, *args: str, **kw):
    return subprocess.run([sys.executable, "-c", code, *args], env=_env(), timeout=60, **kw)


def _hook_first_set(monkeypatch, action):
    """Run ``action`` once, just before the first ``ZipStore.set`` of this process: what
    another process does between this process's read of an object and its write."""
    orig = ZipStore.set
    fired: list[str] = []

    def hooked(self, key, value):
        if not fired:
            fired.append(key)
            action()
        return orig(self, key, value)

    monkeypatch.setattr(ZipStore, "set", hooked)
    return fired


# ---------------------------------------------------------------------------------------
# zip: another process commits between this process's read and its write
# ---------------------------------------------------------------------------------------
def test_zip_partial_chunk_write_over_another_process_commit_is_a_conflict(tmp_path,
                                                                            monkeypatch):
    """The read half of a read-modify-write comes from the archive version this process
    was reading; another process commits a new version; the write then started a new
    session from that NEW version (session_for swapped the stale reading session) and
    committed the chunk rebuilt from the OLD one: the other process's committed update was
    silently lost. Now the write is based on the version read: ConcurrentWriteError, the
    other process's archive stands, this one's is kept beside it."""
    p = str(tmp_path / "r.zip")
    a = cs.create_array(p, shape=(8,), chunks=(4,), dtype="i4", fill_value=0)
    a[:] = np.arange(8)
    a.store.close()
    child = ("import chunkstore as cs, sys; a = cs.open_array(sys.argv[1], mode='r+'); "
             "a[2] = 222; a.store.close()")
    A = cs.open_array(p, mode="r+")
    np.testing.assert_array_equal(A[:], np.arange(8))
    fired = _hook_first_set(monkeypatch, lambda: _py(child, p, check=True))
    with pytest.raises(cs.errors.ConcurrentWriteError, match="kept as"):
        A[1] = 111
        A.store.close()
    monkeypatch.undo()
    assert fired == ["c/0"]
    # the other process's commit stands whole; this process's version is kept beside
    np.testing.assert_array_equal(cs.open_array(p)[:], [0, 1, 222, 3, 4, 5, 6, 7])
    kept = [n for n in os.listdir(tmp_path) if ".conflict-" in n]
    assert len(kept) == 1
    np.testing.assert_array_equal(cs.open_array(str(tmp_path / kept[0]))[:],
                                  [0, 111, 2, 3, 4, 5, 6, 7])


def test_zip_attribute_update_over_another_process_commit_is_a_conflict(tmp_path,
                                                                         monkeypatch):
    """Same seam for metadata: attribute changes are documented read-modify-writes of
    the stored attributes; the other process's attribute vanished silently."""
    p = str(tmp_path / "g.zip")
    g = cs.open_group(p, mode="w")
    g.attrs["base"] = 0
    g.store.close()
    child = ("import chunkstore as cs, sys; g = cs.open_group(sys.argv[1], mode='r+'); "
             "g.attrs['child'] = 1; g.store.close()")
    G = cs.open_group(p, mode="r+")
    assert dict(G.attrs) == {"base": 0}
    _hook_first_set(monkeypatch, lambda: _py(child, p, check=True))
    with pytest.raises(cs.errors.ConcurrentWriteError):
        G.attrs["parent"] = 2
        G.store.close()
    monkeypatch.undo()
    assert dict(cs.open_group(p).attrs) == {"base": 0, "child": 1}


def test_zip_update_over_a_synchronized_writer_commit_is_a_conflict(tmp_path, monkeypatch):
    """README: zip archives need a synchronizer for writers sharing an object, and a
    second writing process's commit raises ConcurrentWriteError. With a
    ProcessSynchronizer on both sides: the child does its read-modify-write of chunk 0
    under the lock and commits a moment later; the parent's read-modify-write of chunk 0
    read the archive before that commit and writes after it: the child's element was
    lost, and nothing was raised."""
    p = str(tmp_path / "s.zip")
    locks = str(tmp_path / "locks")
    ready, go = str(tmp_path / "ready"), str(tmp_path / "go")
    a = cs.create_array(p, shape=(8,), chunks=(4,), dtype="i4", fill_value=0)
    a[:] = np.arange(8)
    a.store.close()
    child = (
        "import chunkstore as cs, sys, os, time\n"
        "p, locks, ready, go = sys.argv[1:]\n"
        "a = cs.open_array(p, mode='r+', synchronizer=cs.ProcessSynchronizer(locks))\n"
        "a[2] = 222\n"
        "open(ready, 'w').close()\n"
        "t = time.time()\n"
        "while not os.path.exists(go) and time.time() - t < 30: time.sleep(0.01)\n"
        "a.store.close()\n")
    proc = subprocess.Popen([sys.executable, "-c", child, p, locks, ready, go], env=_env())
    try:
        t = time.time()
        while not os.path.exists(ready):
            assert proc.poll() is None and time.time() - t < 30
            time.sleep(0.01)
        A = cs.open_array(p, mode="r+", synchronizer=cs.ProcessSynchronizer(locks))

        def let_child_commit():
            open(go, "w").close()
            assert proc.wait(30) == 0

        _hook_first_set(monkeypatch, let_child_commit)
        with pytest.raises(cs.errors.ConcurrentWriteError):
            A[1] = 111
            A.store.close()
        monkeypatch.undo()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    np.testing.assert_array_equal(cs.open_array(p)[:], [0, 1, 222, 3, 4, 5, 6, 7])


# ---------------------------------------------------------------------------------------
# zip: crash of a writer
# ---------------------------------------------------------------------------------------
_CRASHING_WRITER = (
    "import chunkstore as cs, numpy as np, os, signal, sys\n"
    "p = sys.argv[1]\n"
    "a = cs.open_array(p, mode='r+')\n"
    "a.resize((16, 8))\n"
    "a[:] = 7\n"
    "a.attrs['v'] = 2\n"
    "os.kill(os.getpid(), signal.SIGKILL)\n")


def _zip_v1(p: str) -> None:
    a = cs.create_array(p, shape=(8, 8), chunks=(4, 4), dtype="f8", fill_value=np.nan)
    a[:] = np.arange(64.0).reshape(8, 8)
    a.attrs["v"] = 1
    a.store.close()


def test_zip_sigkilled_writer_leaves_old_archive_whole(tmp_path):
    p = str(tmp_path / "k.zip")
    _zip_v1(p)
    r = _py(_CRASHING_WRITER, p)
    assert r.returncode == -signal.SIGKILL
    with zipfile.ZipFile(p) as zf:
        assert zf.testzip() is None
    b = cs.open_array(p)
    assert b.shape == (8, 8) and dict(b.attrs) == {"v": 1}
    np.testing.assert_array_equal(b[:], np.arange(64.0).reshape(8, 8))
    # and a later writer in this process starts from it cleanly
    c = cs.open_array(p, mode="r+")
    c[0, 0] = -1
    c.store.close()
    expected = np.arange(64.0).reshape(8, 8)
    expected[0, 0] = -1
    np.testing.assert_array_equal(cs.open_array(p)[:], expected)


def test_clean_removes_killed_zip_writers_temporary_archive(tmp_path):
    """A SIGKILLed zip writer leaves `<name>.chunkstore-tmp-<host>-<pid>-<n>` (a full copy
    of the archive) beside it. README: temporary files of killed writers are removed by
    `chunkstore clean PATH` / `verify PATH --repair`; for a .zip PATH both reported
    'removed 0 leftover temporary file(s)' and kept it."""
    p = str(tmp_path / "k.zip")
    _zip_v1(p)
    assert _py(_CRASHING_WRITER, p).returncode == -signal.SIGKILL
    leftovers = [n for n in os.listdir(tmp_path) if n != "k.zip"]
    assert leftovers and all(".chunkstore-tmp-" in n for n in leftovers)
    r = _py("from chunkstore.cli.main import main; import sys; sys.exit(main())",
            "clean", p, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmp_path)) == ["k.zip"], r.stdout
    assert "removed 1 leftover temporary file(s)" in r.stdout
    # a live writer's temporary archive is kept, whatever its age
    w = cs.open_array(p, mode="r+")
    w[0, 0] = -5
    live = [n for n in os.listdir(tmp_path) if ".chunkstore-tmp-" in n]
    assert len(live) == 1
    os.utime(tmp_path / live[0], (0, 0))
    r = _py("from chunkstore.cli.main import main; import sys; sys.exit(main())",
            "clean", p, "--older-than", "0", capture_output=True, text=True)
    assert r.returncode == 0 and "removed 0 leftover" in r.stdout, r
    w.store.close()
    assert cs.open_array(p)[0, 0] == -5 and sorted(os.listdir(tmp_path)) == ["k.zip"]


# ---------------------------------------------------------------------------------------
# zip: modes and handles
# ---------------------------------------------------------------------------------------
def test_zip_mode_w_at_a_path_keeps_other_members(tmp_path):
    p = str(tmp_path / "z.zip")
    g = cs.open_group(p, mode="w")
    g.create_array("a", shape=(4,), chunks=(2,), dtype="i4")[:] = [1, 2, 3, 4]
    g.store.close()
    b = cs.open_array(p, path="b", mode="w", shape=(3,), dtype="i4")
    b[:] = [5, 6, 7]
    b.store.close()
    np.testing.assert_array_equal(cs.open_array(p, path="a")[:], [1, 2, 3, 4])
    np.testing.assert_array_equal(cs.open_array(p, path="b")[:], [5, 6, 7])


def test_zip_fork_child_writes_are_committed(tmp_path):
    import multiprocessing as mp
    p = str(tmp_path / "f.zip")
    a = cs.create_array(p, shape=(8,), chunks=(4,), dtype="i4", fill_value=0)
    a[:] = np.arange(8)
    a.store.close()
    proc = mp.get_context("fork").Process(target=_fork_child, args=(p,))
    proc.start()
    proc.join(30)
    assert proc.exitcode == 0
    np.testing.assert_array_equal(cs.open_array(p)[:], [10, 11, 12, 13, 4, 5, 6, 7])


def _fork_child(p: str) -> None:
    a = cs.open_array(p, mode="r+")
    a[0:4] = [10, 11, 12, 13]


def test_zip_delete_group_and_recreate_compacts(tmp_path):
    import zlib  # noqa: F401
    p = str(tmp_path / "d.zip")
    st = ZipStore(p, mode="w", compression=zipfile.ZIP_DEFLATED)
    g = cs.open_group(st, mode="w")
    s = g.create_group("sub")
    s.create_array("y", shape=(6,), chunks=(2,), dtype="i2")[:] = [1, 2, 3, 4, 5, 6]
    g.create_array("x", shape=(4,), chunks=(2,), dtype="f4")[:] = [1, 2, 3, 4]
    del g["sub"]
    y = g.create_group("sub").create_array("y", shape=(3,), chunks=(3,), dtype="f8",
                                           fill_value=-1.0)
    y[1] = 9.0
    st.close()
    with zipfile.ZipFile(p) as zf:
        names = zf.namelist()
    assert len(names) == len(set(names))
    assert not any(n.startswith("sub/y/c/") and n != "sub/y/c/0" for n in names)
    np.testing.assert_array_equal(cs.open_array(p, path="sub/y")[:], [-1.0, 9.0, -1.0])
    np.testing.assert_array_equal(cs.open_array(p, path="x")[:], [1, 2, 3, 4])


# ---------------------------------------------------------------------------------------
# consolidated metadata
# ---------------------------------------------------------------------------------------
def _replaced_under_a_snapshot(p: str, fmt: int):
    """A consolidated group at ``p`` whose int32 member ``x`` (chunks of 4) is then
    replaced by a float64 ``x`` (chunks of 3) through a plain handle: (the group opened
    with consolidated metadata before the replacement, the plain handle)."""
    g = cs.open_group(p, mode="w", zarr_format=fmt)
    g.create_array("x", shape=(8,), chunks=(4,), dtype="i4", fill_value=0)[:] = np.arange(8)
    cs.consolidate_metadata(p)
    G = cs.open_group(p, mode="r+", use_consolidated=True)
    H = cs.open_group(p, mode="r+", use_consolidated=False)
    del H["x"]
    H.create_array("x", shape=(6,), chunks=(3,), dtype="f8", fill_value=-1.0)[:] = (
        np.arange(6) * 10.0)
    return G, H


@pytest.mark.parametrize("fmt", [3, 2])
def test_consolidated_group_handle_writes_through_the_replaced_arrays_layout(tmp_path, fmt):
    """A group opened with consolidated metadata, then its member `x` is deleted and
    recreated (another dtype and chunking) through another handle. The stored
    consolidated copy is refreshed, but `G["x"]` -- an array handle made AFTER the
    replacement -- comes from G's in-memory copy: int32 chunks of 4 are written into the
    float64 array of chunks of 3, whose chunk 0 is then undecodable (ChunkDecodeError)
    and whose data was lost. Now an array handed out from a writable group's snapshot
    reads its stored document before its first write and adopts it."""
    p = str(tmp_path / "c.zarr")
    G, H = _replaced_under_a_snapshot(p, fmt)
    x = G["x"]
    x[0:4] = [100, 101, 102, 103]
    assert (x.dtype, x.shape, x.chunks) == (np.dtype("f8"), (6,), (3,))
    got = cs.open_array(p, path="x")
    assert (got.dtype, got.shape) == (np.dtype("f8"), (6,))
    np.testing.assert_array_equal(got[:], [100.0, 101.0, 102.0, 103.0, 40.0, 50.0])
    del H["x"]  # gone: a stale handle's first write is refused, nothing is created
    with pytest.raises(cs.errors.ArrayNotFoundError, match="consolidated"):
        G["x"][0] = 1
    assert "x" not in dict(cs.open_group(p, use_consolidated=False).members())


@pytest.mark.parametrize("where", ["dir", "zip"])
@pytest.mark.parametrize("fmt", [3, 2])
def test_consolidated_stale_handle_append_and_members_kept(tmp_path, fmt, where):
    p = str(tmp_path / ("c.zarr" if where == "dir" else "c.zip"))
    g = cs.open_group(p, mode="w", zarr_format=fmt)
    g.create_array("x", shape=(8,), chunks=(4,), dtype="i4", fill_value=0)[:] = np.arange(8)
    if where == "zip":
        g.store.close()
    cs.consolidate_metadata(p)
    G = cs.open_group(p, mode="r+", use_consolidated=True)
    H = cs.open_group(p, mode="r+", use_consolidated=False)
    H["x"].append(np.array([8, 9, 10, 11], dtype="i4"))
    H.create_array("b", shape=(1,), dtype="i1")
    H["x"].attrs["h"] = 1
    Gx = G["x"]
    Gx.append(np.array([100, 101], dtype="i4"))
    G.create_array("c", shape=(1,), dtype="i1")
    Gx.attrs["g"] = 2
    G.attrs["top"] = 3
    if where == "zip":
        G.store.close()
    expected = np.r_[np.arange(12), 100, 101]
    for use in (True, False):
        F = cs.open_group(p, use_consolidated=use)
        assert sorted(F.array_keys()) == ["b", "c", "x"]
        assert dict(F["x"].attrs) == {"h": 1, "g": 2} and dict(F.attrs) == {"top": 3}
        np.testing.assert_array_equal(F["x"][:], expected)


@pytest.mark.parametrize("fmt", [3, 2])
def test_consolidated_refreshed_by_nested_root_handles(tmp_path, fmt):
    p = str(tmp_path / "n.zarr")
    g = cs.open_group(p, mode="w", zarr_format=fmt)
    g.create_group("sub").create_array("x", shape=(8,), chunks=(4,), dtype="i4")[:] = (
        np.arange(8))
    cs.consolidate_metadata(p)
    a = cs.open_array(p + "/sub/x", mode="r+")
    a.resize((12,))
    a[8:] = [8, 9, 10, 11]
    a.attrs["k"] = 1
    s = cs.open_group(f"file://{p}/sub", mode="r+")
    s.create_array("z", shape=(2,), dtype="i1")
    F = cs.open_group(p, use_consolidated=True)
    assert sorted(k for k, _ in F.members(max_depth=None)) == ["sub", "sub/x", "sub/z"]
    assert F["sub/x"].shape == (12,) and dict(F["sub/x"].attrs) == {"k": 1}
    np.testing.assert_array_equal(F["sub/x"][:], np.arange(12))
    del s["x"]
    F = cs.open_group(p, use_consolidated=True)
    assert sorted(k for k, _ in F.members(max_depth=None)) == ["sub", "sub/z"]


# ---------------------------------------------------------------------------------------
# *_like onto the source's own path
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("ext", ["zarr", "zip"])
@pytest.mark.parametrize("fn", ["empty_like", "zeros_like", "full_like"])
def test_like_onto_own_path_refused_without_overwrite(tmp_path, ext, fn):
    p = str(tmp_path / f"l.{ext}")
    a = cs.create_array(p, shape=(6,), chunks=(3,), dtype="i4", fill_value=0)
    a[:] = np.arange(1, 7)
    if ext == "zip":
        a.store.close()
        a = cs.open_array(p)
    extra = {"fill_value": 5} if fn == "full_like" else {}
    with pytest.raises(cs.errors.ContainsArrayError):
        getattr(cs, fn)(a, store=p, **extra)
    np.testing.assert_array_equal(cs.open_array(p)[:], np.arange(1, 7))


# ---------------------------------------------------------------------------------------
# write_empty_chunks=False at the dtype edges
# ---------------------------------------------------------------------------------------
_NAT = np.datetime64("NaT")
_EDGE_CASES = [
    # (dtype, fill, data, stored?)
    ("M8[s]", "NaT", [_NAT, _NAT, _NAT], False),
    ("M8[ns]", "NaT", [np.datetime64(0, "ns")] * 3, True),
    ("m8[ms]", "NaT", [np.timedelta64("NaT")] * 3, False),
    ("m8[ms]", 0, [np.timedelta64("NaT")] * 3, True),
    ("S4", b"", [b"", b"", b""], False),
    ("S4", b"", [b"", b"a", b""], True),
    ("U3", "", ["", "", ""], False),
    (str, "", ["", "", ""], False),
    (str, "", ["", "x", ""], True),
    (bool, True, [True] * 3, False),
    ("f2", 0.0, [-0.0] * 3, True),
    ("f2", np.nan, [np.nan] * 3, False),
    ("f8", -0.0, [0.0] * 3, True),
    ("f8", -0.0, [-0.0] * 3, False),
    ("c16", complex(np.nan, 0), [complex(0, np.nan)] * 3, True),
    ("c16", 0j, [complex(0.0, -0.0)] * 3, True),
    ("c16", complex(np.nan, np.nan), [complex(np.nan, np.nan)] * 3, False),
]


@pytest.mark.parametrize("fmt", [3, 2])
@pytest.mark.parametrize("case", range(len(_EDGE_CASES)))
def test_empty_chunk_rule_at_dtype_edges(tmp_path, fmt, case):
    dtype, fill, data, stored = _EDGE_CASES[case]
    p = str(tmp_path / "e.zarr")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = cs.create_array(p, shape=(3,), chunks=(3,), dtype=dtype, fill_value=fill,
                            zarr_format=fmt, config={"write_empty_chunks": False})
        value = np.array(data, dtype=object if dtype is str else a.dtype)
        a[:] = value
        docs = ("zarr.json", ".zarray", ".zattrs", ".zgroup")
        chunks = [k for k in a.store.list_prefix("") if not k.endswith(docs)]
        assert bool(chunks) == stored, chunks
        got = cs.open_array(p)[:]
    if dtype is str:
        assert list(got) == list(value)
    else:
        assert got.tobytes() == value.tobytes()


# ---------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------
def test_cli_errors_are_one_line_and_keep_the_source(tmp_path):
    src = tmp_path / "src.zarr"
    a = cs.create_array(str(src), shape=(6, 4), chunks=(3, 2), dtype="i4")
    a[:] = np.arange(24).reshape(6, 4)
    g = cs.open_group(str(tmp_path / "g.zarr"), mode="w")
    g.create_array("x", shape=(5,), chunks=(2,), dtype="f4")[:] = np.arange(5)
    before = {str(f): f.read_bytes() for f in tmp_path.rglob("*") if f.is_file()}
    cases = [
        ["copy", "src.zarr", "src.zarr", "--overwrite"],
        ["copy", "g.zarr", "g.zarr", "--node", "x", "--dst-node", "x", "--overwrite"],
        ["copy", "g.zarr", "g.zarr", "--dst-node", "sub"],
        ["copy", "g.zarr", "g.zarr/sub"],
        ["rechunk", "src.zarr", "file://" + str(src), "--chunks", "2,2", "--overwrite"],
        ["copy", "fle://" + str(src), "out.zarr"],
        ["rechunk", "--chunks", "2,2", "src.zarr"],
        ["info", "missing.zarr"],
        ["dump", "src.zarr", "--selection", "0,0,0"],
    ]
    script = ("import sys, runpy; sys.argv = ['chunkstore'] + sys.argv[1:]; "
              "runpy.run_module('chunkstore', run_name='__main__')")
    for args in cases:
        r = _py(script, *args, capture_output=True, text=True, cwd=str(tmp_path))
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, (
            args, r.returncode, r.stderr)
    after = {str(f): f.read_bytes() for f in tmp_path.rglob("*") if f.is_file()}
    assert after == before


@pytest.mark.parametrize("how", ["write_chunk", "to_store"])
def test_consolidated_group_member_checked_before_write_chunk_and_to_store(tmp_path, how):
    """The other ways into a member handed out from a stale consolidated snapshot check
    its stored document first too (to_store plans its blocks on the stored layout)."""
    p = str(tmp_path / "c.zarr")
    G, _ = _replaced_under_a_snapshot(p, 3)
    x = G["x"]
    if how == "write_chunk":
        x.write_chunk((1,), [7.0, 8.0, 9.0])
        expected = [0.0, 10.0, 20.0, 7.0, 8.0, 9.0]
    else:
        da = pytest.importorskip("dask.array")
        import chunkstore.dask as csd
        csd.to_store(da.from_array(np.arange(6) + 0.5, chunks=3), x)
        expected = list(np.arange(6) + 0.5)
    got = cs.open_array(p, path="x")
    assert (got.dtype, got.shape) == (np.dtype("f8"), (6,))
    np.testing.assert_array_equal(got[:], expected)
