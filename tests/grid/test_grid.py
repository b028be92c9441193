"""ChunkGrid (issue 31) and rectilinear arrays (issue 33): the grids' arithmetic, the
``rectilinear`` document (read, written, refused), creation from dask-style chunks, the
layout of rectilinear shards, and what an array of such a grid shows."""

from __future__ import annotations

import json

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.api.verify import verify
from chunkstore.errors import MetadataError, UnsupportedError
from chunkstore.grid.base import ChunkGrid
from chunkstore.grid.rectilinear import RectilinearGrid
from chunkstore.grid.regular import RegularGrid
from chunkstore.io.layout import ChunkLayout
from chunkstore.metadata import ArrayMetadataV3
from chunkstore.metadata.rectilinear import compress_runs, edges_to_json


# -- the grids -------------------------------------------------------------------------------
def test_rectilinear_grid_arithmetic():
    g = RectilinearGrid((25, 30), ((10, 10, 5), 15))
    assert isinstance(g, ChunkGrid) and not g.is_regular
    assert g.grid_shape == (3, 2)
    assert g.chunks == ((10, 10, 5), (15, 15))
    assert g.chunk_region((1, 1)) == (slice(10, 20), slice(15, 30))
    assert g.chunk_shape((2, 0)) == (5, 15)
    assert [g.chunk_of(0, i) for i in (0, 9, 10, 19, 20, 24)] == [0, 0, 1, 1, 2, 2]
    assert g.chunks_on_axis(0, 9, 21) == range(0, 3)
    assert g.chunks_on_axis(0, 10, 20) == range(1, 2)
    assert g.chunks_on_axis(1, 5, 5) == range(0)
    assert list(g.all_coords()) == [(i, j) for i in range(3) for j in range(2)]
    bounds, regular = g.axis_chunking
    assert bounds.tolist() == [0, 10, 20, 25] and regular == 15


def test_trailing_chunks_past_the_edge_are_kept():
    """A shrunk array keeps its chunks (zarr-python's rule); only those holding part of
    the array count, and the last of them reaches past the edge."""
    g = RectilinearGrid((12,), ((5, 5, 5, 5),))
    assert g.grid_shape == (3,) and g.chunks == ((5, 5, 2),)
    assert g.chunk_region((2,)) == (slice(10, 12),) and g.chunk_shape((2,)) == (5,)
    assert RectilinearGrid((0,), ((5,),)).grid_shape == (0,)


def test_regular_grid_agrees_with_a_rectilinear_one():
    reg, rect = RegularGrid((23, 7), (5, 3)), RectilinearGrid((23, 7), ((5, 5, 5, 5, 5), 3))
    assert reg.is_regular and reg.grid_shape == rect.grid_shape == (5, 3)
    assert reg.chunks == rect.chunks == ((5, 5, 5, 5, 3), (3, 3, 1))
    for coords in reg.all_coords():
        assert reg.chunk_region(coords) == rect.chunk_region(coords)
    assert reg.axis_chunking == (5, 3)  # what the indexers always took: unchanged


@pytest.mark.parametrize("specs, message", [
    (((10, 10),), "sum to 20"),
    (((10, 0, 20),), "positive"),
    ((5, 5), "2 axes"),
])
def test_bad_grids_refused(specs, message):
    with pytest.raises(ValueError, match=message):
        RectilinearGrid((25,), specs)


# -- the document ----------------------------------------------------------------------------
@pytest.mark.parametrize("lengths, written", [
    ((10, 10, 10, 10, 10, 5, 5), [[10, 5], [5, 2]]),
    ((15, 15), [[15, 2]]),
    ((10, 5), [10, 5]),  # no run: the lengths as they are
    ((3, 5, 5, 2), [3, [5, 2], 2]),  # shorter by one entry: a run
    ((1, 2, 1), [1, 2, 1]),
    ((1, 1, 1, 2), [[1, 3], 2]),
])
def test_runs_only_where_shorter(lengths, written):
    assert edges_to_json([lengths])["configuration"]["chunk_shapes"] == [written]
    assert compress_runs([10, 10, 10, 5]) == [[10, 3], 5]


def _doc(chunk_grid, shape=(60, 30)):
    return {"zarr_format": 3, "node_type": "array", "shape": list(shape), "data_type": "int32",
            "chunk_grid": chunk_grid, "chunk_key_encoding": {"name": "default"},
            "fill_value": 0, "codecs": [{"name": "bytes"}]}


def test_document_round_trip():
    grid = {"name": "rectilinear", "configuration": {
        "kind": "inline", "chunk_shapes": [[[10, 5], [5, 2]], 15]}}
    meta = ArrayMetadataV3.from_json(_doc(grid), "a/zarr.json")
    assert meta.chunk_edges == ((10, 10, 10, 10, 10, 5, 5), 15)
    assert meta.chunk_shape == (10, 15)
    assert meta.to_json()["chunk_grid"] == grid
    grown = meta.replace(shape=(70, 40))
    assert grown.chunk_edges == ((10, 10, 10, 10, 10, 5, 5, 10), 15)


