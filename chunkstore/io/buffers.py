"""What the engine holds in memory while it reads chunks into a block or writes a block's
chunks: the one description of its buffers. The write batching (``rmw.commit_units``)
takes its threads and runs from :func:`commit_threads`, and the rechunk planner's memory
model (``chunkstore.rechunk.planner.Stage.memory``) adds these figures up, so a change of
the engine changes the planner's bound with it.

All figures are bytes, of pure arithmetic (no IO). A *block* is the region a caller reads
or writes, a *piece* the part of it read or written at once (whole chunks), a *chunk*
the read unit (or the inner chunk of a shard being written).
"""

from __future__ import annotations

from collections.abc import Sequence

from chunkstore.runtime import current


def contiguous_in(part: Sequence[int], whole: Sequence[int]) -> bool:
    """Is a box of shape ``part`` (aligned inside a C-ordered box ``whole``) one
    contiguous run of memory? True when, after leading axes of length 1, one axis is cut
    and every later axis is whole: a chunk there is decoded straight into its place, and
    encoded without a staging copy.

    >>> contiguous_in((4, 10), (8, 10)), contiguous_in((8, 5), (8, 10)), contiguous_in((1, 5), (8, 10))
    (True, False, True)
    """
    axes = [d for d in range(len(whole)) if part[d] != 1]
    if not axes:
        return True
    return all(part[d] >= whole[d] for d in axes[1:])


