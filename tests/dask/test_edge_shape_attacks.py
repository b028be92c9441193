"""Red team: feature crossings at the edges of shapes (0-d arrays, 0-length axes) through
rechunk, transpose, to_store, copy and verify."""

from __future__ import annotations

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.api.verify import verify


@pytest.mark.parametrize("dtype,fill,value", [("f8", float("nan"), 3.0), ("i4", 0, 7),
                                              ("i8", 5, 9)])
@pytest.mark.parametrize("how", ["rechunk", "transpose", "to_store", "copy"])
def test_zero_d_array_through_every_copy_path(tmp_path, how, dtype, fill, value):
    """Observed (rechunk, transpose): the copy holds uninitialised memory (5e-324, 0, 1)
    instead of the value: ``copy_block`` (then in ``dask/rechunk.py``) reads into
    ``block[local(piece)]``, which for a 0-d block is a scalar copy, not a view, and then
    writes the untouched ``np.empty`` block."""
    z = cs.create_array(str(tmp_path / "z.zarr"), shape=(), dtype=dtype, fill_value=fill)
    z[...] = value
    out_store = str(tmp_path / "out.zarr")
    if how == "rechunk":
        out = cs.dask.rechunk(z, (), out_store).execute()
    elif how == "transpose":
        out = cs.dask.transpose(z, (), out_store)
    elif how == "to_store":
        out = cs.dask.to_store(cs.dask.from_store(z), out_store)
    else:
        out = cs.copy(z, out_store)
    assert out.shape == ()
    assert out[...] == value
    assert cs.open_array(out_store, mode="r")[...] == value
    assert verify(cs.open_array(out_store, mode="r")).ok


@pytest.mark.parametrize("sharded", [False, True])
def test_zero_length_axis_shrink_and_regrow(tmp_path, sharded):
    a = cs.create_array(str(tmp_path / "e.zarr"), shape=(0, 5), chunks=(4, 5),
                        shards=(8, 5) if sharded else None, dtype="i4", fill_value=-1)
    a[:] = 1  # nothing to write
    a.resize(6, 5)
    a[:] = 7
    a.resize(0, 5)
    assert a.nchunks_initialized == 0
    a.resize(3, 5)
    np.testing.assert_array_equal(a[:], np.full((3, 5), -1))
    for out in (cs.dask.rechunk(cs.open_array(str(tmp_path / "e.zarr")), (2, 5),
                                str(tmp_path / "r.zarr")).execute(),
                cs.dask.transpose(cs.open_array(str(tmp_path / "e.zarr")), (1, 0),
                                  str(tmp_path / "t.zarr"))):
        assert (out[...] == -1).all()
    assert verify(a.store).ok
