"""Red team, round 10: groups, hierarchy operations, consolidated metadata, attributes,
copying and the CLI (losing, corrupting or silently changing data or metadata; accepting
input that should be refused)."""

from __future__ import annotations

import json
import os
import subprocess
import unicodedata
import warnings

import numpy as np
import pytest

import chunkstore as cs
from tests.cli_run import run_cli
from tests.group.hierarchy_children import ATTR_ROUNDS, attr_writer, copy_group
from tests.multiproc import context, run_together

zarr = pytest.importorskip("zarr")


def _cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return run_cli(*args, cwd=cwd, unset=("CHUNKSTORE_TRACEBACK",))


def _zarr_members(path, fmt, consolidated):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = zarr.open_group(str(path), mode="r", zarr_format=fmt,
                            use_consolidated=consolidated)
        return sorted((k, getattr(m, "shape", None), dict(m.attrs))
                      for k, m in g.members(max_depth=None))


def _tree_files(root) -> list[str]:
    out = []
    for d, _dirs, files in os.walk(root):
        out += [os.path.relpath(os.path.join(d, f), root) for f in files]
    return sorted(out)


# ---------------------------------------------------------------------------------------
# attributes written by zarr-python with NaN / Infinity
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", [3, 2])
def test_zarr_python_nan_attribute_does_not_lock_out_the_data(tmp_path, fmt):
    p = tmp_path / "z.zarr"
    z = zarr.open_group(str(p), mode="w", zarr_format=fmt)
    za = z.create_array("a", shape=(3,), dtype="f8")
    za[:] = [1.0, 2.0, 3.0]
    z.create_array("b", shape=(1,), dtype="i1")
    za.attrs["valid_max"] = float("inf")   # e.g. CF metadata converted from netCDF
    za.attrs["missing"] = float("nan")
    g = cs.open_group(str(p), mode="r")
    assert g.keys() == ["a", "b"]
    a = cs.open_array(str(p), path="a", mode="r")
    np.testing.assert_array_equal(a[:], [1.0, 2.0, 3.0])
    assert a.attrs["valid_max"] == float("inf")


# ---------------------------------------------------------------------------------------
# attributes chunkstore accepts but then cannot read back
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", [3, 2])
def test_deeply_nested_attribute_is_refused_or_readable(tmp_path, fmt):
    p = tmp_path / "d.zarr"
    a = cs.create_array(str(p), shape=(2,), dtype="i1", zarr_format=fmt)
    a[:] = [5, 6]
    deep: object = 1
    for _ in range(130):
        deep = [deep]
    try:
        a.attrs["deep"] = deep
    except (ValueError, cs.MetadataError):
        pass  # refusing is fine; then nothing may have been written
    b = cs.open_array(str(p), mode="r")   # either way the array must still open
    np.testing.assert_array_equal(b[:], [5, 6])


@pytest.mark.parametrize("fmt", [3, 2])
def test_odd_but_valid_attribute_values_round_trip(tmp_path, fmt):
    p = tmp_path / "o.zarr"
    a = cs.create_array(str(p), shape=(2,), dtype="i1", zarr_format=fmt)
    want = {"": 1, "a\x00b": "x\x00y", "ü€𝄞": {"nested": [None, True, 1.5]},
            "big": 2**70, "nbig": -(2**64), "tup": [1, 2], "np": 1.5}
    a.attrs.update({**want, "tup": (1, 2), "np": np.float32(1.5)})
    assert dict(cs.open_array(str(p), mode="r").attrs) == want
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert dict(zarr.open_array(str(p), mode="r", zarr_format=fmt).attrs) == want
    with pytest.raises(ValueError):
        a.attrs["nan"] = float("nan")
    with pytest.raises(TypeError):
        a.attrs[1] = 2  # type: ignore[index]
    assert dict(cs.open_array(str(p), mode="r").attrs) == want