@pytest.mark.parametrize("grid, message", [
    ({"name": "rectilinear", "configuration": {"kind": "file", "chunk_shapes": [5, 5]}},
     "kind 'file'"),
    ({"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": [5]}},
     "one entry per axis"),
    ({"name": "rectilinear", "configuration": {"kind": "inline",
                                               "chunk_shapes": [[[10, 5, 1]], 5]}},
     r"\[10, 5, 1\]"),
    ({"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": [[0, 60], 5]}},
     "axis 0: 0"),
    ({"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": [[10, 10], 5]}},
     "sum to 20, less than the axis length 60"),
])
def test_bad_documents_refused(grid, message):
    with pytest.raises(MetadataError, match=message):
        ArrayMetadataV3.from_json(_doc(grid), "arr/zarr.json")


def test_a_huge_run_is_refused_before_it_is_expanded():
    """``[1, 10**12]`` is a few bytes standing for 10**12 lengths: they count against
    ``metadata.max_elements`` as the JSON values they would be, before any is made."""
    grid = {"name": "rectilinear", "configuration": {"kind": "inline",
                                                     "chunk_shapes": [[[1, 10**12]], 5]}}
    with pytest.raises(MetadataError, match="metadata.max_elements"):
        ArrayMetadataV3.from_json(_doc(grid), "arr/zarr.json")
    grid["configuration"]["chunk_shapes"] = [[[2**70, 1]], 5]
    with pytest.raises(MetadataError, match="int64"):
        ArrayMetadataV3.from_json(_doc(grid), "arr/zarr.json")


def test_unknown_grid_named(tmp_path):
    a = cs.create_array(str(tmp_path / "a.zarr"), shape=(5,), chunks=(2,), dtype="i4")
    doc = json.loads((tmp_path / "a.zarr" / "zarr.json").read_text())
    doc["chunk_grid"] = {"name": "hexagonal", "configuration": {}}
    (tmp_path / "a.zarr" / "zarr.json").write_text(json.dumps(doc))
    with pytest.raises(UnsupportedError, match=r"a\.zarr.*unknown chunk grid 'hexagonal'"):
        cs.open_array(str(tmp_path / "a.zarr"))
    assert a.shape == (5,)


# -- creation --------------------------------------------------------------------------------
def test_dask_chunks_make_a_rectilinear_grid():
    a = cs.zeros((25, 30), chunks=((10, 10, 5), (15, 15)), dtype="i4")
    assert a.metadata.to_json()["chunk_grid"] == {"name": "rectilinear", "configuration": {
        "kind": "inline", "chunk_shapes": [[[10, 2], 5], [[15, 2]]]}}
    assert a.read_chunk_sizes == a.write_chunk_sizes == ((10, 10, 5), (15, 15))
    regular = cs.zeros((25, 30), chunks=(10, 15), dtype="i4")
    assert regular.metadata.to_json()["chunk_grid"]["name"] == "regular"
    g = cs.open_group(cs.MemoryStore(), mode="w")
    b = g.create_array("b", shape=(25,), chunks=((20, 5),), dtype="f8")
    assert b.metadata.chunk_edges == ((20, 5),) and g["b"].read_chunk_sizes == ((20, 5),)


@pytest.mark.parametrize("kwargs, message", [
    ({"chunks": ((10, 10),)}, "sum to 20"),
    ({"chunks": ((10, 0, 15),)}, "positive"),
    ({"chunks": ((10, 10, 5),), "zarr_format": 2}, "needs zarr_format=3"),
    ({"chunks": ((10, 10, 5),), "shards": (25,)}, "inside shards must be regular"),
    ({"chunks": (5,), "shards": ((10, 12, 3),)}, "multiple of the chunk length"),
])
def test_bad_creation_refused_naming_the_array(kwargs, message):
    with pytest.raises(ValueError, match=message) as e:
        cs.create_array(cs.MemoryStore(), name="arr", shape=(25,), dtype="i4", **kwargs)
    assert "arr" in str(e.value)


def test_v2_refused_naming_the_array(tmp_path):
    with pytest.raises(ValueError, match=r"old\.zarr.*rectilinear.*zarr_format=3"):
        cs.create_array(str(tmp_path / "old.zarr"), shape=(25,), chunks=((10, 10, 5),),
                        dtype="i4", zarr_format=2)


