"""Pure planning arithmetic for rechunk and transpose-and-rewrite (no Dask, no IO).

A *stage* copies array X (chunks ``cx``) into array Y (chunks ``cy``) in blocks ``B``.
A block whose edges fall on both chunk grids (``B[d]`` a multiple of ``lcm(cx[d], cy[d])``,
or the whole axis) reads whole source chunks and writes whole target chunks: no chunk
is decoded twice and no write needs a lock. One task holds about ``MEMORY_FACTOR`` x
the block (the decoded block, the compressed input and the encoded output), so a stage
is allowed when that fits in ``max_mem``.

When the one-stage block would not fit, the copy goes through an intermediate array
with chunks ``I`` chosen so that both X -> I and I -> Y have aligned blocks that fit
(the idea of rechunker's intermediate array, with our own search). A plan that cannot
fit at all (a single source or target chunk above the budget) is refused before
anything runs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

MEMORY_FACTOR = 3
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
          "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}


def parse_bytes(value: int | float | str) -> int:
    """``"1GiB"`` -> 1073741824, ``"512MB"`` -> 512000000, ints pass through."""
    if isinstance(value, int | float):
        return int(value)
    m = re.fullmatch(r"\s*([\d.]+)\s*([a-zA-Z]*)\s*", value)
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(f"cannot parse a byte size from {value!r}")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


class PlanError(ValueError):
    """No plan can honour max_mem (a single chunk is already too large)."""


@dataclass(frozen=True)
class Stage:
    """One copy pass: ``source_chunks`` -> ``target_chunks`` in blocks of ``block``."""

    shape: tuple[int, ...]
    source_chunks: tuple[int, ...]
    target_chunks: tuple[int, ...]
    block: tuple[int, ...]
    itemsize: int

    @property
    def ntasks(self) -> int:
        return math.prod(math.ceil(n / b) for n, b in zip(self.shape, self.block, strict=True)) \
            if all(self.shape) else 0

    @property
    def block_bytes(self) -> int:
        return math.prod(self.block) * self.itemsize

    @property
    def task_memory(self) -> int:
        """Expected peak bytes one task holds."""
        return MEMORY_FACTOR * self.block_bytes

    @property
    def nbytes(self) -> int:
        """Decoded bytes read (= written) by the stage."""
        return math.prod(self.shape) * self.itemsize

    def blocks(self) -> list[tuple[slice, ...]]:
        """The block regions of the stage, in C order."""
        import itertools
        ranges = [range(0, n, b) for n, b in zip(self.shape, self.block, strict=True)]
        return [tuple(slice(s, min(n, s + b)) for s, n, b in
                      zip(starts, self.shape, self.block, strict=True))
                for starts in itertools.product(*ranges)]


def _aligned(n: int, a: int, b: int) -> int:
    """Smallest block length along one axis aligned with chunk lengths ``a`` and ``b``."""
    return min(max(n, 1), math.lcm(a, b))


def _grow(block: list[int], shape: Sequence[int], unit: Sequence[int], itemsize: int,
          budget: int, limit: Sequence[int] | None = None) -> list[int]:
    """Enlarge ``block`` by whole ``unit`` multiples (last axes first) while it fits."""
    block = list(block)
    for d in reversed(range(len(block))):
        cap = min(max(shape[d], 1), limit[d] if limit else max(shape[d], 1))
        while block[d] < cap:
            trial = min(cap, block[d] + unit[d])
            nbytes = math.prod(block[:d] + [trial] + block[d + 1:]) * itemsize
            if nbytes * MEMORY_FACTOR > budget:
                return block
            block[d] = trial
    return block


def _divisor_candidates(a: int, b: int, n: int) -> list[int]:
    """Intermediate chunk lengths worth trying on one axis: divisors of either chunk
    length that are multiples of their gcd, plus the whole axis."""
    g = math.gcd(a, b)
    cands = {g, min(n, max(a, b)), max(1, n)}
    for x in (a, b):
        for k in range(1, int(math.isqrt(x)) + 1):
            if x % k == 0:
                for d in (k, x // k):
                    if d % g == 0:
                        cands.add(min(d, max(1, n)))
    return sorted(cands)


def _intermediate(shape: Sequence[int], cx: Sequence[int], cy: Sequence[int], itemsize: int,
                  budget: int) -> tuple[int, ...] | None:
    """Largest intermediate chunks I with aligned X->I and I->Y blocks that both fit."""
    ndim = len(shape)
    cands = [_divisor_candidates(cx[d], cy[d], shape[d]) for d in range(ndim)]
    idx = [0] * ndim

    def cost(i: list[int]) -> int:
        inter = [cands[d][i[d]] for d in range(ndim)]
        r = math.prod(_aligned(shape[d], cx[d], inter[d]) for d in range(ndim))
        w = math.prod(_aligned(shape[d], inter[d], cy[d]) for d in range(ndim))
        return max(r, w) * itemsize * MEMORY_FACTOR

    if cost(idx) > budget:
        return None
    improved = True
    while improved:
        improved = False
        best = None
        for d in range(ndim):
            if idx[d] + 1 < len(cands[d]):
                trial = idx[:d] + [idx[d] + 1] + idx[d + 1:]
                if cost(trial) <= budget:
                    size = math.prod(cands[k][trial[k]] for k in range(ndim))
                    if best is None or size > best[0]:
                        best = (size, trial)
        if best is not None:
            idx, improved = best[1], True
    return tuple(cands[d][idx[d]] for d in range(ndim))


def plan_rechunk(shape: Sequence[int], source_chunks: Sequence[int],
                 target_chunks: Sequence[int], itemsize: int,
                 max_mem: int | str) -> list[Stage]:
    """One or two stages that copy ``source_chunks`` into ``target_chunks`` within max_mem.

    >>> [s.block for s in plan_rechunk((100, 100), (10, 100), (100, 10), 8, "1MiB")]
    [(100, 100)]
    """
    shape, cx, cy = tuple(shape), tuple(source_chunks), tuple(target_chunks)
    if not len(shape) == len(cx) == len(cy):
        raise ValueError(f"shape {shape}, source chunks {cx} and target chunks {cy} differ in "
                         "dimensionality")
    budget = parse_bytes(max_mem)
    for name, chunks in (("source", cx), ("target", cy)):
        one = math.prod(min(c, max(n, 1)) for c, n in zip(chunks, shape, strict=True)) * itemsize
        if one * MEMORY_FACTOR > budget:
            raise PlanError(
                f"one {name} chunk {chunks} is {one} bytes; a task needs about "
                f"{MEMORY_FACTOR}x that ({one * MEMORY_FACTOR} bytes) but max_mem is {budget}")
    if not shape:
        return [Stage(shape, cx, cy, (), itemsize)]
    direct = [_aligned(n, a, b) for n, a, b in zip(shape, cx, cy, strict=True)]
    if math.prod(direct) * itemsize * MEMORY_FACTOR <= budget:
        unit = list(direct)
        block = _grow(direct, shape, unit, itemsize, budget)
        return [Stage(shape, cx, cy, tuple(block), itemsize)]
    inter = _intermediate(shape, cx, cy, itemsize, budget)
    if inter is None:
        raise PlanError(f"no intermediate chunking lets {cx} -> {cy} fit in max_mem={budget} "
                        "bytes; raise max_mem")
    stages = []
    for a, b in ((cx, inter), (inter, cy)):
        aligned = [_aligned(n, p, q) for n, p, q in zip(shape, a, b, strict=True)]
        block = _grow(aligned, shape, aligned, itemsize, budget)
        stages.append(Stage(shape, tuple(a), tuple(b), tuple(block), itemsize))
    return stages
