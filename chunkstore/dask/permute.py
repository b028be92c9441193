"""A cache-friendly ``dst[...] = src.transpose(axes)`` for large blocks.

NumPy copies a transposed array element by element in the destination's order, so one
side is read or written with a huge stride: a (1024, 1024, 16) float32 chunk copied into
its (16, 1024, 1024) transposed place took 2.2 s (4.4 s for 128 MiB), 10x its decode
time. Copying tile by tile, each tile holding the innermost axis of both sides and at
most ``TILE`` bytes, keeps both sides in cache: every cache line read or written is used
whole. NumPy's copy loops over the destination's innermost axis; when the source's
stride along it is a page or more, a long run there touches as many source lines as it
has elements, all mapping to the same few cache sets: such runs are cut to ``RUN``
elements (measured, (1024, 1024, 16) float32 -> (16, 1024, 1024): 121 -> 40-55 ms per
64 MiB; other shapes the same or faster, ``benchmarks`` in the commit message).

Such far-apart sources are copied in two steps instead (``STAGE``): a slab holding the
innermost axes of both sides (about ``STAGE`` bytes) is first gathered into a small
contiguous buffer in the source's memory order (long runs read), then permuted out of
that buffer, which stays in L2 (measured on one core, float32: (1024, 1024, 16) ->
(16, 1024, 1024) 0.6 -> 2.1 GB/s, (4096, 4096) transposed 0.7 -> 1.9 GB/s, 64^4
reversed 0.3 -> 1.4 GB/s; a slab of 4 MiB falls out of L2 and is slower than tiles).

>>> import numpy as np
>>> a = np.arange(24).reshape(2, 3, 4)
>>> out = np.empty((4, 3, 2), a.dtype)
>>> copy_permuted(out, a.transpose(2, 1, 0))
>>> bool((out == a.T).all())
True
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from chunkstore.runtime.scratch import scratch_buffer

TILE = 256 * 1024  # bytes per tile: both sides of a tile stay in L2
#: elements of the destination's innermost axis per tile when the source's stride along
#: it is at least ``FAR`` bytes (at least one cache line of it)
RUN = 16
FAR = 4096
#: bytes of the slab a far-apart source is gathered into before it is permuted
STAGE = 1 << 20


def is_far(shape: tuple[int, ...], dst_strides: tuple[int, ...],
           src_strides: tuple[int, ...]) -> bool:
    """Whether the source is at least ``FAR`` bytes apart along the destination's
    innermost axis (then the copy is staged, see the module doc)."""
    if len(shape) < 2:
        return False
    inner = min(range(len(shape)), key=lambda d: abs(dst_strides[d]))
    return abs(src_strides[inner]) >= FAR and shape[inner] > 1


def tiles_for(shape: tuple[int, ...], dst_strides: tuple[int, ...],
              src_strides: tuple[int, ...], itemsize: int, tile: int = TILE,
              runs: bool = True) -> tuple[int, ...]:
    """Tile lengths per axis: the innermost axis of each side (by stride) first, then the
    next ones, while a tile stays within ``tile`` bytes (the last axis taken partly); the
    destination's innermost axis at most ``RUN`` long when the source is far apart along
    it (see the module doc) and ``runs`` (False: the slabs of a staged copy)."""
    nd = len(shape)
    by_dst = sorted(range(nd), key=lambda d: abs(dst_strides[d]))
    by_src = sorted(range(nd), key=lambda d: abs(src_strides[d]))
    order: list[int] = []
    for d in itertools.chain.from_iterable(zip(by_dst, by_src, strict=True)):
        if d not in order:
            order.append(d)
    # the longest run along each axis a tile may take
    limit = list(shape)
    inner = by_dst[0] if nd else 0
    if runs and nd and by_src[0] != inner and abs(src_strides[inner]) >= FAR:
        limit[inner] = min(shape[inner], max(RUN, 64 // max(1, itemsize)))
    lengths = [1] * nd
    size = itemsize
    first_two = order[:2]
    if len(first_two) == 2 and size * limit[first_two[0]] * limit[first_two[1]] > tile:
        # the two innermost axes alone exceed a tile: square-ish tiles of both
        side = max(1, math.isqrt(max(1, tile // itemsize)))
        for d in first_two:
            lengths[d] = min(limit[d], side)
        return tuple(lengths)
    for d in order:
        if size * limit[d] <= tile:
            lengths[d] = limit[d]
            size *= limit[d]
        else:
            lengths[d] = max(1, min(limit[d], tile // size))
            break
    return tuple(lengths)


def copy_permuted(dst: np.ndarray, src: np.ndarray, tile: int = TILE,
                  stage: int = STAGE) -> None:
    """``dst[...] = src`` (same shape, any strides), tile by tile, or slab by slab
    through a buffer of ``stage`` bytes when the source is far apart along the
    destination's innermost axis (see the module doc)."""
    if dst.shape != src.shape:
        raise ValueError(f"copy_permuted: shapes {dst.shape} and {src.shape} differ")
    if dst.ndim < 2 or dst.size * dst.itemsize <= tile:
        dst[...] = src
        return
    if is_far(dst.shape, dst.strides, src.strides):
        _copy_staged(dst, src, stage)
        return
    lengths = tiles_for(dst.shape, dst.strides, src.strides, dst.itemsize, tile)
    ranges = [range(0, n, t) for n, t in zip(dst.shape, lengths, strict=True)]
    for starts in itertools.product(*ranges):
        index = tuple(slice(a, a + t) for a, t in zip(starts, lengths, strict=True))
        dst[index] = src[index]


def _copy_staged(dst: np.ndarray, src: np.ndarray, stage: int) -> None:
    """``dst[...] = src`` slab by slab: each slab gathered into a contiguous buffer in the
    source's memory order, then permuted out of it (both steps in cache)."""
    lengths = tiles_for(dst.shape, dst.strides, src.strides, dst.itemsize, stage, runs=False)
    memory = sorted(range(src.ndim), key=lambda d: -abs(src.strides[d]))  # outer first
    back = tuple(memory.index(d) for d in range(src.ndim))
    flat = scratch_buffer((math.prod(lengths),), src.dtype, purpose="permute")
    ranges = [range(0, n, t) for n, t in zip(dst.shape, lengths, strict=True)]
    for starts in itertools.product(*ranges):
        index = tuple(slice(a, a + t) for a, t in zip(starts, lengths, strict=True))
        part = src[index].transpose(memory)
        buf = flat[:part.size].reshape(part.shape)
        np.copyto(buf, part)
        np.copyto(dst[index], buf.transpose(back))