# -- the layout of rectilinear shards --------------------------------------------------------
def test_layout_of_rectilinear_shards():
    layout = ChunkLayout((60, 30), (5, 5), (20, 15), lambda c: "c/" + "/".join(map(str, c)),
                         ((10, 10, 20, 20), 15))
    assert layout.read_grid.is_regular and not layout.write_grid.is_regular
    assert layout.unit_grid == (4, 2) and layout.chunk_grid == (12, 6)
    assert layout.unit_of((5, 4)) == (2, 1)  # rows 25..30 lie in the shard of rows 20..40
    assert layout.inner_index((5, 4)) == 1 * 3 + 1  # shard (2, 1) holds 4 x 3 chunks
    assert layout.unit_shape((0, 0)) == (10, 15) and layout.unit_shape((3, 1)) == (20, 15)
    assert layout.unit_region((1, 1)) == (slice(10, 20), slice(15, 30))
    assert layout.is_aligned((slice(10, 40), slice(0, 30)))
    assert not layout.is_aligned((slice(15, 40), slice(0, 30)))
    blocks = list(layout.aligned_blocks((slice(5, 60), slice(0, 30)), 4, 1))
    assert [b[0] for b in blocks[::2]] == [slice(5, 10), slice(10, 20), slice(20, 40),
                                           slice(40, 60)]
    assert layout.count_outside((25, 30)) == 2 and list(layout.units_outside((25, 30))) == [
        (3, 0), (3, 1)]
    assert layout.unit_of_key("c/3/1") == (3, 1) and layout.unit_of_key("c/4/0") is None


def test_edge_chunk_is_never_replaced_blind():
    layout = ChunkLayout((23,), (10,), None, str, ((10, 10, 10),))
    assert [layout.at_edge((c,)) for c in range(3)] == [False, False, True]
    exact = ChunkLayout((30,), (10,), None, str, ((10, 10, 10),))
    assert not exact.at_edge((2,))


# -- what an array shows ---------------------------------------------------------------------
def test_array_views(tmp_path):
    a = cs.create_array(str(tmp_path / "r.zarr"), shape=(60, 30),
                        chunks=((10,) * 5 + (5, 5), (15, 15)), dtype="i4")
    a[...] = np.arange(1800, dtype="i4").reshape(60, 30)
    assert "<variable> [[[10, 5], [5, 2]], [[15, 2]]]" in repr(a)
    assert a.info["Chunk shape"] == "<variable> [[[10, 5], [5, 2]], [[15, 2]]]"
    assert (a.nchunks, a.nchunks_initialized, a.cdata_shape) == (14, 14, (7, 2))
    with pytest.raises(NotImplementedError, match="read_chunk_sizes"):
        _ = a.chunks
    assert a.shards is None
    assert [len(rows) for rows in [list(a)[:10], list(a)[50:55]]] == [10, 5]
    report = verify(str(tmp_path / "r.zarr"))
    assert report.ok and report.chunks == 14
    copied = cs.copy(a, str(tmp_path / "copy.zarr"))
    assert copied.metadata.chunk_edges == a.metadata.chunk_edges
    np.testing.assert_array_equal(copied[...], a[...])
    like = cs.zeros_like(a)
    assert like.read_chunk_sizes == a.read_chunk_sizes
    s = cs.create_array(str(tmp_path / "s.zarr"), shape=(60, 30), chunks=(5, 5),
                        shards=((10, 10, 20, 20), (15, 15)), dtype="i4")
    s[...] = a[...]
    assert s.info["Shard shape"] == "<variable> [[[10, 2], [20, 2]], [[15, 2]]]"
    assert s.info["Chunk shape"] == "(5, 5)"
    assert s.compressors == a.compressors and s.compressors  # those inside the shards
    assert (s.nchunks, s.nchunks_initialized) == (72, 72)
    with pytest.raises(NotImplementedError, match="write_chunk_sizes"):
        _ = s.shards
    assert verify(str(tmp_path / "s.zarr")).shards == 8
    copied = cs.copy(s, str(tmp_path / "scopy.zarr"))
    assert copied.write_chunk_sizes == s.write_chunk_sizes and copied.chunks == (5, 5)
    np.testing.assert_array_equal(copied[...], a[...])


def test_a_grid_of_many_lengths():
    """Every chunk of its own shape (400 shapes): the engines of the shapes go side by side
    (small groups) and still write and read exactly what NumPy does."""
    lengths = tuple(range(1, 21))
    shape = (sum(lengths), sum(lengths))
    a = cs.create_array(cs.MemoryStore(), shape=shape, chunks=(lengths, lengths), dtype="f4")
    x = np.random.default_rng(3).random(shape).astype("f4")
    a[...] = x
    np.testing.assert_array_equal(a[...], x)
    a[5:-3:2, 7:] = -x[5:-3:2, 7:]
    x[5:-3:2, 7:] *= -1
    np.testing.assert_array_equal(a[...], x)
    assert len(a._engine._ios) == 400 and a.nchunks_initialized == 400
