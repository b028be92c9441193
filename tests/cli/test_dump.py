"""Issue 15, item 7: ``dump`` prints a header and the values, as h5dump / ncdump do, and
refuses to print a huge array without a selection."""

from __future__ import annotations

import ast

import numpy as np
import pytest

from chunkstore.cli.dump import parse_selection

from .conftest import DATA


def values_of(out: str) -> np.ndarray:
    return np.array(ast.literal_eval(out.split("data:\n", 1)[1]))


def test_dump_selection_header_and_values(cli):
    result = cli("dump", "s.zarr", "--node", "x", "--selection", "0:5, :3")
    assert result.status == 0 and result.err == ""
    header = result.out.split("data:", 1)[0]
    assert "array /x (Zarr v3)" in header and "data type        int32" in header
    assert "shape            (20, 30)" in header and "dimension names  y, x" in header
    assert "layout           chunks=(8, 8)" in header and '"units": "m"' in header
    assert "selection        [0:5, 0:3] -> shape (5, 3)" in header
    np.testing.assert_array_equal(values_of(result.out), DATA[0:5, :3])


def test_dump_whole_small_array_and_sharded(cli):
    out = cli("dump", "sharded.zarr", "--selection", "...,::10").out
    assert "layout           shards=(8, 10) chunks=(4, 5)" in out
    np.testing.assert_array_equal(values_of(out), DATA[:, ::10])
    np.testing.assert_array_equal(values_of(cli("dump", "s.zarr", "--node", "sub/z").out),
                                  np.zeros(4))


def test_dump_refuses_a_huge_array_without_selection(cli):
    result = cli("dump", "big.zarr")
    assert result.status == 2 and len(result.err_lines) == 1
    assert "1,000,000 values" in result.err and "--selection" in result.err
    assert cli("dump", "big.zarr", "--selection", "0:2, 0:3").status == 0
    assert cli("dump", "big.zarr", "--selection", "::2").status == 2


@pytest.mark.parametrize(("text", "expected"), [
    ("", (slice(0, 4, 1), slice(0, 6, 1))),
    ("1", (1, slice(0, 6, 1))),
    ("-1, ::2", (3, slice(0, 6, 2))),
    ("..., 2:", (slice(0, 4, 1), slice(2, 6, 1))),
    (":, -3:-1", (slice(0, 4, 1), slice(3, 5, 1))),
])
def test_parse_selection(text, expected):
    assert parse_selection(text, (4, 6)) == expected
