"""Executes selection plans: batched store calls, parallel decode/encode, scatter/gather.

Reads: the keys of all touched chunks are fetched with one ``get_many`` per batch
(bounded bytes), then decoded in the shared pool and scattered into the output. Stores
with zero-copy views (a local directory: memory maps) are read in place instead: each
compressed chunk is decoded straight from its view by the thread that fetched it, and
uncompressed chunks are indexed directly, only the selected elements being copied.
Writes mirror that: partially covered chunks are fetched in one batch, every chunk is
assembled and encoded in the pool, then stored with one ``set_many``; chunks that end
up all fill_value are deleted instead of written.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from .codecs import Pipeline
from .concurrency import INLINE_ITEM_BYTES, run_batched
from .errors import ChunkDecodeError, ChunkstoreError, CodecError
from .indexing import ChunkProjection
from .ranged_read import RangePlanner
from .storage.base import Store

OBJECT_HINT = (". Arbitrary Python objects need zarr_format=2, an object codec filter "
               "(e.g. numcodecs.Pickle()) and allow_unsafe_codecs=True")
BATCH_BYTES = 256 * 2**20  # decoded bytes per batch: bounds memory of huge selections
VIEW_GROUP = 64  # views held at once (a memory map holds a file descriptor)
_scratch = threading.local()


def is_all_fill(chunk: np.ndarray, fill: Any) -> bool:
    """True when every element equals the fill value (NaN matches NaN)."""
    if fill is None or chunk.size == 0:
        return fill is not None
    if chunk.dtype.kind == "c":  # real and imaginary parts each, NaN matching NaN
        fill = complex(fill)
        return (is_all_fill(chunk.real, chunk.real.dtype.type(fill.real))
                and is_all_fill(chunk.imag, chunk.imag.dtype.type(fill.imag)))
    fill_is_nan = chunk.dtype.kind == "f" and np.isnan(fill)
    first = chunk.flat[0]
    if fill_is_nan:
        return bool(np.isnan(first)) and bool(np.all(np.isnan(chunk)))
    if chunk.dtype.kind in "Mm" and np.isnat(fill):  # NaT != NaT, like NaN
        return bool(np.all(np.isnat(chunk)))
    if first != fill:
        return False
    return not np.any(chunk != fill)


def _scratch_buffer(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A per-thread reusable buffer for decoding (avoids page-faulting a new one per chunk)."""
    key = (shape, dtype.str)
    buf = getattr(_scratch, "buf", None)
    if buf is None or getattr(_scratch, "key", None) != key:
        buf = np.empty(shape, dtype=dtype)
        _scratch.buf, _scratch.key = buf, key
    return buf


