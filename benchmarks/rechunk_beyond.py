"""bench_rechunk's ``--beyond-memory`` rows (issue 35): chunkstore's rechunk and transpose
of arrays larger than the machine's memory (32 GiB on a 24 GiB machine) on the same
cluster and per-worker bound as the 4 GiB rows, with the time per GiB against the
smallest size run beside them (the cost must grow linearly).

Every size keeps the chunks of the issue's 4 GiB cases and has more of them: the rechunk
array is (32768 a, 32768 b) float32 chunked (32768, 32) -> (32, 32768), the transpose
array (1024 p, 1024 q, 1024 r) chunked (1024, 1024, 16) -> (16, 1024, 1024). The data is
``rechunk_measure.pattern`` (small integers, ~4x smaller in blosc-lz4, no two chunks
alike), so that source, intermediate and target of 32 GiB fit on the disk together; the
smaller reference size is made of the same pattern (compressible data codes faster than
the random numbers of the other rows: compare sizes only within these rows). Peers are
not run at these sizes (dask, rechunker and cubed would take hours on 2 x 1 slots).
"""

from __future__ import annotations

import math

from benchmarks.rechunk_measure import MiB

GIB = 2**30


def big_cases(gib: float, max_mem: int) -> dict:
    """case -> (shape, chunks, target chunks, axes, max_mem) for ``gib`` GiB (4 x a power
    of two: 4, 8, 16, 32, ...)."""
    k = math.log2(gib / 4)
    if k < 0 or k != int(k):
        raise ValueError(f"--beyond-memory sizes are 4 GiB times a power of two, not {gib}")
    k = int(k)
    side = [1024, 1024, 1024]
    for t in range(k):
        side[t % 3] *= 2
    return {"rechunk": ((32768 * 2 ** (k // 2), 32768 * 2 ** (k - k // 2)), (32768, 32),
                        (32, 32768), None, max_mem),
            "transpose": (tuple(side), (1024, 1024, 16), (16, 1024, 1024), (2, 1, 0),
                          max_mem)}


def print_scaling(rows: list[dict]) -> None:
    """Per case and method: seconds (wall and worker CPU) per GiB at each size, and each
    size's ratio to the smallest one's (1.0: linear)."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        if "gib" in r:
            groups.setdefault((r["base_case"], r["method"]), []).append(r)
    if not groups:
        return
    print("\n| case | method | GiB | wall s | wall s / GiB | x smallest | worker CPU s / GiB "
          "| x smallest | peak RSS per worker MiB | bound MiB | correct |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for (case, method), group in groups.items():
        group.sort(key=lambda r: r["gib"])
        wall0 = group[0]["wall_s"] / group[0]["gib"]
        cpu0 = group[0].get("cpu_s", math.nan) / group[0]["gib"]
        for r in group:
            wall, cpu = r["wall_s"] / r["gib"], r.get("cpu_s", math.nan) / r["gib"]
            peaks = " / ".join(f"{p * 1e6 / MiB:.0f}" for p in r["peak_rss_mb"])
            print(f"| {case} | {method} | {r['gib']:g} | {r['wall_s']:.1f} | {wall:.2f} | "
                  f"{wall / wall0:.2f} | {cpu:.2f} | {cpu / cpu0:.2f} | {peaks} | "
                  f"{r['bound_mb'] * 1e6 / MiB:.0f} | {r['correct']} |")
