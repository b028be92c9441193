"""The tiled transposed copy equals NumPy's for every permutation and tile size."""

import itertools

import numpy as np
import pytest

from chunkstore.dask.permute import RUN, copy_permuted, tiles_for


@pytest.mark.parametrize("shape", [(3, 5, 7), (40, 1, 33), (64, 64), (5, 6, 7, 8), (9,),
                                   (17, 300, 19)])
@pytest.mark.parametrize("tile", [16, 64, 4096])
def test_copy_permuted_matches_numpy(shape, tile):
    a = np.random.default_rng(0).standard_normal(shape).astype("f4")
    for axes in itertools.permutations(range(len(shape))):
        t = a.transpose(axes)
        out = np.empty(t.shape, "f4")
        copy_permuted(out, t, tile=tile)
        np.testing.assert_array_equal(out, t)


def test_copy_into_a_strided_destination():
    a = np.arange(4 * 6 * 8, dtype="i8").reshape(4, 6, 8)
    big = np.zeros((10, 6, 4), "i8")
    copy_permuted(big[2:10], a.transpose(2, 1, 0), tile=32)
    np.testing.assert_array_equal(big[2:10], a.transpose(2, 1, 0))
    assert not big[:2].any()


def test_tiles_take_the_innermost_axis_of_both_sides():
    # (1024, 1024, 32) float32 transposed to (32, 1024, 1024): a tile holds every element of
    # the source's inner axis (32) and a run of the destination's inner axis, cut to RUN
    # elements because the source is 128 KiB apart along it (cache-set conflicts)
    dst = np.empty((32, 1024, 1024), "f4")
    src = np.empty((1024, 1024, 32), "f4").transpose(2, 1, 0)
    lengths = tiles_for(dst.shape, dst.strides, src.strides, 4, 256 * 1024)
    assert lengths[0] == 32 and lengths[2] == RUN
    assert np.prod(lengths) * 4 <= 256 * 1024
    assert np.prod(lengths) * 4 >= 64 * 1024  # still large tiles: few Python-level copies


def test_long_runs_when_the_source_is_near():
    # a 2-D transpose of a (64, 512) block: the source is 2 KiB apart along the
    # destination's inner axis, so runs stay whole
    dst = np.empty((512, 64), "f4")
    src = np.empty((64, 512), "f4").transpose()
    lengths = tiles_for(dst.shape, dst.strides, src.strides, 4, 256 * 1024)
    assert lengths[1] == 64


def test_shape_mismatch_refused():
    with pytest.raises(ValueError, match="differ"):
        copy_permuted(np.empty((2, 3)), np.empty((3, 2)))