class ChunkEngine:
    """Chunk-level reads and writes of one array (the array layer's IO backend)."""

    def __init__(self, store: Store, key_of: Callable[[tuple[int, ...]], str], pipeline: Pipeline,
                 chunk_shape: tuple[int, ...], dtype: np.dtype, fill_value: Any, name: str,
                 synchronizer: Any = None, write_empty_chunks: bool = False) -> None:
        self.store, self.key_of, self.pipeline = store, key_of, pipeline
        self.chunk_shape, self.dtype, self.name = chunk_shape, np.dtype(dtype), name
        self.fill_value = fill_value
        self.read_fill = np.zeros((), self.dtype)[()] if fill_value is None else fill_value
        self.synchronizer = synchronizer
        self.write_empty_chunks = write_empty_chunks
        self.chunk_nbytes = max(1, int(np.prod(chunk_shape, dtype=np.int64)) * self.dtype.itemsize)
        # chunks stored as raw C-ordered bytes: read in place through views of a
        # zero-copy store, else just the byte ranges a small selection needs
        self.raw_dtype: np.dtype | None = None
        self.ranges: RangePlanner | None = None
        if pipeline.fixed_size and self.dtype.kind != "O":
            self.raw_dtype = (pipeline.array_bytes._stored_dtype(self.dtype)
                              if pipeline.zarr_format == 3 else self.dtype)
            if not store.zero_copy_views and store.supports_partial_reads:
                self.ranges = RangePlanner(tuple(chunk_shape), self.raw_dtype,
                                           store.request_cost_bytes)

    # -- helpers ---------------------------------------------------------------------------
    def _batches(self, projections: Iterable[ChunkProjection], batch_bytes: int = BATCH_BYTES
                 ) -> Iterator[list[ChunkProjection]]:
        per_batch = max(1, batch_bytes // self.chunk_nbytes)
        batch: list[ChunkProjection] = []
        for p in projections:
            batch.append(p)
            if len(batch) >= per_batch:
                yield batch
                batch = []
        if batch:
            yield batch

    def decode(self, key: str, blob: Any, out: np.ndarray | None = None) -> np.ndarray:
        """Decode one stored chunk; errors name the array and key."""
        try:
            return self.pipeline.decode(blob, out=out)
        except ChunkstoreError as e:
            raise ChunkDecodeError(f"array {self.name!r}: cannot decode chunk {key!r}: {e}") from e
        except Exception as e:  # codec libraries raise assorted errors on corrupt input
            raise ChunkDecodeError(
                f"array {self.name!r}: cannot decode chunk {key!r}: {type(e).__name__}: {e}"
            ) from e

    def _lock(self, key: str):
        if self.synchronizer is None:
            return contextlib.nullcontext()
        return self.synchronizer[key]

    # -- reads ---------------------------------------------------------------------------------
    def read(self, projections: Iterable[ChunkProjection], out: np.ndarray) -> None:
        """Fill ``out`` from every projected chunk (missing chunks read as fill_value).

        Per batch: views of the chunks (zero-copy stores), else one ``get_many`` for
        whole chunks and, for uncompressed chunks of which only a small part is needed,
        one ``get_ranges`` for just those bytes.
        """
        for batch in self._batches(projections):
            if self.store.zero_copy_views:
                self._read_views(batch, out)
                continue
            whole, ranged = batch, []
            if self.ranges is not None:
                whole = []
                for p in batch:
                    plan = None if p.is_complete else self.ranges.plan(p.chunk_selection)
                    if plan is None:
                        whole.append(p)
                    else:
                        ranged.append((p, plan))
            if whole:
                keys = [self.key_of(p.chunk_coords) for p in whole]
                blobs = self.store.get_many(keys)
                run_batched(lambda item: self._read_one(out, *item),
                            list(zip(whole, keys, blobs, strict=True)),
                            item_bytes=self.chunk_nbytes, cpu_bound=True)
            if ranged:
                self._read_ranged(ranged, out)

    def _read_views(self, batch: list[ChunkProjection], out: np.ndarray) -> None:
        """Chunks read in place (no copy of the stored bytes). Compressed chunks are each
        fetched by the thread that decodes it, so fetching overlaps decoding; raw or small
        ones are fetched a group at a time, with one store call."""
        store, key_of = self.store, self.key_of
        if self.raw_dtype is not None:  # a copy per chunk: a few elements, or whole chunks
            read, size = self._read_view, 0
        else:
            read, size = self._read_one, self.chunk_nbytes
        if self.raw_dtype is not None or self.chunk_nbytes < INLINE_ITEM_BYTES:
            for start in range(0, len(batch), VIEW_GROUP):
                group = batch[start:start + VIEW_GROUP]
                keys = [key_of(p.chunk_coords) for p in group]
                items = list(zip(group, keys, store.get_views(keys), strict=True))
                run_batched(lambda item: read(out, *item), items, item_bytes=size,
                            cpu_bound=True)
            return

        def one(p: ChunkProjection) -> None:
            key = key_of(p.chunk_coords)
            read(out, p, key, store.get_views((key,))[0])

        run_batched(one, batch, item_bytes=size, cpu_bound=True)

    def _read_view(self, out: np.ndarray, proj: ChunkProjection, key: str, view: Any) -> None:
        if view is None:
            out[proj.out_selection] = self.read_fill
            return
        n = memoryview(view).nbytes
        if n != self.chunk_nbytes:
            raise ChunkDecodeError(f"array {self.name!r}: cannot decode chunk {key!r}: chunk "
                                   f"has {n} bytes, expected {self.chunk_nbytes} for shape "
                                   f"{self.chunk_shape} {self.dtype}")
        chunk = np.frombuffer(view, self.raw_dtype).reshape(self.chunk_shape)
        out[proj.out_selection] = chunk[proj.chunk_selection]

    def _read_ranged(self, items: list, out: np.ndarray) -> None:
        keys = [self.key_of(p.chunk_coords) for p, _ in items]  # once per chunk, not range
        requests = [(key, r) for key, (_, plan) in zip(keys, items, strict=True)
                    for r in plan.ranges]
        # a missing chunk answers None to every range: probe each key with its first range
        parts = self.store.get_ranges(requests) if requests else []
        planner = self.ranges
        pos = 0
        for key, (proj, plan) in zip(keys, items, strict=True):
            n = len(plan.ranges)
            got, pos = parts[pos:pos + n], pos + n
            if n and got[0] is None:
                out[proj.out_selection] = self.read_fill
                continue
            flat = _scratch_buffer((planner.nelements,), planner.stored_dtype)
            try:
                values = planner.gather(plan, got, flat)
            except ValueError as e:
                raise ChunkDecodeError(f"array {self.name!r}: cannot decode chunk {key!r}: {e}"
                                       ) from e
            out[proj.out_selection] = values

    def _read_one(self, out: np.ndarray, proj: ChunkProjection, key: str, blob: Any) -> None:
        if blob is None:
            out[proj.out_selection] = self.read_fill
            return
        if proj.is_complete and _is_basic(proj.out_selection):
            view = out[(*proj.out_selection, Ellipsis)]  # a view even when 0-d
            if view.shape == self.chunk_shape and view.dtype.isnative:
                if not view.flags.c_contiguous:  # decode into scratch, copy into the view
                    buf = (_scratch_buffer(self.chunk_shape, self.dtype) if self.dtype.isnative
                           else None)
                    view[...] = self.decode(key, blob, out=buf)
                    return
                # straight into the output when the codec chain can; else copy what it returns
                decoded = self.decode(key, blob, out=view)
                if decoded is not view:
                    view[...] = decoded
                return
        buf = _scratch_buffer(self.chunk_shape, self.dtype) if self.dtype.isnative else None
        chunk = self.decode(key, blob, out=buf)
        out[proj.out_selection] = chunk[proj.chunk_selection]

    def read_chunk(self, coords: tuple[int, ...]) -> np.ndarray:
        """The whole (unclipped) decoded chunk, fill_value if it is not stored."""
        key = self.key_of(coords)
        blob = self.store.get(key)
        if blob is None:
            return np.full(self.chunk_shape, self.read_fill, dtype=self.dtype)
        chunk = self.decode(key, blob)
        return chunk if chunk.flags.writeable else chunk.copy()

    # -- writes ------------------------------------------------------------------------------
    def write(self, projections: Iterable[ChunkProjection], value: np.ndarray,
              scalar: bool = False) -> None:
        """Write ``value`` (already broadcast to the selection shape) into every chunk."""
        encoded_scalar: dict[Any, Any] = {}
        # a remote store holds a batch's encoded chunks until they are sent: smaller batches
        batch_bytes = getattr(self.store, "write_batch_bytes", BATCH_BYTES)
        for batch in self._batches(projections, batch_bytes):
            if self.synchronizer is not None:
                locked = [p for p in batch if not p.is_complete]
                batch = [p for p in batch if p.is_complete]
                run_batched(lambda p: self._write_locked(p, value), locked, min_parallel=1)
            self._write_batch(batch, value, encoded_scalar if scalar else None)

    def _write_batch(self, batch: list[ChunkProjection], value: np.ndarray,
                     scalar_cache: dict | None) -> None:
        keys = [self.key_of(p.chunk_coords) for p in batch]
        partial = [i for i, p in enumerate(batch) if not p.is_complete]
        existing: dict[int, Any] = {}
        if partial:
            blobs = self.store.get_many([keys[i] for i in partial])
            existing = dict(zip(partial, blobs, strict=True))
        results = run_batched(
            lambda i: self._encode_one(batch[i], keys[i], existing.get(i), value, scalar_cache),
            list(range(len(batch))), item_bytes=self.chunk_nbytes, cpu_bound=True)
        self._commit(keys, results)

    def _assemble(self, proj: ChunkProjection, key: str, blob: Any, value: np.ndarray
                  ) -> np.ndarray:
        if proj.is_complete and _is_basic(proj.out_selection):
            data = value[(*proj.out_selection, Ellipsis)]  # an array even when 0-d
            if data.shape == self.chunk_shape:
                return data
        if blob is None:
            chunk = np.full(self.chunk_shape, self.read_fill, dtype=self.dtype)
        else:
            chunk = self.decode(key, blob)
            if not chunk.flags.writeable:
                chunk = chunk.copy()
        chunk[proj.chunk_selection] = value[proj.out_selection]
        return chunk

    def _encode_one(self, proj: ChunkProjection, key: str, blob: Any, value: np.ndarray,
                    scalar_cache: dict | None) -> Any:
        """Encoded bytes of the chunk, or None when it is all fill (to be deleted)."""
        if scalar_cache is not None and proj.is_complete:
            # a scalar written over whole chunks: every such chunk encodes the same
            edge = proj.chunk_selection
            cache_key = tuple((s.start, s.stop) for s in edge if isinstance(s, slice))
            if cache_key in scalar_cache:
                return scalar_cache[cache_key]
            result = self._encode_chunk(self._assemble(proj, key, None, value))
            scalar_cache[cache_key] = result
            return result
        return self._encode_chunk(self._assemble(proj, key, blob, value))

    def _encode_chunk(self, chunk: np.ndarray) -> Any:
        if not self.write_empty_chunks and is_all_fill(chunk, self.fill_value):
            return None
        try:
            return self.pipeline.encode(chunk)
        except (ChunkstoreError, TypeError) as e:  # e.g. an int in a string/bytes array
            hint = OBJECT_HINT if self.dtype.kind == "O" else ""
            raise CodecError(f"array {self.name!r}: cannot encode a chunk of {self.dtype}: {e}"
                             f"{hint}") from e

    def _commit(self, keys: Sequence[str], results: Sequence[Any]) -> None:
        to_set = [(k, r) for k, r in zip(keys, results, strict=True) if r is not None]
        to_delete = [k for k, r in zip(keys, results, strict=True) if r is None]
        if to_set:
            self.store.set_many(to_set)
        if to_delete:
            self.store.delete_many(to_delete)

    def _write_locked(self, proj: ChunkProjection, value: np.ndarray) -> None:
        key = self.key_of(proj.chunk_coords)
        with self._lock(key):
            blob = self.store.get(key)
            encoded = self._encode_chunk(self._assemble(proj, key, blob, value))
            self._commit([key], [encoded])

    def write_chunk(self, coords: tuple[int, ...], chunk: np.ndarray) -> None:
        """Encode and store one whole chunk (deleted instead when it is all fill)."""
        self._commit([self.key_of(coords)], [self._encode_chunk(chunk)])


def _is_basic(selection: tuple[Any, ...]) -> bool:
    return all(isinstance(s, slice | int | np.integer) for s in selection)