def cpu_threads(pool_threads: int) -> int:
    """The threads of a pool of ``pool_threads`` that encode at once at least: one per
    core (``current().pool.threads(True)``, at least 2), the pool having 4 per core."""
    return max(2, pool_threads // 4)


RUNS_PER_THREAD = 4  # commits per thread and batch: fewer overlap less, more cost calls
BLOCKING_THREADS_PER_CORE = 2  # runs at once per core on stores whose commits block
WARM_RUN_BYTES = 2 * 2**20  # a local run's built values: about what a core's cache holds
WARM_RUN_UNITS = 64  # ... and its units at most


def commit_threads(units: int, unit_bytes: int | None, pool_threads: int, cores: int, *,
                   blocking: bool, cpu_bound: bool = True, max_threads: int | None = None,
                   budget: int | None = None) -> tuple[int, int]:
    """``(threads, run)``: how many pool threads ``commit_units`` builds and commits
    ``units`` write units on, each taking runs of neighbouring units, and how many units
    a run holds built until its commit.

    CPU-bound work takes one thread per core (``cores``) where a commit does not block
    (memory, or remote stores with their own concurrent requests), and
    ``BLOCKING_THREADS_PER_CORE`` per core where it blocks the thread on IO (local files:
    writes into the page cache wait on dirty-page throttling and the disk, and a core
    left idle by a blocked writer is taken by another run's encoding; more only take
    turns at the GIL and evict each other's chunks from the cache); other work the whole
    pool (``pool_threads``). ``max_threads`` caps them (``threads_for_calls``). With
    ``unit_bytes`` (what a built unit holds until committed), the runs held at once stay
    within ``budget`` (:func:`encoding_threads`), and a run on a blocking store within
    ``WARM_RUN_BYTES``: written while still in the core's cache."""
    wide = cpu_bound and blocking
    threads = max(1, min(units, cores if cpu_bound and not wide else pool_threads))
    if wide:
        threads = min(threads, BLOCKING_THREADS_PER_CORE * cores)
    threads = min(threads, max_threads or threads)
    run = max(1, units // (threads * RUNS_PER_THREAD))
    if unit_bytes:
        budget = current().budgets.write_bytes if budget is None else budget
        threads = encoding_threads(units, unit_bytes, threads, cores, budget)
        run = max(1, min(run, budget // (threads * unit_bytes)))
        if wide:
            run = max(1, min(run, WARM_RUN_BYTES // unit_bytes, WARM_RUN_UNITS))
    return threads, run


def encoding_threads(units: int, unit_bytes: int, threads: int, cores: int,
                     budget: int | None = None) -> int:
    """How many of ``units`` write units of ``unit_bytes`` each ``commit_units`` builds
    and holds at once on ``threads`` threads: one per core (``cores``) at least, more
    while their values fit in ``budget`` (``config["threading.write_bytes"]``)."""
    budget = current().budgets.write_bytes if budget is None else budget
    return max(min(units, threads, cores), min(units, threads, budget // max(1, unit_bytes)))


def decode_scratch(chunk_bytes: int, chunks: int, strided: bool, threads: int) -> int:
    """Scratch held reading ``chunks`` chunks of ``chunk_bytes`` on ``threads`` threads:
    when their place in the output is strided, each decoding thread decodes into its own
    scratch chunk and copies it into place (``ChunkCodec.read_into``; pool threads keep
    it between calls); else chunks are decoded straight into place (nothing)."""
    return min(threads, chunks) * chunk_bytes if strided else 0


def encode_buffers(chunk_bytes: int, units: int, strided: bool, threads: int, *,
                   cores: int, sharded: bool = False, raw: bool = False,
                   blocking: bool = False, budget: int | None = None) -> int:
    """Codec buffers held writing ``units`` chunks of ``chunk_bytes`` (a piece of a
    block) from a pool of ``threads`` threads. Each encoding thread holds the codec's
    output buffer and its trimmed copy (two chunks) and, when the chunk's place in the
    block is strided, a contiguous copy of it; a single chunk is encoded by the caller's
    thread, its output being the stored bytes in flight (:func:`stored_in_flight`). A
    plain array encodes on as many threads at once as :func:`commit_threads` gives
    ``commit_units`` (``blocking``: a store whose commits block, a local directory); a
    shard encodes its inner chunks on every thread. ``raw``: uncompressed chunks of a
    local directory are written from the block itself (a strided one copied first)."""
    if raw and not sharded:
        return min(threads, units) * chunk_bytes if strided else 0
    copies = (2 if units > 1 else 0) + (1 if strided else 0)
    encoders = min(threads, units) if sharded else commit_threads(
        units, chunk_bytes, threads, cores, blocking=blocking, budget=budget)[0]
    return encoders * chunk_bytes * copies


#: what a worker's IO pool threads add to its RSS once they have decoded and encoded
#: (their stacks and malloc arenas, which keep freed chunk-sized buffers), per thread; an
#: idle worker, whose baseline is measured, has no pool yet. Measured on the 1 GiB
#: rechunk and transpose (2 workers x 1 thread, 8 pool threads): 1-11 MiB per worker
#: above the block and buffers
POOL_THREAD_BYTES = 2**20


def stored_in_flight(piece_bytes: int, *, sharded: bool = False, raw: bool = False,
                     run_bytes: int | None = None) -> int:
    """Stored bytes of one written piece of ``piece_bytes`` decoded bytes, counted
    incompressible (the worst case): a shard's encoding holds its encoded inner chunks
    and the assembled shard (twice); raw chunks of a plain array are written from the
    block (nothing more). ``run_bytes``: a plain array's chunks are committed in runs
    (``rmw.commit_units`` on a local store) holding this much encoded at once (the
    encoding threads' chunks), not the whole piece."""
    if raw and not sharded:
        return 0
    if run_bytes is not None and not sharded:
        return min(piece_bytes, run_bytes)
    return piece_bytes * (2 if sharded else 1)


def streamed_in_flight(chunk_bytes: int, chunks: int, threads: int, *,
                       into_place: bool = False) -> int:
    """Stored bytes held reading ``chunks`` chunks of ``chunk_bytes`` (decoded size,
    counted incompressible) from a store read in place (a local directory: ``plain``'s
    ``_read_in_place``): each pool thread fetches and decodes one chunk at a time;
    ``into_place``: uncompressed chunks of long rows read straight into the block
    (nothing held)."""
    return 0 if into_place else min(threads, chunks) * chunk_bytes
