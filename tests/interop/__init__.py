"""Interoperability with zarr-python 3 and tensorstore (test-only peers).

Shared helpers: the numeric data types, deterministic sample data, array layouts and
the comparison of metadata documents written by two implementations.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

NUMERIC = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "float16", "float32", "float64", "complex64", "complex128"]

#: name -> (shape, chunks): edge chunks, chunks bigger than the array, 0-d, empty axes
LAYOUT_SHAPES = {
    "edge": ((13, 7), (4, 3)),
    "exact": ((8, 6), (4, 3)),
    "big-chunks": ((5, 3), (8, 8)),
    "0-d": ((), ()),
    "zero-length": ((0, 5), (2, 2)),
    "one-element": ((1,), (1,)),
    "3-d": ((5, 4, 3), (2, 3, 2)),
}


def sample(dtype: Any, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Deterministic data of ``dtype`` covering the type's range (NaN/inf for floats)."""
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape, dtype=np.int64))
    if dtype.kind == "b":
        flat = rng.random(n) < 0.5
    elif dtype.kind in "iu":
        info = np.iinfo(dtype)
        flat = rng.integers(info.min, info.max, size=n, dtype=dtype.newbyteorder("="),
                            endpoint=True)
        if n >= 2:
            flat[:2] = (info.min, info.max)
    elif dtype.kind == "f":
        flat = (rng.standard_normal(n) * 1000).astype(dtype.newbyteorder("="))
        if n >= 4:
            flat[1:4] = (np.nan, np.inf, -np.inf)
    else:
        part = np.dtype(f"f{dtype.itemsize // 2}")
        flat = (rng.standard_normal(n).astype(part) + 1j * rng.standard_normal(n).astype(part))
        if n >= 3:
            flat[1] = complex(np.nan, 1)
            flat[2] = complex(np.inf, -np.inf)
    return np.asarray(flat, dtype=dtype).reshape(shape)


def assert_same(got: Any, expect: np.ndarray) -> None:
    """Values, shape and kind agree (NaN equals NaN; byte order may differ)."""
    got = np.asarray(got)
    assert got.shape == expect.shape, (got.shape, expect.shape)
    assert got.dtype.newbyteorder("=") == expect.dtype.newbyteorder("="), (got.dtype, expect.dtype)
    np.testing.assert_array_equal(got, expect, strict=False)


def read_doc(path: Path, name: str = "zarr.json") -> dict[str, Any]:
    return json.loads((Path(path) / name).read_text())


def chunk_keys(path: Path) -> set[str]:
    """The non-metadata files under a store directory, as store keys."""
    root = Path(path)
    skip = {"zarr.json", ".zarray", ".zattrs", ".zgroup"}
    return {p.relative_to(root).as_posix() for p in root.rglob("*")
            if p.is_file() and p.name not in skip}


def normalize_codecs(codecs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """v3 codec entries with an absent configuration treated as ``{}``."""
    return [{"name": c["name"], "configuration": dict(c.get("configuration") or {})}
            for c in codecs]


def diff_fields(ours: dict[str, Any], theirs: dict[str, Any], fields: list[str]) -> list[str]:
    """The fields (among ``fields``) whose values differ, with both values."""
    out = []
    for f in fields:
        a, b = ours.get(f), theirs.get(f)
        if f == "codecs" and a is not None and b is not None:
            a, b = normalize_codecs(a), normalize_codecs(b)
        if a != b:
            out.append(f"{f}: chunkstore={a!r} peer={b!r}")
    return out
