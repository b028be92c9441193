"""Issue 34, item 3: ``chunkstore copy`` of a group copies the whole hierarchy (a v2 -> v3
migration is one command), with one progress line and a summary."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import chunkstore as cs

TEMP = np.arange(50 * 40, dtype="f4").reshape(50, 40) / 7
COUNTS = np.arange(16 * 10, dtype="i2").reshape(16, 10) - 80
NAMES = np.array(["a", "bé", "ccc"], dtype=object)


@pytest.fixture
def v2_store(tmp_path):
    """A consolidated v2 hierarchy as xarray writes one: dimension names in
    ``_ARRAY_DIMENSIONS``, attributes at every level, a string array, an empty group."""
    path = tmp_path / "old.zarr"
    root = cs.group(str(path), zarr_format=2, attributes={"title": "old"})
    temp = root.create_array("temp", shape=TEMP.shape, chunks=(10, 40), dtype="f4",
                             dimension_names=["t", "x"], fill_value=-1.0,
                             attributes={"units": "K"})
    temp[:] = TEMP
    obs = root.create_group("obs", attributes={"site": "A"})
    obs.create_array("counts", shape=COUNTS.shape, chunks=(4, 5), dtype="i2")[:] = COUNTS
    obs.create_array("names", shape=(3,), dtype=str)[:] = NAMES
    root.create_group("empty")
    cs.consolidate_metadata(str(path))
    return path


def _check_copy(path, zarr_format, consolidated):
    root = cs.open_group(str(path), mode="r")
    assert root.zarr_format == zarr_format and root.attrs.asdict() == {"title": "old"}
    assert sorted(k for k, _ in root.members(max_depth=None)) == [
        "empty", "obs", "obs/counts", "obs/names", "temp"]
    temp = root["temp"]
    np.testing.assert_array_equal(temp[:], TEMP)
    assert temp.dtype == np.dtype("f4") and temp.chunks == (10, 40) and temp.fill_value == -1.0
    dims = {"_ARRAY_DIMENSIONS": ["t", "x"]} if zarr_format == 2 else {}  # v2's spelling
    assert temp.attrs.asdict() == {"units": "K", **dims}
    assert tuple(temp.dimension_names) == ("t", "x")
    np.testing.assert_array_equal(root["obs/counts"][:], COUNTS)
    assert root["obs/counts"].chunks == (4, 5)
    assert list(root["obs/names"][:]) == list(NAMES)
    assert root["obs"].attrs.asdict() == {"site": "A"}
    assert (root.info["Consolidated"] == "True") is consolidated


def test_v2_hierarchy_to_v3_in_one_command(cli, v2_store, tmp_path):
    out = tmp_path / "new.zarr"
    result = cli("copy", str(v2_store), str(out), "--zarr-format", "3")
    assert result.status == 0, result.err
    assert re.search(r"^copy: 3/3 blocks in [\d.]+ s", result.err, re.M), result.err
    assert re.search(rf"chunkstore copy: copied {re.escape(str(v2_store))} -> "
                     rf"{re.escape(str(out))} \(group /: 3 arrays and 2 groups below it, "
                     r"[\d.]+ KiB, Zarr v3, consolidated\) in ", result.err), result.err
    _check_copy(out, 3, consolidated=True)
    doc = json.loads((out / "temp" / "zarr.json").read_text())
    # v2's dimension-name attribute became v3's field
    assert doc["dimension_names"] == ["t", "x"] and doc["attributes"] == {"units": "K"}
    assert not list(out.rglob(".z*"))  # nothing of v2 left
    zarr = pytest.importorskip("zarr")  # the reference implementation reads it
    np.testing.assert_array_equal(zarr.open_group(str(out), mode="r")["temp"][:], TEMP)


def test_group_copy_back_to_v2_subtree_and_overwrite(cli, v2_store, tmp_path):
    v3 = tmp_path / "v3.zarr"
    assert cli("copy", str(v2_store), str(v3), "--zarr-format", "3").status == 0
    back = tmp_path / "back.zarr"
    assert cli("convert", str(v3), str(back), "--zarr-format", "2").status == 0
    _check_copy(back, 2, consolidated=True)
    attrs = json.loads((back / "temp" / ".zattrs").read_text())
    assert attrs == {"units": "K", "_ARRAY_DIMENSIONS": ["t", "x"]}
    # a subtree, into a node of another store
    sub = tmp_path / "sub.zarr"
    result = cli("copy", str(v2_store), str(sub), "--node", "obs", "--dst-node", "copies/obs")
    assert result.status == 0, result.err
    copied = cs.open_group(str(sub), mode="r", path="copies/obs")
    assert copied.zarr_format == 2 and sorted(copied.keys()) == ["counts", "names"]
    np.testing.assert_array_equal(copied["counts"][:], COUNTS)
    # an existing target: refused, then replaced with --overwrite
    again = cli("copy", str(v2_store), str(v3))
    assert again.status == 2 and "--overwrite" in again.err
    assert cli("copy", str(v2_store), str(v3), "--overwrite").status == 0
    _check_copy(v3, 2, consolidated=True)


def test_sharded_arrays_keep_their_shards_between_v3_stores(cli, tmp_path):
    src = tmp_path / "s.zarr"
    root = cs.group(str(src))
    root.create_array("a", shape=COUNTS.shape, chunks=(4, 5), shards=(8, 10), dtype="i2")[:] = \
        COUNTS
    out = tmp_path / "o.zarr"
    result = cli("copy", str(src), str(out), "--compressor", "zstd")
    assert result.status == 0, result.err
    a = cs.open_array(str(out), mode="r", path="a")
    assert a.shards == (8, 10) and a.chunks == (4, 5)
    np.testing.assert_array_equal(a[:], COUNTS)
    codecs = json.loads((out / "a" / "zarr.json").read_text())["codecs"][0]["configuration"]
    assert [c["name"] for c in codecs["codecs"]] == ["bytes", "zstd"]
    assert "consolidated" not in result.err  # the source was not


@pytest.mark.parametrize(("extra", "words"), [
    (["--chunks", "3"], "is a group; --chunks is for one array"),
    (["--shards", "8"], "is a group; --shards is for one array"),
])
def test_array_options_with_a_group_are_refused(cli, v2_store, tmp_path, extra, words):
    out = tmp_path / "refused.zarr"
    result = cli("copy", str(v2_store), str(out), *extra)
    assert result.status == 2 and words in result.err and len(result.err_lines) == 1
    assert not out.exists()


def test_group_to_npy_and_onto_itself_are_refused(cli, v2_store, tmp_path):
    result = cli("copy", str(v2_store), str(tmp_path / "x.npy"))
    assert result.status == 2 and "is a group, and a .npy file holds one array" in result.err
    assert not (tmp_path / "x.npy").exists()
    before = sorted(p.relative_to(v2_store) for p in v2_store.rglob("*"))
    result = cli("copy", str(v2_store), str(v2_store / "inside"), "--overwrite")
    assert result.status == 2 and "the same place" in result.err
    assert sorted(p.relative_to(v2_store) for p in v2_store.rglob("*")) == before
    _check_copy(v2_store, 2, consolidated=True)


def test_members_missing_from_a_stale_consolidated_copy_are_copied_too(cli, v2_store, tmp_path):
    """zarr-python adds a member without refreshing ``.zmetadata``: the copy (a migration)
    walks the documents themselves and loses nothing."""
    zarr = pytest.importorskip("zarr")
    late = zarr.open_group(str(v2_store), mode="a", zarr_format=2, use_consolidated=False)
    late.create_array("late", shape=(5,), dtype="i4", chunks=(5,), fill_value=0)[:] = \
        np.arange(5)
    assert '"late/.zarray"' not in (v2_store / ".zmetadata").read_text()  # stale
    out = tmp_path / "new.zarr"
    result = cli("copy", str(v2_store), str(out), "--zarr-format", "3")
    assert result.status == 0, result.err
    assert "4 arrays and 2 groups below it" in result.err
    np.testing.assert_array_equal(cs.open_array(str(out), mode="r", path="late")[:],
                                  np.arange(5))
    # the copy's own consolidated metadata has it
    doc = json.loads((out / "zarr.json").read_text())
    assert "late" in doc["consolidated_metadata"]["metadata"]
