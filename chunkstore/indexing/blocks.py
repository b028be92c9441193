"""Block selections (``Array.blocks``): a selection in units of chunks as element slices."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from chunkstore.indexing.axes import Selection, expand_ellipsis, is_int, normalize_int


def block_selection_to_basic(selection: Selection, shape: Sequence[int],
                             chunks: Sequence[Any]) -> tuple[slice, ...]:
    """Translate a selection in units of chunks (ints / step-1 slices) into element slices.
    ``chunks``: per axis a chunk length, or a rectilinear axis's chunk starts and end."""
    sel = expand_ellipsis(selection, len(shape))
    out = []
    for axis, (s, n, cl) in enumerate(zip(sel, shape, chunks, strict=True)):
        if isinstance(cl, np.ndarray):
            nblocks = int(np.searchsorted(cl[:-1], n, side="left"))

            def edge(b: int, cl: Any = cl, n: int = n) -> int:
                return min(n, int(cl[b]))
        else:
            nblocks = math.ceil(n / cl)

            def edge(b: int, cl: Any = cl, n: int = n) -> int:
                return min(n, b * cl)
        if is_int(s):
            b = normalize_int(s, nblocks, axis)
            out.append(slice(edge(b), edge(b + 1)))
        elif isinstance(s, slice):
            if s.step not in (None, 1):
                raise IndexError(f"block selection slices must have step 1 (axis {axis})")
            start, stop, _ = s.indices(nblocks)
            out.append(slice(edge(start), edge(max(start, stop))))
        else:
            raise IndexError(f"block selection supports ints and slices only (axis {axis}, "
                             f"got {s!r})")
    return tuple(out)
