"""``order="F"``: the memory order of what a read returns, as zarr-python 3.1 does.

A v2 array whose ``.zarray`` says ``"order": "F"`` stores its chunks in Fortran order,
and zarr-python gives F-ordered results for basic, orthogonal and block selections
(coordinate/mask selections, which return points, are C-ordered). v3 has no ``order``
field (a transpose codec does the job): zarr-python returns C-ordered results, and so
does chunkstore. Values are the same either way; only the layout differs.
"""

from __future__ import annotations

import numpy as np
import pytest

import chunkstore as cs

zarr = pytest.importorskip("zarr")

# zarr-python: "the `order` keyword argument has no effect for Zarr format 3 arrays"
pytestmark = pytest.mark.filterwarnings("ignore:The `order` keyword")

DATA = np.arange(3 * 5 * 7, dtype="f8").reshape(3, 5, 7)
IDX = (np.array([[0, 1], [2, 0]]), np.array([[0, 1], [2, 3]]), np.array([[6, 1], [2, 3]]))
SELECTIONS = {
    "all": lambda a: a[...],
    "slices": lambda a: a[0:2, 1:4, ::2],
    "int": lambda a: a[1],
    "basic-get": lambda a: a.get_basic_selection((slice(1, 3), slice(None), 4)),
    "oindex": lambda a: a.oindex[[0, 2], [4, 0, 1], :],
    "blocks": lambda a: a.blocks[0, 1],
    "asarray": lambda a: np.asarray(a),
    "vindex": lambda a: a.vindex[IDX],
    "mask": lambda a: a.get_mask_selection(DATA % 3 == 0),
}


def _layout(x: np.ndarray) -> str:
    if x.ndim < 2 or (x.flags.c_contiguous and x.flags.f_contiguous):
        return "any"
    return "F" if x.flags.f_contiguous else "C" if x.flags.c_contiguous else "strided"


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("writer", ["zarr", "chunkstore"])
def test_result_order_as_zarr_python(tmp_path, fmt, writer):
    path = str(tmp_path / "f.zarr")
    lib = zarr if writer == "zarr" else cs
    w = lib.create_array(path, shape=DATA.shape, chunks=(2, 2, 3), dtype="f8",
                         zarr_format=fmt, order="F")
    w[...] = DATA
    ours = cs.open_array(path, mode="r")
    ref = zarr.open_array(path, mode="r")
    for name, select in SELECTIONS.items():
        got, want = select(ours), select(ref)
        np.testing.assert_array_equal(got, want, err_msg=name)
        assert _layout(got) == _layout(want), (name, _layout(got), _layout(want))
        if fmt == 2 and name not in ("vindex", "mask"):
            assert _layout(got) in ("F", "any"), name
        if fmt == 3:
            assert _layout(got) in ("C", "any"), name


def test_out_keeps_its_own_layout():
    a = cs.create_array(None, shape=(4, 6), chunks=(2, 3), dtype="i4", zarr_format=2,
                        order="F")
    a[...] = np.arange(24).reshape(4, 6)
    out = np.zeros((4, 6), dtype="i4")  # C-ordered: filled in place, as given
    a.get_basic_selection(..., out=out)
    assert out.flags.c_contiguous
    np.testing.assert_array_equal(out, np.arange(24).reshape(4, 6))


@pytest.mark.parametrize(("shape", "chunks"), [((4, 6), (2, 3)), ((5, 7), (5, 7)),
                                               ((6, 4, 8), (2, 3, 4)), ((6, 4), (6, 1))])
@pytest.mark.parametrize("compressors", ["auto", None])
def test_order_f_values_on_aligned_and_partial_reads(shape, chunks, compressors):
    data = np.random.default_rng(len(shape)).random(shape)
    a = cs.create_array(None, shape=shape, chunks=chunks, dtype="f8", zarr_format=2,
                        order="F", compressors=compressors)
    a[...] = data
    for sel in (tuple(slice(0, c) for c in chunks), tuple(slice(c, 2 * c) for c in chunks),
                tuple(slice(1, None) for _ in shape), (Ellipsis,)):
        got = a[sel]
        np.testing.assert_array_equal(got, data[sel])
        assert got.flags.f_contiguous
