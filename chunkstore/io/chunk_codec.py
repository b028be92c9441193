"""ChunkCodec: the per-chunk work both unit IOs share — decode a stored chunk into (part
of) an output, assemble a chunk from old content and new values, encode it (or say it
is all fill_value, so it need not be stored)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from chunkstore.codecs import CodecPipeline, Pipeline
from chunkstore.codecs.fill import is_all_fill
from chunkstore.errors import ChunkDecodeError, ChunkstoreError, CodecError
from chunkstore.indexing import ChunkProjection
from chunkstore.runtime.scratch import scratch_buffer

OBJECT_HINT = (". Arbitrary Python objects need zarr_format=2, an object codec filter "
               "(e.g. numcodecs.Pickle()) and allow_unsafe_codecs=True")


_BASIC = (slice, int, np.integer)


def is_basic(selection: tuple[Any, ...]) -> bool:
    """Whether ``selection`` holds only slices and integers (no index arrays)."""
    for s in selection:
        if not isinstance(s, _BASIC):
            return False
    return True


class ChunkCodec:
    """Decode/assemble/encode of the chunks of one array (or of the inner chunks of a
    sharded one)."""

    def __init__(self, pipeline: Pipeline, chunk_shape: tuple[int, ...], dtype: np.dtype,
                 fill_value: Any, name: str, write_empty_chunks: bool = False) -> None:
        self.pipeline, self.chunk_shape, self.dtype = pipeline, tuple(chunk_shape), np.dtype(dtype)
        self.fill_value, self.name = fill_value, name
        self.read_fill = np.zeros((), self.dtype)[()] if fill_value is None else fill_value
        self.write_empty_chunks = write_empty_chunks
        self.nbytes = max(1, int(np.prod(chunk_shape, dtype=np.int64)) * self.dtype.itemsize)
        self._fill_encoded: bytes | None = None
        # numcodecs' delta filter stores a running difference: a NaN or infinity turns
        # every later element of the chunk into NaN on decoding (checked when written)
        self._running_sum = self.dtype.kind in "fc" and "delta" in pipeline.filter_ids

    def decode(self, label: str, blob: Any, out: np.ndarray | None = None) -> np.ndarray:
        """Decode one stored chunk; errors name the array and key."""
        try:
            return self.pipeline.decode(blob, out=out)
        except ChunkstoreError as e:
            raise ChunkDecodeError(f"array {self.name!r}: cannot decode chunk {label!r}: {e}"
                                   ) from e
        except Exception as e:  # codec libraries raise assorted errors on corrupt input
            raise ChunkDecodeError(f"array {self.name!r}: cannot decode chunk {label!r}: "
                                   f"{type(e).__name__}: {e}") from e

    def decode_many(self, blobs: Sequence[Any], label: Callable[[int], str]) -> np.ndarray:
        """The stored chunks ``blobs`` decoded into one stack ``(n, *chunk_shape)``, in one
        pass when the codec chain can; ``label(i)`` names chunk ``i`` in errors."""
        fast = self.pipeline.decode_many(blobs) if isinstance(self.pipeline, CodecPipeline) \
            else None
        if fast is not None:
            return fast
        stack = np.empty((len(blobs), *self.chunk_shape), self.dtype)
        native = self.dtype.isnative
        for i, blob in enumerate(blobs):
            place = stack[i]
            chunk = self.decode(label(i), blob, out=place if native else None)
            if chunk is not place:
                place[...] = chunk
        return stack

    def fill_mask(self, stack: np.ndarray) -> np.ndarray:
        """Which chunks of the stack ``(n, *chunk_shape)`` are all fill_value (not to be
        stored): ``is_all_fill`` of each, vectorised for integers and floats."""
        n = len(stack)
        if self.write_empty_chunks or self.fill_value is None:
            return np.zeros(n, bool)
        flat = stack.reshape(n, -1)
        kind, fill = flat.dtype.kind, self.fill_value
        if kind == "f" and flat.dtype.itemsize in (2, 4, 8):  # bit for bit, as is_all_fill
            bits = np.dtype(f"u{flat.dtype.itemsize}").newbyteorder(flat.dtype.byteorder)
            fill = np.asarray(fill, dtype=flat.dtype).view(bits)[()]
            flat, kind = flat.view(bits), "u"
        if kind not in "biu" or flat.shape[1] == 0:
            return np.fromiter((is_all_fill(c, self.fill_value) for c in stack), bool, n)
        mask = flat[:, 0] == fill
        some = np.flatnonzero(mask)
        if some.size:
            mask[some] = (flat[some] == fill).all(axis=1)
        return mask

    def encode_many(self, stack: np.ndarray) -> list[Any]:
        """``encode`` of each chunk of the C-contiguous stack ``(n, *chunk_shape)``: the
        encoded bytes, or None for a chunk all fill (not to be stored)."""
        keep = np.flatnonzero(~self.fill_mask(stack))
        whole = keep.size == len(stack)
        encoded = None
        if keep.size and isinstance(self.pipeline, CodecPipeline):
            encoded = self.pipeline.encode_many(stack if whole else stack[keep])
        if encoded is not None and whole:
            return encoded
        out: list[Any] = [None] * len(stack)
        for n, i in enumerate(keep.tolist()):
            out[i] = self.encode_always(stack[i]) if encoded is None else encoded[n]
        return out

    def fill_chunk(self) -> np.ndarray:
        """A whole chunk of fill_value (every stored chunk has the full chunk shape)."""
        try:
            return np.full(self.chunk_shape, self.read_fill, dtype=self.dtype)
        except MemoryError:
            raise ChunkstoreError(
                f"array {self.name!r}: a chunk of shape {self.chunk_shape} ({self.nbytes} "
                "bytes, as the metadata's chunk shape declares) does not fit in memory; "
                "chunks are written whole") from None

    def read_into(self, out: np.ndarray, proj: ChunkProjection, label: str, blob: Any) -> None:
        """Scatter the stored chunk ``blob`` (None: not stored) into ``out``."""
        if blob is None:
            out[proj.out_selection] = self.read_fill
            return
        native = self.dtype.isnative
        if proj.is_complete and is_basic(proj.out_selection):
            view = out[(*proj.out_selection, Ellipsis)]  # a view even when 0-d
            if view.shape == self.chunk_shape and view.dtype == self.dtype and native:
                if not (view.flags.c_contiguous or self.pipeline.strided_out):
                    # decode into scratch, copy into the view (the planner counts this
                    # buffer through ``io.buffers.decode_scratch``: keep them in step)
                    view[...] = self.decode(label, blob,
                                            out=scratch_buffer(self.chunk_shape, self.dtype))
                    return
                # straight into the output when the codec chain can; else copy
                decoded = self.decode(label, blob, out=view)
                if decoded is not view:
                    view[...] = decoded
                return
        buf = scratch_buffer(self.chunk_shape, self.dtype) if native else None
        chunk = self.decode(label, blob, out=buf)
        out[proj.out_selection] = chunk[proj.chunk_selection]

    def assemble(self, proj: ChunkProjection, label: str, blob: Any, value: np.ndarray
                 ) -> np.ndarray:
        """The chunk after writing ``value[proj.out_selection]`` over its old content
        ``blob`` (None: not stored, i.e. fill_value)."""
        if proj.is_complete and is_basic(proj.out_selection):
            data = value[(*proj.out_selection, Ellipsis)]  # an array even when 0-d
            if data.shape == self.chunk_shape:
                return data
        if blob is None:
            chunk = self.fill_chunk()
        else:
            chunk = self.decode(label, blob)
            if not chunk.flags.writeable:
                chunk = chunk.copy()
        chunk[proj.chunk_selection] = value[proj.out_selection]
        return chunk

    def encode(self, chunk: np.ndarray, strided_ok: bool = False) -> Any:
        """Encoded bytes of ``chunk``, or None when it is all fill (not to be stored);
        ``strided_ok``: an uncompressed strided chunk may stay an array (for a store that
        writes arrays, see ``bytes_codec.raw_bytes``)."""
        if not self.write_empty_chunks and is_all_fill(chunk, self.fill_value):
            return None
        return self.encode_always(chunk, strided_ok)

    def encode_always(self, chunk: np.ndarray, strided_ok: bool = False) -> Any:
        try:
            encoded = self.pipeline.encode(chunk, strided_ok)
        except (ChunkstoreError, TypeError) as e:  # e.g. an int in a string/bytes array
            hint = OBJECT_HINT if self.dtype.kind == "O" else ""
            raise CodecError(f"array {self.name!r}: cannot encode a chunk of {self.dtype}: {e}"
                             f"{hint}") from e
        if self._running_sum and not np.isfinite(chunk).all():
            lost = np.count_nonzero(np.isnan(self.pipeline.decode(encoded)) & ~np.isnan(chunk))
            if lost:
                raise CodecError(
                    f"array {self.name!r}: the delta filter cannot store this chunk: a NaN or "
                    f"infinity before other values would make {lost} of them NaN when read "
                    "(it stores running differences). Such values come from the data, or "
                    f"from the fill value ({self.fill_value}) where nothing was written: "
                    "the padding of an edge chunk, the rest of a partly written chunk; use "
                    "a finite fill_value and finite data, or no delta filter")
        return encoded

    def fill_encoded(self) -> bytes:
        """The encoded all-fill chunk: written instead of a delete where a store cannot
        delete conditionally."""
        if self._fill_encoded is None:
            self._fill_encoded = bytes(self.encode_always(self.fill_chunk()))
        return self._fill_encoded
