"""Fixes of red-team round 8 findings C2 (reserved member names), D (verify and symlinks
leading outside), E (clean on a directory that is not a store) and F (a malformed
--storage-option)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.nodes.paths import check_new_path, normalize_path
from chunkstore.storage.local.temp import HOST_TAG
from tests.cli_run import run_cli


def _cli(*args):
    r = run_cli(*args)
    return r.returncode, r.stdout, r.stderr


def _files(root) -> dict:
    """relative path -> sha1 of every regular file below ``root`` (links not followed)."""
    out = {}
    for dp, _dn, fn in os.walk(root):
        for f in fn:
            full = os.path.join(dp, f)
            if not os.path.islink(full):
                with open(full, "rb") as fh:
                    out[os.path.relpath(full, root)] = hashlib.sha1(fh.read()).hexdigest()
    return out


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


# -- C2: names reserved by the formats or by chunkstore ----------------------------------
RESERVED = [".chunkstore-tmp-x", ".zattrs", ".zarray", ".zgroup", ".zmetadata", "zarr.json"]


@pytest.mark.parametrize("name", RESERVED)
@pytest.mark.parametrize("where", ["{n}", "a/{n}", "{n}/b", "a/{n}/b"])
def test_check_new_path_refuses_a_reserved_component(name, where):
    path = where.format(n=name)
    with pytest.raises(cs.InvalidKeyError) as info:
        check_new_path("/" + path + "/")
    assert repr(path) in str(info.value) and repr(name) in str(info.value)
    assert "reserved" in str(info.value)
    assert normalize_path(path) == path  # reading existing stores is unchanged


@pytest.mark.parametrize("path", ["a", "a/b", "zattrs", "x.zarray", "chunkstore-tmp", ""])
def test_check_new_path_accepts_ordinary_names(path):
    assert check_new_path(path) == path


# Every new node is placed by hierarchy/placement.place_node, which calls check_new_path.
@pytest.mark.parametrize("name", RESERVED)
def test_creating_a_node_with_a_reserved_name_is_refused(tmp_path, name):
    where = str(tmp_path / "g.zarr")
    g = cs.open_group(where, mode="w")
    before = _files(where)
    for create in (lambda: g.create_array(name, data=np.arange(3), chunks=(3,)),
                   lambda: g.create_group(f"sub/{name}"),
                   lambda: cs.create_array(where, path=f"x/{name}", shape=(2,), dtype="i1"),
                   lambda: cs.open_group(where, path=name, mode="a")):
        with pytest.raises(cs.InvalidKeyError, match="reserved"):
            create()
    assert _files(where) == before


# -- D: verify and symlinks leading outside the root ----------------------------------------
@pytest.mark.parametrize("what", ["chunk dir", "chunk file"])
def test_verify_reports_each_symlink_leading_outside(tmp_path, what):
    where = tmp_path / "s.zarr"
    a = cs.create_array(str(where), shape=(8, 8), chunks=(4, 4), dtype="i4")
    a[:] = np.arange(64).reshape(8, 8)
    outside = tmp_path / "outside"
    if what == "chunk dir":
        shutil.copytree(where / "c", outside)
        shutil.rmtree(where / "c")
        os.symlink(outside, where / "c")
        bad = ["c"]
    else:
        outside.mkdir()
        for name in ("0/1", "1/0"):
            shutil.move(where / "c" / name, outside / name.replace("/", "-"))
            os.symlink(outside / name.replace("/", "-"), where / "c" / name)
        bad = ["c/0/1", "c/1/0"]
    before_out, before_in = _files(outside), _files(where)
    assert a.store.links_outside("") == {k: a.store.links_outside("")[k] for k in bad}
    assert not set(bad) & set(a.store.list_prefix(""))  # listings still leave them out

    rc, out, err = _cli("verify", where)
    assert rc == 1, (rc, out, err)
    lines = out.splitlines()
    assert [ln.split(":")[0] for ln in lines if ln.startswith("BAD ")] == [
        f"BAD {k}" for k in bad], out
    for k in bad:
        assert f"store key {k!r} leads outside the root" in out
    assert lines[-1].endswith(f", {len(bad)} bad"), lines[-1]
    assert _files(outside) == before_out and _files(where) == before_in


def test_verify_of_a_group_names_the_link_below_its_array(tmp_path):
    where = tmp_path / "g.zarr"
    root = cs.open_group(str(where), mode="w")
    root.create_array("x", data=np.arange(8), chunks=(4,))
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.move(where / "x" / "c" / "1", outside / "1")
    os.symlink(outside / "1", where / "x" / "c" / "1")
    rc, out, _ = _cli("verify", where)
    assert rc == 1 and out.splitlines()[0].startswith("BAD x/c/1: store key 'x/c/1' leads "
                                                      "outside"), out


def test_verify_ignores_symlinks_inside_the_root(tmp_path):
    where = tmp_path / "s.zarr"
    a = cs.create_array(str(where), shape=(8,), chunks=(4,), dtype="i4")
    a[:] = np.arange(8)
    os.rename(where / "c" / "1", where / "real1")
    os.symlink(where / "real1", where / "c" / "1")
    assert a.store.links_outside("") == {}
    rc, out, _ = _cli("verify", where)
    assert rc == 0 and out.splitlines()[-1].endswith(", 0 bad"), out


# -- E: clean refuses a directory that is not a Zarr store ----------------------------------
@pytest.mark.parametrize("layout", ["plain dir", "parent of stores"])
def test_clean_refuses_a_directory_that_is_not_a_store(tmp_path, layout):
    home = tmp_path / "home"
    if layout == "plain dir":
        home.mkdir()
        tmp = home / f".chunkstore-tmp-{HOST_TAG}-{_dead_pid()}-1-0"
    else:
        cs.create_array(str(home / "other.zarr"), data=np.arange(4), chunks=(2,))
        tmp = home / "other.zarr" / "c" / f".chunkstore-tmp-{HOST_TAG}-{_dead_pid()}-1-0"
    tmp.write_bytes(b"x")
    os.utime(tmp, (0, 0))
    rc, out, err = _cli("clean", home, "--older-than", "0")
    assert rc == 2 and out == "", (rc, out, err)
    assert err.splitlines() == [f"chunkstore clean: error: {home}: not a Zarr store (no "
                                "zarr.json, .zarray or .zgroup at its root)"]
    assert tmp.read_bytes() == b"x"


@pytest.mark.parametrize("fmt", [2, 3])
def test_clean_still_sweeps_a_store(tmp_path, fmt):
    where = tmp_path / "s.zarr"
    cs.create_array(str(where), data=np.arange(4), chunks=(2,), zarr_format=fmt)
    keep = _files(where)
    tmp = where / f".chunkstore-tmp-{HOST_TAG}-{_dead_pid()}-1-0"
    tmp.write_bytes(b"x")
    rc, out, err = _cli("clean", where)
    assert (rc, out, err) == (0, f"{where}: removed 1 leftover temporary file(s)\n", "")
    assert not tmp.exists() and _files(where) == keep


# -- F: a malformed --storage-option is a usage error --------------------------------------
@pytest.mark.parametrize("item", ["noequals", "=value"])
def test_malformed_storage_option_is_one_line_exit_2(tmp_path, item):
    src = tmp_path / "s.zarr"
    cs.create_array(str(src), data=np.arange(4), chunks=(2,))
    rc, out, err = _cli("copy", src, tmp_path / "o.zarr", f"--storage-option={item}")
    assert (rc, out) == (2, "")
    assert err.splitlines() == [f"chunkstore copy: error: --storage-option {item!r}: "
                                "expected KEY=VALUE"]
    assert not (tmp_path / "o.zarr").exists()


def test_verify_through_a_wrapper_store_reports_the_link_outside(tmp_path):
    """A LocalStore inside wrapper stores (metrics, latency) is still asked for its links
    leading outside the root: the wrappers keep its keys."""
    from chunkstore.api.verify import verify
    from chunkstore.storage import LatencyStore, LocalStore, MetricsStore

    where = tmp_path / "w.zarr"
    a = cs.create_array(str(where), shape=(8,), chunks=(4,), dtype="i4")
    a[:] = np.arange(8)
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.move(where / "c" / "1", outside / "1")
    os.symlink(outside / "1", where / "c" / "1")
    before = _files(outside), _files(where)
    report = verify(LatencyStore(MetricsStore(LocalStore(str(where))), 0.0))
    assert list(report.bad) == ["c/1"] and "leads outside the root" in report.bad["c/1"]
    assert (_files(outside), _files(where)) == before
