"""Block selections (``Array.blocks``): a selection in units of chunks as element slices."""

from __future__ import annotations

import math
from collections.abc import Sequence

from chunkstore.indexing.axes import Selection, expand_ellipsis, is_int, normalize_int


def block_selection_to_basic(selection: Selection, shape: Sequence[int],
                             chunks: Sequence[int]) -> tuple[slice, ...]:
    """Translate a selection in units of chunks (ints / step-1 slices) into element slices."""
    sel = expand_ellipsis(selection, len(shape))
    out = []
    for axis, (s, n, cl) in enumerate(zip(sel, shape, chunks, strict=True)):
        nblocks = math.ceil(n / cl)
        if is_int(s):
            b = normalize_int(s, nblocks, axis)
            out.append(slice(b * cl, min(n, (b + 1) * cl)))
        elif isinstance(s, slice):
            if s.step not in (None, 1):
                raise IndexError(f"block selection slices must have step 1 (axis {axis})")
            start, stop, _ = s.indices(nblocks)
            out.append(slice(start * cl, min(n, max(start, stop) * cl)))
        else:
            raise IndexError(f"block selection supports ints and slices only (axis {axis}, "
                             f"got {s!r})")
    return tuple(out)
