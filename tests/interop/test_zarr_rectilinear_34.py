"""Rectilinear chunk grids (issue 33) both ways against zarr-python >= 3.4, where they are
experimental behind ``array.rectilinear_chunks`` (skipped on an older zarr): plain and
sharded (rectilinear shards of regular inner chunks), bare-int axes among explicit ones.

zarr writes, chunkstore reads (values, chunk sizes) and rewrites its document unchanged;
chunkstore writes, zarr reads; for the same grid both write the same ``chunk_grid`` text
byte for byte, the same document otherwise and the same chunk keys; both grow a grid the
same way on resize.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import chunkstore as cs

from . import chunk_keys, normalize_codecs, read_doc

zarr = pytest.importorskip("zarr")

if "rectilinear_chunks" not in (zarr.config.get("array") or {}):
    pytest.skip(f"zarr {zarr.__version__} has no rectilinear chunk grids (3.4+)",
                allow_module_level=True)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


@pytest.fixture(autouse=True)
def rectilinear_on():
    with zarr.config.set({"array.rectilinear_chunks": True}):
        yield


#: name -> (shape, chunks, shards)
GRIDS: dict[str, tuple[tuple[int, ...], Any, Any]] = {
    "runs": ((60, 30), ((10, 10, 10, 10, 10, 5, 5), (15, 15)), None),
    "bare-int-axis": ((25, 30), ((10, 10, 5), 15), None),
    "no-runs-3d": ((10, 4, 7), ((3, 5, 2), (4,), (2, 2, 2, 1)), None),
    "one-axis": ((23,), ((1, 2, 20),), None),
    "sharded": ((60, 30), (5, 5), ((10, 10, 20, 20), (15, 15))),
    "sharded-bare-int": ((60, 30), (5, 3), ((20, 10, 30), 15)),
}


def data_of(shape: tuple[int, ...]) -> np.ndarray:
    return np.arange(int(np.prod(shape)), dtype="i4").reshape(shape) * 3 - 7


def zarr_create(path: Path, shape, chunks, shards, **kw):
    # zarr's default codecs: bytes + zstd (level 0, no checksum); chunkstore is told the same
    return zarr.create_array(str(path), shape=shape, chunks=chunks, shards=shards,
                             dtype="i4", **kw)


def cs_create(path: Path, shape, chunks, shards, codecs_from: dict[str, Any]):
    codecs = normalize_codecs(codecs_from["codecs"])
    if shards is None:
        return cs.create_array(str(path), shape=shape, chunks=chunks, dtype="i4",
                               compressors=codecs[1:])
    inner = normalize_codecs(codecs[0]["configuration"]["codecs"])
    return cs.create_array(str(path), shape=shape, chunks=chunks, shards=shards, dtype="i4",
                           compressors=inner[1:])


def grid_text(path: Path) -> str:
    """The ``chunk_grid`` member of a stored ``zarr.json``, as written."""
    text = (path / "zarr.json").read_text()
    start = text.index('"chunk_grid"')
    return text[start:text.index('"chunk_key_encoding"')].rstrip().rstrip(",")


@pytest.mark.parametrize("name", list(GRIDS))
def test_zarr_writes_chunkstore_reads(tmp_path, name):
    shape, chunks, shards = GRIDS[name]
    z = zarr_create(tmp_path / "z.zarr", shape, chunks, shards)
    z[...] = data_of(shape)
    before = read_doc(tmp_path / "z.zarr")
    assert before["chunk_grid"]["name"] == "rectilinear"
    a = cs.open_array(str(tmp_path / "z.zarr"), mode="r+")
    np.testing.assert_array_equal(a[...], data_of(shape))
    assert a.read_chunk_sizes == z.read_chunk_sizes
    assert a.write_chunk_sizes == z.write_chunk_sizes
    assert (a.nchunks, a.cdata_shape) == (z.nchunks, z.cdata_shape)
    a.attrs["touched"] = 1  # the document is rewritten: its grid must survive unchanged
    after = read_doc(tmp_path / "z.zarr")
    assert after["chunk_grid"] == before["chunk_grid"]
    assert after["attributes"] == {"touched": 1}


@pytest.mark.parametrize("name", list(GRIDS))
def test_chunkstore_writes_zarr_reads(tmp_path, name):
    shape, chunks, shards = GRIDS[name]
    ref = zarr_create(tmp_path / "ref.zarr", shape, chunks, shards)
    a = cs_create(tmp_path / "c.zarr", shape, chunks, shards, ref.metadata.to_dict())
    want = data_of(shape)
    a[...] = want
    z = zarr.open_array(str(tmp_path / "c.zarr"), mode="r")
    np.testing.assert_array_equal(z[...], want)
    assert z.read_chunk_sizes == a.read_chunk_sizes
    assert z.write_chunk_sizes == a.write_chunk_sizes


@pytest.mark.parametrize("name", list(GRIDS))
def test_documents_and_keys_agree(tmp_path, name):
    shape, chunks, shards = GRIDS[name]
    z = zarr_create(tmp_path / "z.zarr", shape, chunks, shards)
    a = cs_create(tmp_path / "c.zarr", shape, chunks, shards, z.metadata.to_dict())
    assert grid_text(tmp_path / "c.zarr") == grid_text(tmp_path / "z.zarr")  # byte for byte
    ours, theirs = read_doc(tmp_path / "c.zarr"), read_doc(tmp_path / "z.zarr")
    theirs.pop("storage_transformers")  # zarr writes an empty list, chunkstore none
    for doc in (ours, theirs):
        doc["codecs"] = normalize_codecs(doc["codecs"])
        for c in doc["codecs"]:  # the codecs inside the shards, and of their index
            for key in ("codecs", "index_codecs"):
                if key in c["configuration"]:
                    c["configuration"][key] = normalize_codecs(c["configuration"][key])
    assert ours == theirs
    z[...] = a[...] = data_of(shape)
    assert chunk_keys(tmp_path / "c.zarr") == chunk_keys(tmp_path / "z.zarr")


@pytest.mark.parametrize("name", ["runs", "bare-int-axis", "one-axis", "sharded"])
def test_resize_grows_the_grid_as_zarr(tmp_path, name):
    shape, chunks, shards = GRIDS[name]
    z = zarr_create(tmp_path / "z.zarr", shape, chunks, shards)
    a = cs_create(tmp_path / "c.zarr", shape, chunks, shards, z.metadata.to_dict())
    z[...] = a[...] = data_of(shape)
    grow = tuple(n + 10 if i == 0 else n for i, n in enumerate(shape))
    shrink = tuple(n - 7 if i == 0 else n for i, n in enumerate(shape))
    model = data_of(shape)
    for new in (grow, shrink, shape):
        z.resize(new)
        a.resize(new)
        assert read_doc(tmp_path / "c.zarr")["chunk_grid"] == read_doc(tmp_path / "z.zarr")[
            "chunk_grid"], new
        assert a.read_chunk_sizes == z.read_chunk_sizes
        # chunkstore clears what a shrink cuts off (zarr keeps it): growing shows fill
        kept = tuple(slice(0, min(m, n)) for m, n in zip(model.shape, new, strict=True))
        model, old = np.zeros(new, "i4"), model
        model[kept] = old[kept]
        np.testing.assert_array_equal(a[...], model)
        again = zarr.open_array(str(tmp_path / "c.zarr"), mode="r")
        np.testing.assert_array_equal(again[...], model)


def test_sharded_growth_refused_as_zarr(tmp_path):
    """A grown axis gets one more shard as long as the growth: zarr refuses one that the
    inner chunks do not divide, and so does chunkstore (nothing changes)."""
    shape, chunks, shards = GRIDS["sharded"]
    z = zarr_create(tmp_path / "z.zarr", shape, chunks, shards)
    a = cs_create(tmp_path / "c.zarr", shape, chunks, shards, z.metadata.to_dict())
    with pytest.raises(ValueError, match="divisible"):
        z.resize((67, 30))
    with pytest.raises(ValueError, match="multiple of the inner chunk length 5"):
        a.resize((67, 30))
    assert a.shape == shape and read_doc(tmp_path / "c.zarr")["shape"] == list(shape)


def test_chunks_and_shards_raise_as_zarr(tmp_path):
    shape, chunks, _ = GRIDS["runs"]
    z = zarr_create(tmp_path / "z.zarr", shape, chunks, None)
    a = cs.open_array(str(tmp_path / "z.zarr"))
    for obj in (z, a):
        with pytest.raises(NotImplementedError, match="read_chunk_sizes"):
            _ = obj.chunks
    shape, chunks, shards = GRIDS["sharded"]
    z = zarr_create(tmp_path / "s.zarr", shape, chunks, shards)
    a = cs.open_array(str(tmp_path / "s.zarr"))
    assert a.chunks == z.chunks == (5, 5)
    for obj in (z, a):
        with pytest.raises(NotImplementedError, match="write_chunk_sizes"):
            _ = obj.shards


def test_document_text_of_the_issue_example(tmp_path):
    """The issue's example grid: zarr 3.4 writes every run as a pair, ``[[10, 5], [5, 2]]``
    (a pair only where it is shorter than the lengths it stands for)."""
    shape, chunks, _ = GRIDS["runs"]
    zarr_create(tmp_path / "z.zarr", shape, chunks, None)
    cs.create_array(str(tmp_path / "c.zarr"), shape=shape, chunks=chunks, dtype="i4")
    for path in ("z.zarr", "c.zarr"):
        grid = read_doc(tmp_path / path)["chunk_grid"]
        assert json.dumps(grid) == json.dumps({"name": "rectilinear", "configuration": {
            "kind": "inline", "chunk_shapes": [[[10, 5], [5, 2]], [[15, 2]]]}})


@pytest.mark.parametrize("name", ["runs", "sharded"])
def test_zarr_shrunk_grid_read(tmp_path, name):
    """zarr keeps the chunks past a shrunk edge in the document (the last one held reaches
    past it): chunkstore reads such a grid, writes into its edge chunk, and zarr agrees."""
    shape, chunks, shards = GRIDS[name]
    z = zarr_create(tmp_path / "z.zarr", shape, chunks, shards)
    z[...] = data_of(shape)
    z.resize((53, shape[1]))
    doc = read_doc(tmp_path / "z.zarr")
    a = cs.open_array(str(tmp_path / "z.zarr"), mode="r+")
    assert a.read_chunk_sizes == z.read_chunk_sizes and a.nchunks == z.nchunks
    np.testing.assert_array_equal(a[...], z[...])
    a[50:, :] = 1
    again = zarr.open_array(str(tmp_path / "z.zarr"), mode="r")
    np.testing.assert_array_equal(again[50:], np.ones((3, shape[1]), "i4"))
    np.testing.assert_array_equal(again[:50], data_of(shape)[:50])
    assert read_doc(tmp_path / "z.zarr")["chunk_grid"] == doc["chunk_grid"]


def test_dask_irregular_chunks_written_zarr_reads(tmp_path):
    """``cs.dask.to_store`` of irregular dask chunks: zarr reads the rectilinear grid it
    wrote with the dask chunks as its chunk sizes."""
    da = pytest.importorskip("dask.array")
    import chunkstore.dask as csd
    data = data_of((25, 30))
    x = da.from_array(data, chunks=((10, 5, 10), (7, 23)))
    csd.to_store(x, str(tmp_path / "d.zarr"))
    z = zarr.open_array(str(tmp_path / "d.zarr"), mode="r")
    assert z.read_chunk_sizes == x.chunks
    np.testing.assert_array_equal(z[...], data)
