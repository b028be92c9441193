"""Pure planning arithmetic for rechunk and transpose-and-rewrite (no Dask, no IO).

A *stage* copies array X (chunks ``cx``) into array Y (chunks ``cy``) in blocks ``B``.
A block whose edges fall on both chunk grids (``B[d]`` a multiple of ``lcm(cx[d], cy[d])``,
or the whole axis) reads whole source chunks and writes whole target chunks: no chunk
is decoded twice and no write needs a lock.

**Memory model of one task** (``Stage.memory``, all in bytes; measured, see
``benchmarks/bench_rechunk.py``). A task allocates its decoded block once, fills it
piece by piece (``read_piece``: whole source chunks, about a ``PIECES``-th of the block)
and writes it piece by piece (``write_piece``: whole target write units), so it holds:

* ``block``: the decoded block;
* ``compressed``: the stored bytes of one piece in flight, read or written, counted
  incompressible (the worst case; compressible data holds less). Encoding a whole
  shard holds its inner chunks and the assembled shard: twice its piece. A source in
  a local directory (``streamed_reads``) is read in place, each pool thread holding one
  stored chunk at a time (raw chunks of long rows: none, read into the block); a local
  target (``run_writes``) commits a plain array's chunks in runs, holding the encoding
  threads' chunks (the 1 GiB rechunk on 2 local workers: 383 MiB measured per worker,
  468 predicted when whole pieces were counted, 428 now);
* ``decode_scratch``: a decoded chunk per codec thread when chunks cannot be decoded
  straight into the block (their place in it is strided); pool threads keep this
  buffer between tasks. A transposed source decodes each read piece in its own order
  first (one piece more), then permutes it into the block;
* ``encode_copy``: per encoding thread, the codec's output buffer and its trimmed copy
  (two chunks), plus a contiguous copy of the chunk when its place in the block is
  strided; on as many threads as the writes themselves use (``io.buffers.
  commit_threads``: one per core, two on a local target, within
  ``threading.write_bytes`` of chunks). ``codec_threads`` is the pool size.

``task_memory = block + decode_scratch + max(read piece, written piece + encode_copy)``.
The engine's terms (decode scratch, codec buffers, encodes in flight, stored bytes) are
the engine's own description of its buffers, ``chunkstore.io.buffers``, which its write
batching uses too: the model follows the engine when it changes.
A worker holds its baseline (the idle process) plus ``threads`` tasks at once, its IO
pool's codec buffers once and the pool's threads (``buffers.POOL_THREAD_BYTES`` each):
that is the per-worker figure ``RechunkPlan.describe()`` shows beside the per-task one.
``max_mem`` bounds ``task_memory``: blocks are grown only while it fits, and beyond
their aligned size only up to ``BLOCK_BYTES`` (a larger block reads and writes the same
chunks, but holds more and leaves fewer tasks to balance over the workers).

When the one-stage block would not fit, the copy goes through an intermediate array
with chunks ``I`` chosen so that both X -> I and I -> Y have aligned blocks that fit
(the idea of rechunker's intermediate array, with our own search). An intermediate in
a local directory is stored uncompressed (``raw_target``/``raw_source``): its chunks
are written from the block without encoding (no ``encode_copy``, nothing in flight for
contiguous chunks) and read straight from the mapped file (no ``decode_scratch``; the
mapped pages of the piece count as its ``compressed`` bytes). A plan that cannot fit
at all (a single source or target chunk above the budget) is refused before anything
runs.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from chunkstore.codecs.bytes_codec import MIN_ROW_BYTES
from chunkstore.io import buffers
from chunkstore.io.buffers import contiguous_in
from chunkstore.sizes import parse_bytes

#: a task reads and writes its block in about this many pieces (at least a chunk each)
PIECES = 4
#: codec threads of one task unless told (chunkstore's pool on 2 cores: 4 per core)
CODEC_THREADS = 8
#: blocks grow beyond their aligned size (whole source and target chunks) only up to
#: this: a larger block reads and writes the same chunks, but holds more memory and makes
#: fewer tasks to balance over the workers (the 4 GiB transpose on 2 workers: 13 tasks of
#: 320 MiB, one worker idle for the last one, vs 64 of 64 MiB); a task copies a run of
#: blocks when a stage would have too many (``rechunk.MAX_TASKS_PER_STAGE``)
BLOCK_BYTES = 64 * 2**20
class PlanError(ValueError):
    """No plan can honour max_mem (a single chunk is already too large)."""


def _clip(chunks: Sequence[int], shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(max(1, min(c, n)) for c, n in zip(chunks, shape, strict=True))


def _piece(block: Sequence[int], unit: Sequence[int], itemsize: int, nbytes: int
           ) -> tuple[int, ...]:
    """The largest sub-block of whole ``unit`` multiples (last axes grown first) within
    ``nbytes``, at least one unit (clipped to the block)."""
    piece = [min(u, b) for u, b in zip(unit, block, strict=True)]
    for d in reversed(range(len(piece))):
        while piece[d] < block[d]:
            trial = min(block[d], piece[d] + unit[d])
            if math.prod(piece[:d] + [trial] + piece[d + 1:]) * itemsize > nbytes:
                return tuple(piece)
            piece[d] = trial
    return tuple(piece)


@dataclass(frozen=True)
class Stage:
    """One copy pass: ``source_chunks`` -> ``target_chunks`` in blocks of ``block``.

    ``target_chunks`` are the target's write units (its shards when sharded; then
    ``write_chunks`` are its inner chunks). ``transposed``: the source is a transposed
    view (its chunks never land contiguously in the block). ``codec_threads``: pool
    threads decoding/encoding for one task. ``raw_source``/``raw_target``: the stage
    reads/writes uncompressed chunks of a local directory (an intermediate array):
    read straight from the mapped file, written from the block without a copy.
    """

    shape: tuple[int, ...]
    source_chunks: tuple[int, ...]
    target_chunks: tuple[int, ...]
    block: tuple[int, ...]
    itemsize: int
    transposed: bool = False
    write_chunks: tuple[int, ...] | None = None
    codec_threads: int = CODEC_THREADS
    pieces: int = field(default=PIECES, compare=False)
    raw_source: bool = False
    raw_target: bool = False
    streamed_reads: bool = False
    run_writes: bool = False

    @property
    def ntasks(self) -> int:
        return math.prod(math.ceil(n / b) for n, b in zip(self.shape, self.block, strict=True)) \
            if all(self.shape) else 0

    @property
    def block_bytes(self) -> int:
        return math.prod(self.block) * self.itemsize

    @property
    def nbytes(self) -> int:
        """Decoded bytes read (= written) by the stage."""
        return math.prod(self.shape) * self.itemsize

    @property
    def sharded(self) -> bool:
        return self.write_chunks is not None and tuple(self.write_chunks) != self.target_chunks

    # -- pieces -----------------------------------------------------------------------------
    @cached_property
    def read_piece(self) -> tuple[int, ...]:
        """Sub-blocks read at once: whole source chunks, about a PIECES-th of the block."""
        return self._piece_of(self.source_chunks)

    @cached_property
    def write_piece(self) -> tuple[int, ...]:
        """Sub-blocks written at once: whole target write units."""
        return self._piece_of(self.target_chunks)

    def _piece_of(self, unit: Sequence[int]) -> tuple[int, ...]:
        if not self.shape:
            return ()
        block = _clip(self.block, self.shape)
        return _piece(block, _clip(unit, block), self.itemsize,
                      self.block_bytes // max(1, self.pieces))

    # -- memory -----------------------------------------------------------------------------
    @cached_property
    def memory(self) -> dict[str, int]:
        """The terms of one task's peak memory (see the module docstring), and ``total``."""
        if not self.shape:
            one = self.itemsize
            return {"block": one, "compressed": one, "decode_scratch": 0, "encode_copy": 0,
                    "total": 2 * one}
        block = _clip(self.block, self.shape)
        size = self.itemsize
        src = _clip(self.source_chunks, block)
        inner = _clip(self.write_chunks or self.target_chunks, block)
        read_piece, write_piece = self.read_piece, self.write_piece
        per_read = math.prod(-(-p // c) for p, c in zip(read_piece, src, strict=True))
        per_write = math.prod(-(-p // c) for p, c in zip(write_piece, inner, strict=True))
        threads = self.codec_threads
        # the engine's buffers (``io.buffers``: one description, the engine's own)
        if self.transposed:  # the piece is decoded in the source's order, then permuted
            decode = math.prod(read_piece) * size + buffers.decode_scratch(
                math.prod(src) * size, per_read, per_read > 1, threads)
        else:
            decode = buffers.decode_scratch(
                math.prod(src) * size, per_read,
                not contiguous_in(src, block) and not self.raw_source, threads)
        raw = self.raw_target and not self.sharded
        cores = buffers.cpu_threads(threads)
        encode = buffers.encode_buffers(math.prod(inner) * size, per_write,
                                        not contiguous_in(inner, block), threads,
                                        cores=cores, sharded=self.sharded, raw=raw,
                                        blocking=self.run_writes)
        if self.streamed_reads or self.raw_source:
            read_c = buffers.streamed_in_flight(
                math.prod(src) * size, per_read, threads,
                into_place=self.raw_source and not self.transposed
                and len(src) >= 2 and src[-1] * size >= MIN_ROW_BYTES)
        else:
            read_c = math.prod(read_piece) * size
        # a local target's runs: each committing thread holds its run's chunks built
        runners, run = buffers.commit_threads(per_write, math.prod(inner) * size, threads,
                                              cores, blocking=True)
        write_c = buffers.stored_in_flight(
            math.prod(write_piece) * size, sharded=self.sharded, raw=raw,
            run_bytes=runners * run * math.prod(inner) * size if self.run_writes else None)
        terms = {"block": self.block_bytes, "compressed": max(read_c, write_c),
                 "decode_scratch": decode, "encode_copy": encode}
        # the sum: a transposed source's piece buffer is kept through the write (the
        # buffer pool lends it to the next task, ``buffer_pool``), measured on local
        # files 305 MiB per worker, 307 predicted; on S3 the client's copy of the piece
        # being uploaded comes on top (368 measured)
        terms["total"] = self.block_bytes + decode + max(read_c, write_c + encode)
        return terms

    @property
    def task_memory(self) -> int:
        """Expected peak bytes one task holds (``memory["total"]``)."""
        return self.memory["total"]

    # -- blocks -----------------------------------------------------------------------------
    def nblocks(self) -> int:
        return self.ntasks

    def block_region(self, j: int) -> tuple[slice, ...]:
        """The ``j``-th block region (C order), computed without listing the others."""
        grid = [math.ceil(n / b) for n, b in zip(self.shape, self.block, strict=True)]
        out = []
        for n, b, g in zip(reversed(self.shape), reversed(self.block), reversed(grid),
                           strict=True):
            j, i = divmod(j, g)
            out.append(slice(i * b, min(n, (i + 1) * b)))
        return tuple(reversed(out))

    def blocks(self) -> list[tuple[slice, ...]]:
        """The block regions of the stage, in C order."""
        ranges = [range(0, n, b) for n, b in zip(self.shape, self.block, strict=True)]
        return [tuple(slice(s, min(n, s + b)) for s, n, b in
                      zip(starts, self.shape, self.block, strict=True))
                for starts in itertools.product(*ranges)]


def pieces_of(region: Sequence[slice], piece: Sequence[int]) -> Iterator[tuple[slice, ...]]:
    """``region`` cut into sub-regions of ``piece`` (C order); the region starts on the
    piece grid's units, so each sub-region covers whole units (or the region's end)."""
    ranges = [range(s.start, s.stop, max(1, p)) for s, p in zip(region, piece, strict=True)]
    for starts in itertools.product(*ranges):
        yield tuple(slice(a, min(s.stop, a + max(1, p)))
                    for a, s, p in zip(starts, region, piece, strict=True))


def _aligned(n: int, a: int, b: int) -> int:
    """Smallest block length along one axis aligned with chunk lengths ``a`` and ``b``."""
    return min(max(n, 1), math.lcm(a, b))


def _grow(block: list[int], shape: Sequence[int], unit: Sequence[int],
          fits: Callable[[tuple[int, ...]], bool]) -> list[int]:
    """Enlarge ``block`` by whole ``unit`` multiples (last axes first) while it fits."""
    block = list(block)
    for d in reversed(range(len(block))):
        cap = max(shape[d], 1)
        while block[d] < cap:
            trial = min(cap, block[d] + unit[d])
            if not fits(tuple(block[:d] + [trial] + block[d + 1:])):
                return block
            block[d] = trial
    return block


def _divisor_candidates(a: int, b: int, n: int) -> list[int]:
    """Intermediate chunk lengths worth trying on one axis: divisors of either chunk
    length that are multiples of their gcd, the gcd times powers of two up to the larger
    chunk (when an axis has a prime number of gcd-long pieces, e.g. 17 tiles, its only
    divisors would be one piece or the whole axis), plus the whole axis."""
    g = math.gcd(a, b)
    cands = {g, min(n, max(a, b)), max(1, n)}
    step = 2 * g
    while step < min(max(a, b), n):
        cands.add(step)
        step *= 2
    for x in (a, b):
        for k in range(1, int(math.isqrt(x)) + 1):
            if x % k == 0:
                for d in (k, x // k):
                    if d % g == 0:
                        cands.add(min(d, max(1, n)))
    return sorted(cands)


def plan_rechunk(shape: Sequence[int], source_chunks: Sequence[int],
                 target_chunks: Sequence[int], itemsize: int,
                 max_mem: int | str, *, transposed: bool = False,
                 write_chunks: Sequence[int] | None = None,
                 codec_threads: int = CODEC_THREADS, min_tasks: int = 1,
                 block_bytes: int = BLOCK_BYTES, raw_intermediate: bool = False,
                 streamed_reads: bool = False, run_writes: bool = False) -> list[Stage]:
    """One or two stages that copy ``source_chunks`` into ``target_chunks`` with every
    task's modelled memory (``Stage.task_memory``) within ``max_mem``.

    Aligned blocks grow (by whole aligned steps) up to ``block_bytes`` while they fit and
    while a stage keeps at least ``min_tasks`` blocks
    (e.g. twice the cluster's threads, so that every thread has work).
    ``raw_intermediate``: an intermediate array, if one is needed, is stored
    uncompressed in a local directory (``Stage.raw_source``/``raw_target``).
    ``streamed_reads``/``run_writes``: the source is read in place / the target written
    in runs (local directories: ``Stage``).

    >>> [s.block for s in plan_rechunk((100, 100), (10, 100), (100, 10), 8, "1MiB")]
    [(100, 100)]
    """
    shape, cx, cy = tuple(shape), tuple(source_chunks), tuple(target_chunks)
    if not len(shape) == len(cx) == len(cy):
        raise ValueError(f"shape {shape}, source chunks {cx} and target chunks {cy} differ in "
                         "dimensionality")
    budget = parse_bytes(max_mem)  # (an int passes through: ``rechunk`` parsed it)
    inner = tuple(write_chunks) if write_chunks is not None else None

    def stage(a: tuple[int, ...], b: tuple[int, ...], block: Sequence[int], first: bool,
              last: bool) -> Stage:
        return Stage(shape, a, b, tuple(block), itemsize, transposed=transposed and first,
                     raw_source=raw_intermediate and not first,
                     raw_target=raw_intermediate and not last,
                     write_chunks=inner if last else None, codec_threads=codec_threads,
                     streamed_reads=streamed_reads and first, run_writes=run_writes and last)

    def fits(a: tuple[int, ...], b: tuple[int, ...], first: bool, last: bool
             ) -> Callable[[tuple[int, ...]], bool]:
        def check(block: tuple[int, ...]) -> bool:
            s = stage(a, b, block, first, last)
            return s.task_memory <= budget and s.ntasks >= min_tasks \
                and s.block_bytes <= block_bytes
        return check

    for name, chunks in (("source", cx), ("target", cy)):
        one = stage(cx, cy, _clip(chunks, shape), True, True) if shape else None
        need = one.task_memory if one else itemsize
        if need > budget:
            nbytes = math.prod(_clip(chunks, shape)) * itemsize
            raise PlanError(
                f"one {name} chunk {chunks} is {nbytes} bytes; a task copying it needs about "
                f"{need} bytes (the chunk, its stored bytes and codec buffers) but max_mem "
                f"is {budget}")
    if not shape:
        return [stage(cx, cy, (), True, True)]
    direct = [_aligned(n, a, b) for n, a, b in zip(shape, cx, cy, strict=True)]
    if stage(cx, cy, direct, True, True).task_memory <= budget:
        block = _grow(direct, shape, direct, fits(cx, cy, True, True))
        return [stage(cx, cy, block, True, True)]
    inter = _intermediate(shape, cx, cy, budget, stage)
    if inter is None:
        raise PlanError(f"no intermediate chunking lets {cx} -> {cy} fit in max_mem={budget} "
                        "bytes; raise max_mem")
    stages = []
    for i, (a, b) in enumerate(((cx, inter), (inter, cy))):
        aligned = [_aligned(n, p, q) for n, p, q in zip(shape, a, b, strict=True)]
        first, last = i == 0, i == 1
        block = _grow(aligned, shape, aligned, fits(a, b, first, last))
        stages.append(stage(a, b, block, first, last))
    return stages


def _intermediate(shape: Sequence[int], cx: tuple[int, ...], cy: tuple[int, ...], budget: int,
                  stage: Callable[..., Stage]) -> tuple[int, ...] | None:
    """Largest intermediate chunks I with aligned X->I and I->Y blocks that both fit."""
    ndim = len(shape)
    cands = [_divisor_candidates(cx[d], cy[d], shape[d]) for d in range(ndim)]
    idx = [0] * ndim

    def cost(i: list[int]) -> int:
        inter = tuple(cands[d][i[d]] for d in range(ndim))
        r = [_aligned(shape[d], cx[d], inter[d]) for d in range(ndim)]
        w = [_aligned(shape[d], inter[d], cy[d]) for d in range(ndim)]
        return max(stage(cx, inter, r, True, False).task_memory,
                   stage(inter, cy, w, False, True).task_memory)

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


#: Above this many blocks a stage's copy tasks each copy a run of blocks.
MAX_TASKS_PER_STAGE = 10_000


def blocks_per_task(stage: Stage, max_tasks: int = MAX_TASKS_PER_STAGE) -> int:
    """Blocks one copy task of ``stage`` copies (1 unless the stage has more blocks than
    ``max_tasks``)."""
    return max(1, math.ceil(stage.ntasks / max(1, max_tasks)))
