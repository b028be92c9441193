"""Red team: metadata read-modify-writes (append, resize, attributes) and consolidated
copies, across handles, threads and processes. Exact final shapes, rows and keys."""

from __future__ import annotations

import os

import numpy as np
import pytest

import chunkstore as cs
from tests.multiproc import run_together

N = 4



def _run(target, args_of, n=N, timeout=240):
    run_together(target, args_of, n, timeout)


# -- resize (shrink) through a handle that has not seen another handle's append ----------------
@pytest.mark.parametrize("sharded", [False, True], ids=["plain", "sharded"])
def test_shrink_through_a_stale_handle_leaves_no_stale_rows(tmp_path, sharded):
    """Two handles on one array; one appends 10 rows, the other (opened before) shrinks
    to 10 and grows back to 30. DESIGN: "shrinking deletes chunks outside"; resize's
    docstring: "growing again shows fill_value, never stale data".

    Observed: rows 20..30 come back holding the appended 7s: ``resize`` clears chunks
    outside using the handle's cached shape (20), not the shape it commits over (30)."""
    where = str(tmp_path / "r.zarr")
    a = cs.create_array(where, shape=(20,), chunks=(10,), shards=(10,) if sharded else None,
                        dtype="i4", fill_value=0)
    a[:] = 1
    b = cs.open_array(where, mode="r+")  # sees shape (20,)
    a.append(np.full(10, 7, dtype="i4"))  # stored shape (30,)
    b.resize(10)
    assert cs.open_array(where, mode="r").shape == (10,)
    b.resize(30)
    np.testing.assert_array_equal(b[:], np.r_[np.ones(10), np.zeros(20)].astype("i4"))


def test_shrink_by_a_stale_handle_that_thinks_it_is_growing(tmp_path):
    """The stale handle believes the shape is 20 and 'resizes' to 20: the stored shape
    30 shrinks to 20 without anything being cleared."""
    where = str(tmp_path / "r2.zarr")
    a = cs.create_array(where, shape=(20,), chunks=(10,), dtype="i4", fill_value=0)
    a[:] = 1
    b = cs.open_array(where, mode="r+")
    a.append(np.full(10, 7, dtype="i4"))
    b.resize(20)
    b.resize(30)
    np.testing.assert_array_equal(b[:], np.r_[np.ones(20), np.zeros(10)].astype("i4"))


# -- v2 append ----------------------------------------------------------------------------------
@pytest.mark.parametrize("where_kind", ["in-group", "with-attrs"])
def test_v2_append_writes_the_rows_it_reserved(tmp_path, where_kind):
    """v2 ``append`` on an array that has a ``.zattrs`` (held since cf34b49; before it:)

    Observed: ValueError "value of shape (4,) cannot be assigned to a selection of shape
    (0,)" in most trials, AFTER the shape was grown (4 rows of fill left behind):
    ``update_node`` applies ``append``'s change function to both ``.zarray`` and
    ``.zattrs`` units; the ``.zattrs`` build re-reads ``.zarray`` after the other unit
    committed and overwrites the reserved start row with the new end."""
    failures = []
    for trial in range(12):
        root = str(tmp_path / f"t{trial}.zarr")
        if where_kind == "in-group":
            g = cs.open_group(root, mode="w", zarr_format=2)
            a = g.create_array("arr", shape=(4,), chunks=(4,), dtype="i4")
        else:
            a = cs.create_array(root, shape=(4,), chunks=(4,), dtype="i4", zarr_format=2,
                                attributes={"x": 1})
        a[:] = 1
        try:
            shape = a.append(np.full(4, 2, dtype="i4"))
        except ValueError as e:
            failures.append(str(e))
            continue
        assert shape == (8,)
        np.testing.assert_array_equal(a[:], [1, 1, 1, 1, 2, 2, 2, 2])
    assert not failures, f"{len(failures)}/12 appends failed: {failures[0]}"


def _v2_appender(where, proc, start):
    a = cs.open_array(where, mode="r+")
    start.wait()
    for k in range(10):
        a.append(np.array([100 * proc + k], dtype="i4"))


def test_v2_mp_appenders(tmp_path):
    """Held since cf34b49. Before it: exit 0 in every process, and ~27 of 40 rows were
    fill (0) -- rows written at another appender's reserved start."""
    where = str(tmp_path / "log2.zarr")
    cs.create_array(where, shape=(0,), chunks=(8,), dtype="i4", zarr_format=2,
                    attributes={"kind": "log"})
    _run(_v2_appender, lambda i: (where, i))
    got = cs.open_array(where, mode="r")[:]
    assert sorted(got.tolist()) == sorted(100 * p + k for p in range(N) for k in range(10))


