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


@pytest.mark.parametrize("stage", [64, 4096, 1 << 20])
def test_staged_copy_of_a_far_source_matches_numpy(stage):
    # the source is >= FAR bytes apart along the destination's inner axis: copied slab
    # by slab through a buffer of ``stage`` bytes, into a strided destination too
    from chunkstore.dask.permute import is_far
    a = np.random.default_rng(1).standard_normal((70, 33, 40)).astype("f4")
    t = a.transpose(2, 1, 0)
    big = np.zeros((45, 33, 70), "f4")
    out = big[3:43]
    assert is_far(out.shape, out.strides, t.strides)
    copy_permuted(out, t, tile=64, stage=stage)
    np.testing.assert_array_equal(out, t)
    assert not big[:3].any() and not big[43:].any()


def test_near_source_is_not_staged():
    from chunkstore.dask.permute import is_far
    dst = np.empty((512, 64), "f4")
    src = np.empty((64, 512), "f4").transpose()  # 2 KiB apart: tiles, no staging
    assert not is_far(dst.shape, dst.strides, src.strides)
    far = np.empty((64, 2048), "f4").transpose()  # 8 KiB apart
    assert is_far((2048, 64), np.empty((2048, 64), "f4").strides, far.strides)
