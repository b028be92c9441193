"""Helpers of the write attack tests: a store of either kind, NumPy's spelling of an
orthogonal assignment, and an equality check that names the first differing element."""

from __future__ import annotations

import numpy as np

import chunkstore as cs


def store(kind: str, tmp_path, name: str = "a"):
    if kind == "memory":
        return cs.MemoryStore()
    return str(tmp_path / f"{name}.zarr")


def orth_numpy_set(ref: np.ndarray, sel: tuple, val) -> None:
    """``ref.oindex[sel] = val`` in NumPy terms (np.ix_ over every axis)."""
    idx, keep = [], []
    for s, n in zip(sel, ref.shape, strict=True):
        if isinstance(s, slice):
            idx.append(np.arange(n)[s])
            keep.append(True)
        elif isinstance(s, int | np.integer):
            idx.append(np.array([s]))
            keep.append(False)
        else:
            a = np.asarray(s)
            idx.append(np.flatnonzero(a) if a.dtype == bool else a)
            keep.append(True)
    full = tuple(len(i) for i in idx)
    reduced = tuple(n for n, k in zip(full, keep, strict=True) if k)
    v = np.broadcast_to(np.asarray(val, ref.dtype), reduced).reshape(full)
    ref[np.ix_(*idx)] = v


def equal(a, b) -> bool:
    return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)


def assert_same(got, ref, what=""):
    got = np.asarray(got)
    if not equal(got, ref):
        bad = np.argwhere(~((got == ref) | (np.isnan(got) & np.isnan(ref))
                            if ref.dtype.kind == "f" else got == ref))
        first = tuple(bad[0])
        raise AssertionError(f"{what}: {len(bad)} elements differ, first at {first}: "
                             f"got {got[first]!r}, expected {ref[first]!r}")
