"""NumPy's rules for ``a[selection]``: which indexer runs a selection, and NumPy's mixed
advanced indexing rewritten as points."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from chunkstore.indexing.axes import Selection, check_unsigned, expand_ellipsis, is_int

ORTHOGONAL, COORDINATE, BASIC = "orthogonal", "coordinate", "basic"


def _as_index_array(item: Any) -> Any:
    """An array-like index that is not a NumPy array or list (a chunkstore Array used as a
    mask, a dask array...) as an ndarray; anything else unchanged."""
    if isinstance(item, np.ndarray | list | slice) or item is Ellipsis or item is None:
        return item
    if is_int(item) or isinstance(item, bool | np.bool_ | float | str | bytes | tuple):
        return item
    if hasattr(item, "__array__") and hasattr(item, "shape") and len(item.shape) > 0:
        return np.asarray(item)
    return item


def numpy_selection(selection: Selection, shape: Sequence[int]) -> tuple[Selection, str]:
    """``(selection, kind)`` giving ``a[selection]`` NumPy's result, ``kind`` being how to
    run it: "basic" (ints, slices, Ellipsis), "orthogonal" (one index array, where NumPy
    indexes orthogonally) or "coordinate" (points: a whole-array mask, one index array
    per axis, or NumPy's mixed advanced indexing rewritten as points).

    Mixed advanced indexing follows NumPy: the index arrays (and ints) broadcast together;
    their dimensions replace them in place when they are adjacent, else come first; the
    sliced axes keep their place. So on a 5x5x5 array ``a[[1, 2, 3], [1, 2, 3]]`` has
    shape (3, 5) and assigning to it writes 15 elements."""
    ndim = len(shape)
    was_tuple = isinstance(selection, tuple)
    items = tuple(_as_index_array(s) for s in (selection if was_tuple else (selection,)))
    arrays = [isinstance(s, np.ndarray | list) for s in items]
    plain = items if was_tuple else items[0]
    if not any(arrays):
        return plain, BASIC
    first = np.asarray(items[0])
    if len(items) == 1 and first.dtype == bool and first.ndim == ndim > 1:
        return items[0], COORDINATE  # a whole-array mask
    if all(arrays) and len(items) == ndim and ndim > 1:
        return plain, COORDINATE
    if _orthogonal_is_numpy(items, arrays):
        return plain, ORTHOGONAL
    return _mixed_as_points(items, shape), COORDINATE


def _orthogonal_is_numpy(items: tuple[Any, ...], arrays: list[bool]) -> bool:
    """One 1-d index array, with ints only next to it (or before every slice): then
    NumPy's result is the orthogonal one."""
    if sum(arrays) != 1:
        return False
    pos = arrays.index(True)
    if np.ndim(items[pos]) != 1:
        return False
    advanced = [i for i, s in enumerate(items) if arrays[i] or is_int(s)]
    if advanced == list(range(advanced[0], advanced[-1] + 1)):
        return True
    return not any(isinstance(s, slice) or s is Ellipsis for s in items[:pos])


def _mixed_as_points(items: tuple[Any, ...], shape: Sequence[int]) -> tuple[np.ndarray, ...]:
    """One coordinate array per axis, broadcastable to NumPy's result shape."""
    sel = expand_ellipsis(items, len(shape))
    advanced: dict[int, np.ndarray] = {}
    for axis, s in enumerate(sel):
        if isinstance(s, slice):
            continue
        a = np.asarray(s)
        if a.dtype == bool:
            if a.ndim != 1:
                raise IndexError(f"a boolean index mixed with other index arrays must be 1-d "
                                 f"(axis {axis}, got {a.ndim}-d)")
            if a.shape[0] != shape[axis]:
                raise IndexError(f"boolean index of shape {a.shape} does not match axis "
                                 f"{axis} of size {shape[axis]}")
            a = np.flatnonzero(a)
        elif a.size and a.dtype.kind not in "iu":
            raise IndexError(f"arrays used as indices must be of integer or boolean type "
                             f"(axis {axis}, got {a.dtype})")
        check_unsigned(a, shape[axis], axis)
        advanced[axis] = a.astype(np.intp)
    try:
        bshape = np.broadcast_shapes(*(a.shape for a in advanced.values()))
    except ValueError as e:
        raise IndexError(f"shape mismatch: index arrays could not be broadcast together: "
                         f"{e}") from None
    axes = sorted(advanced)
    sliced = [i for i in range(len(shape)) if i not in advanced]
    if axes == list(range(axes[0], axes[-1] + 1)):  # adjacent: in place of the first
        before = [i for i in sliced if i < axes[0]]
        after = [i for i in sliced if i > axes[0]]
    else:  # separated by a slice: the broadcast dimensions come first
        before, after = [], sliced
    nb = len(bshape)
    out_ndim = len(before) + nb + len(after)
    coords = []
    for axis in range(len(shape)):
        if axis in advanced:
            a = np.broadcast_to(advanced[axis], bshape)
            coords.append(a.reshape((1,) * len(before) + bshape + (1,) * len(after)))
            continue
        start, stop, step = sel[axis].indices(shape[axis])
        positions = np.arange(start, stop, step, dtype=np.intp)
        dim = before.index(axis) if axis in before else len(before) + nb + after.index(axis)
        coords.append(positions.reshape([-1 if d == dim else 1 for d in range(out_ndim)]))
    return tuple(coords)
