"""The one byte-range coalescer: spans of one object closer than a request's cost are
read as one range (the gap is cheaper to read than another request is to make)."""

from __future__ import annotations

import numpy as np


def coalesce(starts: np.ndarray, stops: np.ndarray, gap: int
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge byte spans ``[starts[i], stops[i])`` (sorted by start) whose distance is at
    most ``gap`` bytes. Returns ``(range_starts, range_stops, group)``: the merged ranges
    and, for each span, the index of the range that holds it.

    >>> s, e, g = coalesce(np.array([0, 10, 100]), np.array([5, 20, 110]), 8)
    >>> s.tolist(), e.tolist(), g.tolist()
    ([0, 100], [20, 110], [0, 0, 1])
    """
    starts = np.asarray(starts, dtype=np.int64)
    stops = np.asarray(stops, dtype=np.int64)
    n = starts.size
    if n == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    ends = np.maximum.accumulate(stops)
    breaks = np.flatnonzero(starts[1:] - ends[:-1] > gap) + 1
    group = np.zeros(n, np.int64)
    group[breaks] = 1
    group = np.cumsum(group)
    first = np.concatenate(([0], breaks))
    last = np.concatenate((breaks - 1, [n - 1]))
    return starts[first], ends[last], group
