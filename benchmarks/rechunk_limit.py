"""The measured limit bench_rechunk compares every method with (issue 35): the same bytes
decoded, encoded and written once per stage by plain numcodecs and file writes, on the
same slots as the cluster (2 processes x 1 thread), nothing else (no rechunking, no
transposition, no scheduler).

Each stage reads every stored chunk file of its input, decodes it with the source's
codec, encodes it again and writes it as a new file; the next stage reads those files.
The stages are as many as chunkstore's plan has for the case (``plan_stages``). A row's
fraction of the limit is ``limit wall / row wall`` (1.0: as fast as the limit).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from benchmarks.rechunk_measure import RssSampler

METHOD = "limit"
SLOTS = 2  # the cluster's: 2 workers x 1 thread


def plan_stages(src: Path | str, target: tuple, max_mem: int, axes: tuple | None) -> int:
    """Stages of chunkstore's plan for the case on the benchmark's cluster (2 x 1)."""
    import chunkstore as cs
    import chunkstore.dask as csd
    from chunkstore.dask.memory import Workers
    source = cs.open_array(str(src), mode="r")
    if axes is not None:
        source = csd.TransposedSource(source, axes)
    plan = csd.rechunk(source, target, cs.MemoryStore(), max_mem=max_mem,
                       workers=Workers(threads=1, count=SLOTS, measured=True))
    return max(1, len(plan.stages))


def _pass(job: tuple[str, str, list[str], dict]) -> float:
    """One slot's share of a stage: read, decode, encode, write each file; CPU seconds."""
    import numcodecs
    from numcodecs import blosc
    blosc.use_threads = False  # one thread per slot, as a worker's task
    src, dst, names, config = job
    codec = numcodecs.get_codec(dict(config))
    start = time.process_time()
    for name in names:
        with open(os.path.join(src, name), "rb") as f:
            data = f.read()
        encoded = codec.encode(codec.decode(data))
        fd = os.open(os.path.join(dst, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            os.write(fd, encoded)
        finally:
            os.close(fd)
    return time.process_time() - start


def run_limit(src: Path, work: Path, stages: int) -> dict:
    """The limit for a Zarr v2 array at ``src``: wall and CPU seconds of ``stages``
    passes over its chunks on ``SLOTS`` processes (their files under ``work``, removed)."""
    meta = json.loads((Path(src) / ".zarray").read_text())
    config = meta["compressor"]
    if meta.get("filters") or config is None:
        raise ValueError("the limit is measured for arrays with one compressor, no filters")
    names = sorted(f for f in os.listdir(src) if not f.startswith("."))
    with ProcessPoolExecutor(SLOTS) as pool:
        list(pool.map(time.sleep, [0.0] * SLOTS))  # started before the clock
        pids = list(pool._processes)  # noqa: SLF001  (to sample their memory)
        load0 = os.getloadavg()[0]
        cpu = 0.0
        with RssSampler(pids) as sampler:
            t0 = time.perf_counter()
            here = Path(src)
            for stage in range(stages):
                out = Path(work) / f"limit-stage-{stage}"
                shutil.rmtree(out, ignore_errors=True)
                out.mkdir(parents=True)
                jobs = [(str(here), str(out), names[k::SLOTS], config) for k in range(SLOTS)]
                cpu += sum(pool.map(_pass, jobs))
                if stage:
                    shutil.rmtree(here, ignore_errors=True)
                here = out
            wall = time.perf_counter() - t0
        shutil.rmtree(here, ignore_errors=True)
    return {"wall_s": wall, "cpu_s": cpu, "stages": stages, "load_avg": [load0, os.getloadavg()[0]],
            "peak_rss_mb": [p / 1e6 for p in sampler.peaks.values()], "memory_events": [],
            "correct": True}