# ---------------------------------------------------------------------------------------
# consolidated metadata kept current from handles opened before consolidation
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", [3, 2])
def test_members_created_through_a_handle_opened_before_consolidation(tmp_path, fmt):
    p = tmp_path / "c.zarr"
    root = cs.group(str(p), zarr_format=fmt)
    g = root.create_group("g")
    g.create_array("a", shape=(2,), dtype="i1")
    cs.consolidate_metadata(str(p))       # e.g. by another process
    root.create_array("b", shape=(3,), dtype="i1")
    g.create_group("h")
    root["c"] = np.ones(2)
    real = _zarr_members(p, fmt, False)
    assert [k for k, _, _ in real] == ["b", "c", "g", "g/a", "g/h"]
    assert _zarr_members(p, fmt, True) == real


@pytest.mark.parametrize("fmt", [3, 2])
def test_delete_and_replace_through_a_handle_opened_before_consolidation(tmp_path, fmt):
    p = tmp_path / "c.zarr"
    root = cs.group(str(p), zarr_format=fmt)
    a = root.create_array("a", shape=(2,), dtype="i1")
    a[:] = [1, 2]
    root.create_group("g")
    cs.consolidate_metadata(str(p))
    del root["g"]
    root.create_array("a", shape=(7,), dtype="f8", fill_value=0.5, overwrite=True)
    fresh = cs.open_group(str(p))
    assert "g" not in fresh
    assert fresh["a"].shape == (7,)
    np.testing.assert_array_equal(fresh["a"][:], np.full(7, 0.5))
    assert _zarr_members(p, fmt, True) == _zarr_members(p, fmt, False)


@pytest.mark.parametrize("fmt", [3, 2])
def test_two_consolidated_handles_merge_their_changes(tmp_path, fmt):
    p = tmp_path / "m.zarr"
    root = cs.group(str(p), zarr_format=fmt)
    root.create_array("a", shape=(2,), dtype="i1")
    cs.consolidate_metadata(str(p))
    one, two = cs.open_group(str(p)), cs.open_group(str(p))
    one.create_array("x", shape=(1,), dtype="i1")
    two.create_array("y", shape=(1,), dtype="i1")
    one["a"].resize(5)
    two["a"].attrs["k"] = 1
    two.attrs["gk"] = 3
    one.attrs["ga"] = 4
    want = [("a", (5,), {"k": 1}), ("x", (1,), {}), ("y", (1,), {})]
    assert _zarr_members(p, fmt, False) == want
    assert _zarr_members(p, fmt, True) == want
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert dict(zarr.open_consolidated(str(p), zarr_format=fmt).attrs) == {"gk": 3, "ga": 4}


