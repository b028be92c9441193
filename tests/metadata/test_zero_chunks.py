"""Chunk length 0 on an empty axis, as zarr-python 3 accepts and writes it.

zarr-python creates ``shape=(0, 5), chunks=(0, 5)`` and stores ``0`` in ``.zarray``
``chunks`` / v3 ``chunk_grid.chunk_shape``. chunkstore reads such metadata (the array is
empty along that axis; internally the axis gets chunk length 1, so no grid arithmetic
divides by 0), writes the 0 back unchanged while the axis stays empty, and refuses a 0 on
an axis that is not empty (zarr-python fails there with ZeroDivisionError).
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

import chunkstore as cs
import chunkstore.dask  # noqa: F401  (cs.dask.from_store)
from chunkstore.errors import MetadataError
from chunkstore.metadata import ArrayMetadataV2, ArrayMetadataV3

zarr = pytest.importorskip("zarr")

V2 = {"zarr_format": 2, "shape": [0, 5], "chunks": [0, 5], "dtype": "<f4", "fill_value": 0.0,
      "order": "C", "filters": None, "dimension_separator": ".", "compressor": None}
V3 = {"zarr_format": 3, "node_type": "array", "shape": [0, 5], "data_type": "float32",
      "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [0, 5]}},
      "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
      "fill_value": 0.0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
      "attributes": {}}


def _chunks(doc: dict) -> list[int]:
    return doc["chunks"] if doc["zarr_format"] == 2 else \
        doc["chunk_grid"]["configuration"]["chunk_shape"]


def _set_chunks(doc: dict, shape: list[int], chunks: list[int]) -> dict:
    doc = copy.deepcopy(doc)
    doc["shape"] = shape
    if doc["zarr_format"] == 2:
        doc["chunks"] = chunks
    else:
        doc["chunk_grid"]["configuration"]["chunk_shape"] = chunks
    return doc


@pytest.mark.parametrize(("cls", "doc"), [(ArrayMetadataV2, V2), (ArrayMetadataV3, V3)],
                         ids=["v2", "v3"])
def test_documents_round_trip_with_zero(cls, doc):
    meta = cls.from_json(copy.deepcopy(doc), "x.zarr")
    assert meta.shape == (0, 5)
    assert meta.chunk_shape == (1, 5) and meta.zero_chunk_axes == (0,)
    assert _chunks(meta.to_json()) == [0, 5]
    assert meta.replace(attributes={"a": 1}).to_json()["zarr_format"] == doc["zarr_format"]
    assert _chunks(meta.replace(attributes={"a": 1}).to_json()) == [0, 5]
    grown = meta.replace(shape=(3, 5))  # no longer empty: a real chunk length again
    assert _chunks(grown.to_json()) == [1, 5]
    assert _chunks(grown.replace(shape=(0, 5)).to_json()) == [0, 5]
    # built from arguments (as creation does): the same normalization
    built = cls(shape=(0, 0, 2), dtype=np.dtype("f4"), chunk_shape=(0, 0, 2),
                fill_value=np.float32(0), **({"codecs": tuple(doc["codecs"])}
                                              if cls is ArrayMetadataV3 else {}))
    assert built.chunk_shape == (1, 1, 2) and _chunks(built.to_json()) == [0, 0, 2]


@pytest.mark.parametrize("doc", [V2, V3], ids=["v2", "v3"])
@pytest.mark.parametrize(("shape", "chunks"), [([4, 5], [0, 5]), ([0, 5], [0, -1]),
                                               ([3], [0])])
def test_zero_on_a_non_empty_axis_is_refused(doc, shape, chunks):
    cls = ArrayMetadataV2 if doc["zarr_format"] == 2 else ArrayMetadataV3
    with pytest.raises(MetadataError, match=r"x\.zarr.*chunk"):
        cls.from_json(_set_chunks(doc, shape, chunks), "x.zarr")


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize(("shape", "chunks"), [((0,), (0,)), ((0, 5), (0, 5)),
                                               ((3, 0), (3, 0)), ((0, 0), (0, 0))])
def test_zarr_python_arrays_with_zero_chunks(tmp_path, fmt, shape, chunks):
    path = str(tmp_path / "z.zarr")
    zarr.create_array(path, shape=shape, chunks=chunks, dtype="i2", zarr_format=fmt)
    name = ".zarray" if fmt == 2 else "zarr.json"
    before = json.load(open(f"{path}/{name}"))
    assert _chunks(before) == list(chunks)

    a = cs.open_array(path, mode="r+")
    assert a.shape == shape and a.nchunks == 0 and a.nchunks_initialized == 0
    assert a[...].shape == shape and a[...].dtype == np.dtype("i2")
    assert a.oindex[tuple([] if n == 0 else slice(None) for n in shape)].shape == shape
    assert len(list(cs.dask.from_store(a).compute().reshape(-1))) == 0

    a.attrs["touched"] = True  # a metadata rewrite keeps zarr's 0
    after = json.load(open(f"{path}/{name}"))
    assert _chunks(after) == list(chunks)
    z = zarr.open_array(path, mode="r")
    assert z.chunks == chunks and z.attrs["touched"] is True

    if len(shape) == 1 or shape[1] != 0:  # grow the empty axis: data lands, zarr reads it
        grow = (4,) + shape[1:]
        a.resize(grow)
        data = np.arange(np.prod(grow), dtype="i2").reshape(grow)
        a[...] = data
        np.testing.assert_array_equal(zarr.open_array(path, mode="r")[...], data)
        np.testing.assert_array_equal(cs.open_array(path, mode="r")[...], data)


def test_consolidated_metadata_keeps_zero(tmp_path):
    path = str(tmp_path / "g.zarr")
    g = zarr.open_group(path, mode="w", zarr_format=2)
    g.create_array("e", shape=(0, 4), chunks=(0, 4), dtype="f8")
    zarr.consolidate_metadata(path)
    root = cs.open_group(path, mode="r+", use_consolidated=True)
    assert root["e"].shape == (0, 4)
    root["e"].attrs["x"] = 1  # refreshes the consolidated copy
    cons = json.load(open(f"{path}/.zmetadata"))["metadata"]["e/.zarray"]
    assert cons["chunks"] == [0, 4]
    assert zarr.open_consolidated(path, mode="r")["e"].chunks == (0, 4)
