"""Issue 34, item 2: ``chunkstore header`` shows every node of a hierarchy with its data
type, dimensions, shape, chunks, fill value and attributes, as compact as ``ncdump -h``,
from one walk of the hierarchy (no request per node)."""

from __future__ import annotations

import numpy as np
import pytest

import chunkstore as cs


@pytest.fixture
def hierarchy(tmp_path):
    """A v3 hierarchy: attributes on the root, a nested group, a string array, a sharded
    array, an array without dimension names and a long attribute."""
    path = tmp_path / "h.zarr"
    root = cs.group(str(path), attributes={"title": "header test", "version": 2})
    root.create_array("temp", shape=(20, 30), chunks=(8, 8), dtype="f4",
                      dimension_names=["y", "x"], fill_value=np.nan,
                      attributes={"units": "K", "long_name": "température"})
    obs = root.create_group("obs", attributes={"site": "A"})
    obs.create_array("names", shape=(3,), dtype=str, chunks=(3,))
    obs.create_array("counts", shape=(16, 10), chunks=(4, 5), shards=(8, 10), dtype="i2",
                     attributes={"notes": "n" * 500})
    root.create_group("empty")
    return path


EXPECTED = [
    "group / (Zarr v3)",
    '  :title = "header test"',
    "  :version = 2",
    "  group empty",
    "  group obs",
    '    :site = "A"',
    "    int16 counts(16, 10)  shards=(8, 10) chunks=(4, 5)  fill_value=0",
    '      :notes = "' + "n" * 199 + '... (all: chunkstore attrs {path} --node obs/counts)',
    '    string names(3)  chunks=(3,)  fill_value=""',
    "  float32 temp(y=20, x=30)  chunks=(8, 8)  fill_value=NaN",
    '    :units = "K"',
    '    :long_name = "température"',
]


def test_header_of_a_hierarchy(cli, hierarchy):
    result = cli("header", str(hierarchy))
    assert result.status == 0 and result.err == ""
    assert result.out.splitlines() == [line.format(path=hierarchy) for line in EXPECTED]


def test_header_of_a_consolidated_store_reads_no_member_document(cli, hierarchy):
    """With consolidated metadata the walk needs no member document: with every one of them
    deleted the header is the same (bar the root's flag)."""
    cs.consolidate_metadata(str(hierarchy))
    for doc in hierarchy.rglob("zarr.json"):
        if doc.parent != hierarchy:
            doc.unlink()
    result = cli("header", str(hierarchy))
    assert result.status == 0, result.err
    expected = [line.format(path=hierarchy) for line in EXPECTED]
    expected[0] = "group / (Zarr v3, consolidated)"
    assert result.out.splitlines() == expected


def test_header_levels_nodes_and_v2_dimensions(cli, hierarchy, tmp_path):
    out = cli("header", str(hierarchy), "--level", "1").out.splitlines()
    assert [line for line in out if not line.strip().startswith(":")] == [
        "group / (Zarr v3)", "  group empty", "  group obs",
        "  float32 temp(y=20, x=30)  chunks=(8, 8)  fill_value=NaN"]
    out = cli("header", str(hierarchy), "--node", "obs").out.splitlines()
    assert out[0] == "group /obs (Zarr v3)" and out[2].startswith("  int16 counts(16, 10)")
    assert cli("header", str(hierarchy), "--node", "temp").out.splitlines()[0] == (
        "float32 /temp(y=20, x=30)  chunks=(8, 8)  fill_value=NaN")
    # v2: xarray's _ARRAY_DIMENSIONS attribute is shown as the dimensions, not as an attribute
    v2 = tmp_path / "v2.zarr"
    cs.array(np.arange(6, dtype="<i8").reshape(2, 3), store=str(v2), zarr_format=2,
             dimension_names=["a", "b"], attributes={"k": [1, None]}, chunks=(1, 3))
    assert cli("header", str(v2)).out.splitlines() == [
        "int64 /(a=2, b=3)  chunks=(1, 3)  fill_value=0", "  :k = [1, null]"]


def test_header_errors_are_one_line(cli, tmp_path):
    result = cli("header", str(tmp_path / "missing.zarr"))
    assert result.status == 2 and len(result.err_lines) == 1 and "missing.zarr" in result.err
    result = cli("header", "s.zarr", "--level", "0")
    assert result.status == 2 and "argument --level: must be at least 1, got 0" in result.err