@pytest.mark.parametrize("fmt", [3, 2])
def test_nested_consolidated_copies_follow_every_entry_point(tmp_path, fmt):
    p = tmp_path / "n.zarr"
    root = cs.group(str(p), zarr_format=fmt)
    root.create_group("g").create_group("h").create_array("a", shape=(4,), dtype="i4",
                                                          chunks=(2,))
    cs.consolidate_metadata(str(p), path="g")
    cs.consolidate_metadata(str(p))
    cs.open_array(str(p), path="g/h/a").resize(7)
    cs.open_group(str(p / "g" / "h")).attrs["x"] = 1
    cs.open_group(str(p / "g")).create_array("new", shape=(1,), dtype="u1")
    cs.open_group(str(p), path="g/h").create_group("deep/er")
    del cs.open_group(str(p))["g/h/deep"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        top = zarr.open_consolidated(str(p), zarr_format=fmt)
        sub = zarr.open_consolidated(str(p), path="g", zarr_format=fmt)
        got_top = sorted((k, getattr(m, "shape", None), dict(m.attrs))
                         for k, m in top.members(max_depth=None))
        got_sub = sorted((k, getattr(m, "shape", None), dict(m.attrs))
                         for k, m in sub.members(max_depth=None))
    assert got_top == [("g", None, {}), ("g/h", None, {"x": 1}), ("g/h/a", (7,), {}),
                       ("g/new", (1,), {})]
    assert got_sub == [("h", None, {"x": 1}), ("h/a", (7,), {}), ("new", (1,), {})]


def test_write_through_stale_consolidated_entry_corrupts_replaced_array(tmp_path):
    p = tmp_path / "w.zarr"
    root = cs.group(str(p))
    a = root.create_array("a", shape=(4,), dtype="i2", chunks=(4,))
    a[:] = [1, 2, 3, 4]
    cs.consolidate_metadata(str(p))
    root.create_array("a", shape=(4,), dtype="f8", chunks=(4,), overwrite=True)
    fresh = cs.open_group(str(p))["a"]
    assert fresh.dtype == np.dtype("f8")
    fresh[:] = [9, 9, 9, 9]
    np.testing.assert_array_equal(cs.open_array(str(p), path="a", mode="r")[:],
                                  np.full(4, 9.0))


# ---------------------------------------------------------------------------------------
# concurrent attribute writers on a consolidated v2 group
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", [2, 3])
def test_four_processes_set_distinct_attributes_of_consolidated_nodes(tmp_path, fmt):
    p = tmp_path / "mp.zarr"
    root = cs.group(str(p), zarr_format=fmt)
    root.create_array("a", shape=(2,), dtype="i1")
    cs.consolidate_metadata(str(p))
    run_together(attr_writer, lambda i: (str(p), i), timeout=60)
    want_g = {f"k{i}_{n}": {"v": [i, n], "\u00e9\u0301": n} for i in range(4)
              for n in range(ATTR_ROUNDS)}
    want_a = {f"k{i}_{n}": n for i in range(4) for n in range(ATTR_ROUNDS)}
    g = cs.open_group(str(p), use_consolidated=False)
    assert dict(g.attrs) == want_g
    assert dict(g["a"].attrs) == want_a
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z = zarr.open_consolidated(str(p), zarr_format=fmt)
        assert dict(z.attrs) == want_g
        assert dict(z["a"].attrs) == want_a


# ---------------------------------------------------------------------------------------
# copy: SIGKILL mid-copy, then the re-run
# ---------------------------------------------------------------------------------------

def test_group_copy_killed_midway_then_rerun_is_exact(tmp_path):
    import signal
    import time
    src, dst = tmp_path / "src.zarr", tmp_path / "dst.zarr"
    g = cs.group(str(src))
    g.attrs["a"] = 1
    # 3,600 chunks copied 800 bytes at a time: about a second, so the kill below lands
    # mid-copy (with 900, a quiet machine finished in 0.25 s, before a fixed 0.3 s sleep)
    x = g.create_array("x", shape=(600, 600), dtype="f8", chunks=(10, 10), compressors=None)
    data = np.random.default_rng(0).random((600, 600))
    x[:] = data
    y = g.create_group("s").create_array("y", shape=(100,), dtype="i4", chunks=(3,),
                                         shards=(30,))
    y[:] = np.arange(100)
    ctx = context()
    started = ctx.Event()
    proc = ctx.Process(target=copy_group, args=(str(src), str(dst), started))
    proc.start()
    assert started.wait(60)
    chunks_of_x = dst / "x" / "c"
    deadline = time.monotonic() + 60
    while sum(1 for _ in chunks_of_x.rglob("*")) < 200:  # some of x copied, not all
        assert proc.is_alive() and time.monotonic() < deadline
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    assert proc.exitcode == -signal.SIGKILL
    if os.path.exists(dst):
        with pytest.raises((cs.ContainsGroupError, cs.ContainsArrayError)):
            cs.copy(cs.open_group(str(src), mode="r"), str(dst))
    cs.copy(cs.open_group(str(src), mode="r"), str(dst), overwrite=True)
    d = cs.open_group(str(dst), mode="r")
    np.testing.assert_array_equal(d["x"][:], data)
    np.testing.assert_array_equal(d["s/y"][:], np.arange(100))
    assert dict(d.attrs) == {"a": 1}
    assert [k for k, _ in d.members(max_depth=None)] == ["s", "s/y", "x"]
    assert not [f for f in _tree_files(dst) if ".chunkstore-tmp" in f]


# ---------------------------------------------------------------------------------------
# replacing subtrees through URLs inside a consolidated store
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", [3, 2])
def test_subtrees_replaced_through_inner_urls_keep_consolidated_exact(tmp_path, fmt):
    p = tmp_path / "r.zarr"
    root = cs.group(str(p), zarr_format=fmt)
    g = root.create_group("g")
    g.create_array("a", shape=(2,), dtype="i1")
    g.create_group("h").create_array("b", shape=(1,), dtype="i1")
    root.create_group("k")
    cs.consolidate_metadata(str(p))
    cs.open_group(str(p / "g"), mode="w", zarr_format=fmt)
    cs.open(str(p / "k"), mode="w", shape=(3,), dtype="u2", zarr_format=fmt)
    cs.save_group(str(p / "s"), x=np.arange(2), zarr_format=fmt)
    cs.copy(cs.open_array(str(p), path="k"), str(p), path="g/kk")
    want = [("g", None, {}), ("g/kk", (3,), {}), ("k", (3,), {}), ("s", None, {}),
            ("s/x", (2,), {})]
    assert _zarr_members(p, fmt, False) == want
    assert _zarr_members(p, fmt, True) == want


# ---------------------------------------------------------------------------------------
# copying whole hierarchies across formats and store kinds
# ---------------------------------------------------------------------------------------

def _snapshot(group):
    out = {}
    for k, m in group.members(max_depth=None):
        if isinstance(m, cs.Array):
            out[k] = (m.shape, m.chunks, str(m.dtype), repr(m.fill_value),
                      {a: v for a, v in m.attrs.items() if a != "_ARRAY_DIMENSIONS"},
                      repr(m[...].tolist()), m.dimension_names)
        else:
            out[k] = dict(m.attrs)
    return dict(group.attrs), out


@pytest.mark.parametrize("fmt", [None, 2, 3])
@pytest.mark.parametrize("suffix", [".zarr", ".zip"])
def test_group_copy_of_every_kind_is_exact(tmp_path, fmt, suffix):
    src = tmp_path / "src.zarr"
    root = cs.group(str(src))
    root.attrs["top"] = {"n": [1, 2.5, None], "ü": "€"}
    a = root.create_array("sh", shape=(10, 6), dtype="i2", chunks=(2, 3), shards=(4, 6),
                          fill_value=-7, dimension_names=["y", "x"])
    a[:5] = np.arange(30).reshape(5, 6)
    s = root.create_array("str", shape=(5,), dtype=str, chunks=(2,))
    s[:] = np.array(["a", "βγ", "", "x" * 100, "\x00z"], dtype=object)
    rec_t = np.dtype([("a", "<i4"), ("b", "<f8")])
    r = root.create_array("rec", shape=(3,), dtype=rec_t, chunks=(2,))
    r[:] = np.array([(1, 2.5), (4, -1.0), (7, 1e300)], dtype=rec_t)
    sub = root.create_group("sub")
    sub.attrs["u"] = "ü"
    f = sub.create_array("f", shape=(3,), dtype="f4", chunks=(2,), fill_value=float("nan"))
    f[1] = 2.5
    b = sub.create_array("b", shape=(2, 2), dtype=bool, chunks=(1, 1))
    b[0, 1] = True
    c = sub.create_array("c", shape=(2,), dtype="c16", chunks=(1,))
    c[:] = [1 + 2j, -3j]
    t = sub.create_array("t", shape=(2,), dtype="M8[s]", chunks=(1,))
    t[:] = np.array(["2020-01-01", "1970-01-02"], dtype="M8[s]")
    sub.create_group("empty")
    want = _snapshot(root)
    dst = tmp_path / f"dst{suffix}"
    kwargs = {} if fmt is None else {"zarr_format": fmt}
    out = cs.copy(root, str(dst), **kwargs)
    assert out.zarr_format == (fmt or 3)
    got = _snapshot(cs.open_group(str(dst), mode="r"))
    assert got == want


def test_v3_v2_v3_copy_round_trips_attributes(tmp_path):
    a = cs.create_array(str(tmp_path / "a"), shape=(2, 3), dtype="i2",
                        dimension_names=["y", "x"], attributes={"u": 1})
    b = cs.copy(a, str(tmp_path / "b"), zarr_format=2)
    c = cs.copy(b, str(tmp_path / "c"), zarr_format=3)
    assert c.dimension_names == ("y", "x")
    assert dict(c.attrs) == {"u": 1}


# ---------------------------------------------------------------------------------------
# CLI: refused commands print one line, exit 2 and change nothing
# ---------------------------------------------------------------------------------------

_REFUSED = [
    ("copy", "src.zarr", "out.npy", "--node", "s"),                 # strings -> .npy
    ("copy", "src.zarr", "out2.zarr", "--chunks", "2"),             # a group's chunks
    ("copy", "src.zarr", "src.zarr/a/inner", "--node", "a"),        # inside its source
    ("copy", "src.zarr", "o4.zarr", "--node", "nope"),
    ("copy", "src.zarr", "o5.zarr", "--node", "a", "--dst-node", "../esc"),
    ("copy", "src.zarr", "o6.zarr", "--node", "a", "--dst-node", "zarr.json"),
    ("copy", "src.zarr", "o8 spaced ü.zarr", "--node", "a", "--shards", "3", "--chunks", "2"),
    ("copy", "src.zarr", "plain.txt", "--node", "a", "--overwrite"),
    ("copy", "src.zarr", "x.npy", "--node", "a"),
    ("copy", "plain.txt", "o9.zarr"),
    ("attrs", "src.zarr", "--node", "../x"),
    ("info", "missing dir ü"),
    ("tree", "plain.txt"),
    ("clean", "src.zarr/a/zarr.json"),
    ("verify", "src.zarr/a/zarr.json"),
    ("dump", "src.zarr", "--node", "a", "--selection", "9"),
    ("rechunk", "src.zarr", "src.zarr/a/r", "--node", "a", "--chunks", "3"),
]


@pytest.fixture
def cli_dir(tmp_path):
    g = cs.group(str(tmp_path / "src.zarr"))
    s = g.create_array("s", shape=(3,), dtype=str, chunks=(2,))
    s[:] = np.array(["a", "b", "c"], dtype=object)
    a = g.create_array("a", shape=(4,), dtype="i4", chunks=(2,))
    a[:] = [1, 2, 3, 4]
    np.save(tmp_path / "x.npy", np.arange(3))
    (tmp_path / "plain.txt").write_text("hello")
    return tmp_path


@pytest.mark.parametrize("args", _REFUSED, ids=[" ".join(a) for a in _REFUSED])
def test_cli_refused_commands_change_nothing(cli_dir, args):
    before = {f: open(cli_dir / f, "rb").read() for f in _tree_files(cli_dir)}
    r = _cli(*args, cwd=cli_dir)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    after = {f: open(cli_dir / f, "rb").read() for f in _tree_files(cli_dir)}
    assert after == before
    assert sorted(os.listdir(cli_dir)) == ["plain.txt", "src.zarr", "x.npy"]


def test_cli_ls_and_members_agree_on_lookalike_names(tmp_path):
    p = tmp_path / "u.zarr"
    root = cs.group(str(p))
    nfc, nfd = unicodedata.normalize("NFC", "é"), unicodedata.normalize("NFD", "é")
    root.create_array(nfc, shape=(2,), dtype="i1")
    root.create_array(nfd, shape=(3,), dtype="i1")
    root.create_group("Ab")
    root.create_group("aB")
    assert root.keys() == sorted([nfc, nfd, "Ab", "aB"])
    assert root[nfc].shape == (2,) and root[nfd].shape == (3,)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert sorted(zarr.open_group(str(p), mode="r").keys()) == root.keys()
    r = _cli("ls", "-r", str(p))
    assert r.returncode == 0, r.stderr
    names = sorted(line.split()[0].lstrip("/") for line in r.stdout.splitlines())
    assert names == root.keys()


def test_long_member_name_is_refused_and_lists_nothing(tmp_path):
    p = tmp_path / "l.zarr"
    root = cs.group(str(p))
    with pytest.raises(OSError):
        root.create_array("x/y/" + "z" * 300, shape=(2,), dtype="i1")
    assert root.keys() == []
    assert json.loads((p / "zarr.json").read_text())["node_type"] == "group"
