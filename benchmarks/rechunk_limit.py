"""The measured limit bench_rechunk compares every method with (issue 35): the same bytes
read, decoded, encoded and written by plain numcodecs and file writes, once per stage,
on the same slots as the cluster (2 processes x 1 thread), nothing else (no rechunking,
no transposition, no scheduler).

Each stage reads every stored chunk file of its input and writes it as a new file; the
next stage reads those files. The first stage decodes each chunk with the source's codec,
the last encodes it again (as the array's dtype: the source's bytes); stages between
write and read the decoded bytes, as chunkstore's plan keeps an intermediate on local
disk (raw).
The stages are as many as chunkstore's plan has for the case (``plan_stages``). A row's
fraction of the limit is ``limit wall / row wall`` (1.0: as fast as the limit).

On S3 (``limit-s3``, ``limit-s3-<N>ms``: ``benchmarks.rechunk_s3``) the first stage GETs
each object of the source from the S3 server and the last PUTs each result there (one
request per object, through obstore's client, a few requests in flight per slot so that
latency overlaps the work); stages between them use local files, as chunkstore's plan
does with its intermediate when every worker reaches this machine's disk. Its wall time
is what the bytes cost the server (which shares the machine's 2 cores) and the slots
together: no S3 method can move the same bytes faster.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from itertools import islice
from pathlib import Path
from typing import Any

from benchmarks.rechunk_measure import RssSampler

METHOD = "limit"
SLOTS = 2  # the cluster's: 2 workers x 1 thread
#: requests in flight per slot on S3 (GETs ahead of the codec, PUTs behind it)
S3_AHEAD = 4


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


def _s3_client(endpoint: str, bucket: str):
    from obstore.store import S3Store

    from benchmarks.rechunk_cli import AWS
    return S3Store(bucket, endpoint=endpoint, access_key_id=AWS["AWS_ACCESS_KEY_ID"],
                   secret_access_key=AWS["AWS_SECRET_ACCESS_KEY"],
                   region=AWS["AWS_DEFAULT_REGION"], client_options={"allow_http": True})


def _reader(place: str, endpoint: str | None) -> Callable[[str], Any]:
    """Reads one object or file of ``place`` (a directory, or ``s3://bucket/prefix``): a
    file into one buffer reused from read to read (valid until the next read; no fresh
    pages per chunk), an object into the client's own buffer."""
    if place.startswith("s3://"):
        import obstore
        bucket, prefix = place.removeprefix("s3://").split("/", 1)
        client = _s3_client(str(endpoint), bucket)
        return lambda name: obstore.get(client, f"{prefix}/{name}").bytes()
    held = [bytearray()]

    def read(name: str) -> memoryview:
        with open(os.path.join(place, name), "rb", buffering=0) as f:
            size = os.fstat(f.fileno()).st_size
            if len(held[0]) < size:  # a larger one (the last read's view may live on)
                held[0] = bytearray(size)
            view = memoryview(held[0])[:size]
            f.readinto(view)
            return view
    return read


def _writer(place: str, endpoint: str | None) -> Callable[[str, Any], None]:
    """Writes one object or file of ``place`` (as ``_reader``)."""
    if place.startswith("s3://"):
        import obstore
        bucket, prefix = place.removeprefix("s3://").split("/", 1)
        client = _s3_client(str(endpoint), bucket)
        return lambda name, data: obstore.put(client, f"{prefix}/{name}", data,
                                              use_multipart=False)

    def write(name: str, data: Any) -> None:
        fd = os.open(os.path.join(place, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
    return write


def _pass(job: tuple) -> float:
    """One slot's share of a stage: read, decode, encode, write each object; CPU seconds.

    ``job = (source, target, names, compressor config, dtype, chunk items, endpoint,
    decode, encode)``. Each chunk is decoded into one buffer reused from chunk to chunk
    and encoded as the array's dtype, so the bytes written are the source's; an
    intermediate is written and read raw (``decode``/``encode`` False), as chunkstore's
    plan keeps one on local disk. Files are read and written in turn; objects on S3 are
    read ``S3_AHEAD`` ahead and written ``S3_AHEAD`` behind by threads (the codec stays
    on this one)."""
    import numcodecs
    import numpy as np
    from numcodecs import blosc
    blosc.use_threads = False  # one thread per slot, as a worker's task
    src, dst, names, config, dtype, items, endpoint, decode, encode = job
    codec = numcodecs.get_codec(dict(config))
    read, write = _reader(src, endpoint), _writer(dst, endpoint)
    decoded = np.empty(items, dtype)

    def again(data: Any) -> Any:  # typed as the array: blosc shuffles by item size
        raw = codec.decode(data, out=decoded) if decode else np.frombuffer(data, dtype)
        return codec.encode(raw) if encode else raw

    remote_in, remote_out = src.startswith("s3://"), dst.startswith("s3://")
    start = time.process_time()
    with ThreadPoolExecutor(2 * S3_AHEAD) as io:
        # objects are read ahead by threads; a file in turn (into the reused buffer)
        fetch = (lambda n: io.submit(read, n)) if remote_in else read
        todo = iter(names)
        reads = deque((n, fetch(n)) for n in islice(todo, S3_AHEAD if remote_in else 1))
        writes: deque = deque()
        while reads:
            name, got = reads.popleft()
            if remote_in:  # the next request goes out before this chunk's work
                following = next(todo, None)
                if following is not None:
                    reads.append((following, fetch(following)))
            out = again(got.result() if remote_in else got)
            if remote_out:  # encoded: new bytes of its own, written behind by a thread
                writes.append(io.submit(write, name, out))
            else:  # a file, from the reused buffer before the next chunk is decoded
                write(name, out)
            while len(writes) > S3_AHEAD:
                writes.popleft().result()
            if not remote_in:  # into the reused buffer: once this chunk is written
                following = next(todo, None)
                if following is not None:
                    reads.append((following, fetch(following)))
        for done in writes:
            done.result()
    return time.process_time() - start


def run_limit(src: Path, work: Path, stages: int,
              s3: tuple[str, str, str] | None = None) -> dict:
    """The limit for a Zarr v2 array at ``src``: wall and CPU seconds of ``stages``
    passes over its chunks on ``SLOTS`` processes (their files under ``work``, removed).
    ``s3 = (endpoint, source URL, target URL)``: the first pass reads the source's
    objects (``src`` uploaded there) from the S3 server, the last writes there."""
    meta = json.loads((Path(src) / ".zarray").read_text())
    config = meta["compressor"]
    if meta.get("filters") or config is None:
        raise ValueError("the limit is measured for arrays with one compressor, no filters")
    names = sorted(f for f in os.listdir(src) if not f.startswith("."))
    items = math.prod(meta["chunks"])  # every stored chunk is whole (edges padded)
    endpoint = s3[0] if s3 else None
    with ProcessPoolExecutor(SLOTS) as pool:
        list(pool.map(time.sleep, [0.0] * SLOTS))  # started before the clock
        pids = list(pool._processes)  # noqa: SLF001  (to sample their memory)
        load0 = os.getloadavg()[0]
        cpu = 0.0
        with RssSampler(pids) as sampler:
            t0 = time.perf_counter()
            here = s3[1] if s3 else str(src)
            for stage in range(stages):
                last = stage == stages - 1
                if last and s3:
                    out = s3[2]
                else:
                    local = Path(work) / f"limit-stage-{stage}"
                    shutil.rmtree(local, ignore_errors=True)
                    local.mkdir(parents=True)
                    out = str(local)
                jobs = [(here, out, names[k::SLOTS], config, meta["dtype"], items, endpoint,
                         stage == 0, last) for k in range(SLOTS)]
                cpu += sum(pool.map(_pass, jobs))
                if stage and not here.startswith("s3://"):
                    shutil.rmtree(here, ignore_errors=True)
                here = out
            wall = time.perf_counter() - t0
        if not here.startswith("s3://"):
            shutil.rmtree(here, ignore_errors=True)
    return {"wall_s": wall, "cpu_s": cpu, "stages": stages, "load_avg": [load0, os.getloadavg()[0]],
            "peak_rss_mb": [p / 1e6 for p in sampler.peaks.values()], "memory_events": [],
            "correct": True}