# -- consolidated metadata ------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", [3, 2])
def test_member_opened_through_its_own_directory_keeps_consolidated_current(tmp_path, fmt):
    """``cs.open_array("g.zarr/arr")`` (the member's directory as the store) then grow it
    and set an attribute; a consolidated open of g.zarr must show the new shape and
    attribute (or refuse with a clear error), never the old shape.

    Observed: consolidated shape (4,) vs real (8,): the consolidating ancestors are
    looked for inside the store, whose root is the member itself."""
    root = str(tmp_path / "g.zarr")
    g = cs.open_group(root, mode="w", zarr_format=fmt)
    a = g.create_array("arr", shape=(4,), chunks=(4,), dtype="i4")
    a[:] = 1
    cs.consolidate_metadata(root)
    m = cs.open_array(os.path.join(root, "arr"), mode="r+")
    m.resize(8)
    m[4:] = 2
    m.attrs["k"] = "v"
    assert cs.open_array(root, path="arr", mode="r").shape == (8,)
    try:
        c = cs.open_group(root, mode="r", use_consolidated=True)["arr"]
    except cs.errors.ChunkstoreError:
        return  # refusing a stale copy with a clear error is acceptable
    assert c.shape == (8,), f"consolidated open shows the stale shape {c.shape}"
    assert dict(c.attrs) == {"k": "v"}
    np.testing.assert_array_equal(c[:], [1, 1, 1, 1, 2, 2, 2, 2])


def _member_appender(root, proc, start):
    a = cs.open_array(root, path=f"a{proc}", mode="r+")
    start.wait()
    for k in range(15):
        a.append(np.array([k], dtype="i4"))


def _member_attr_writer(root, proc, start):
    a = cs.open_array(root, path=f"a{proc}", mode="r+")
    start.wait()
    for k in range(15):
        a.attrs[f"k{k}"] = k
        a.resize(k + 1)


@pytest.mark.parametrize("fmt", [3, 2])
def test_mp_four_members_of_one_consolidated_group(tmp_path, fmt):
    root = str(tmp_path / "g.zarr")
    g = cs.open_group(root, mode="w", zarr_format=fmt)
    for p in range(N):
        g.create_array(f"a{p}", shape=(0,), chunks=(8,), dtype="i4")
    cs.consolidate_metadata(root)
    # v2 grows through resize and writes attributes (two documents per node)
    _run(_member_appender if fmt == 3 else _member_attr_writer, lambda i: (root, i))
    c = cs.open_group(root, mode="r", use_consolidated=True)
    real = [cs.open_array(root, path=f"a{p}", mode="r").shape for p in range(N)]
    cons = [c[f"a{p}"].shape for p in range(N)]
    assert real == [(15,)] * N
    assert cons == real, f"consolidated {cons} vs real {real}"
    if fmt == 2:
        assert [dict(c[f"a{p}"].attrs) for p in range(N)] == [
            {f"k{k}": k for k in range(15)}] * N


# -- concurrent attribute writers, v2 and v3, arrays and groups -------------------------------
def _attr_writer(root, path, proc, start):
    node = cs.open(root, mode="r+", path=path)
    start.wait()
    for k in range(12):
        node.attrs[f"p{proc}-{k}"] = [proc, k]


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("kind", ["array", "group"])
def test_mp_attribute_writers(tmp_path, fmt, kind):
    root = str(tmp_path / "at.zarr")
    g = cs.open_group(root, mode="w", zarr_format=fmt)
    path = "x"
    if kind == "array":
        g.create_array(path, shape=(3,), chunks=(3,), dtype="i4")
    else:
        g.create_group(path)
    _run(_attr_writer, lambda i: (root, path, i))
    node = cs.open(root, mode="r", path=path)
    assert dict(node.attrs) == {f"p{p}-{k}": [p, k] for p in range(N) for k in range(12)}


def _consolidated_mix(root, proc, start):
    start.wait()
    if proc < 2:
        a = cs.open_array(root, path=f"a{proc}", mode="r+")
        for k in range(12):
            a.append(np.array([k], dtype="i4"))
            a.attrs[f"n{k}"] = k
    elif proc == 2:
        g = cs.open_group(root, mode="r+")
        for k in range(12):
            g.attrs[f"g{k}"] = k
    else:
        for _ in range(6):
            cs.consolidate_metadata(root)


@pytest.mark.parametrize("fmt", [3, 2])
def test_mp_consolidate_group_attrs_and_member_appends_together(tmp_path, fmt):
    """Two member appenders, a writer of the root group's attributes (v3: the same
    zarr.json that holds the consolidated copy) and a process re-consolidating."""
    root = str(tmp_path / "cg.zarr")
    g = cs.open_group(root, mode="w", zarr_format=fmt)
    for p in range(2):
        g.create_array(f"a{p}", shape=(0,), chunks=(4,), dtype="i4")
    cs.consolidate_metadata(root)
    _run(_consolidated_mix, lambda i: (root, i))
    g = cs.open_group(root, mode="r")
    assert dict(g.attrs) == {f"g{k}": k for k in range(12)}
    c = cs.open_group(root, mode="r", use_consolidated=True)
    assert dict(c.attrs) == {f"g{k}": k for k in range(12)}
    for p in range(2):
        real = cs.open_array(root, path=f"a{p}", mode="r")
        assert real.shape == (12,) and sorted(real[:].tolist()) == list(range(12))
        assert c[f"a{p}"].shape == (12,)
        assert dict(c[f"a{p}"].attrs) == {f"n{k}": k for k in range(12)}
