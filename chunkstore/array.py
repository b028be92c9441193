"""Array: a chunked, compressed N-d array in a store. A thin facade over metadata,
indexing (pure selection math) and the chunk IO engine."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

import numpy as np

from . import indexing as ix
from .codecs import build_pipeline
from .codecs.pipeline import CodecPipeline
from .codecs.sharding import inner_chunk_shape
from .errors import ConcurrentWriteError, NodeNotFoundError, NodeTypeError, ReadOnlyError
from .hierarchy.attributes import Attributes
from .hierarchy.documents import read_node, try_read_node, update_node
from .hierarchy.paths import normalize_path
from .info import InfoTable, array_codec_chain, human_bytes
from .io.copy import copy_blocks
from .io.engine import Engine, layout_of, open_engine
from .io.layout import ChunkLayout
from .metadata import ArrayMetadata, is_array, join_path
from .metadata.nodes import describe
from .storage.base import Store
from .storage.resolve import resolve_store

ORTHOGONAL, COORDINATE, BASIC = "orthogonal", "coordinate", "basic"
RESIZE_ATTEMPTS = 64


class Array:
    """A Zarr array (v2 or v3) in a store. Create with ``chunkstore.create_array`` or open
    with ``chunkstore.open_array``; index like NumPy.

    >>> import chunkstore as cs
    >>> a = cs.zeros((4, 4), chunks=(2, 2), dtype="i4")
    >>> a[0, :] = 7
    >>> int(a[0, 3])
    7
    """

    def __init__(self, store: Store, path: str = "", metadata: ArrayMetadata | None = None, *,
                 read_only: bool = False, synchronizer: Any = None,
                 write_empty_chunks: bool = False, allow_unsafe_codecs: bool = False) -> None:
        self._store, self._path = store, path
        self._read_only = bool(read_only or store.read_only)
        self._synchronizer = synchronizer
        self._write_empty_chunks = write_empty_chunks
        self._allow_unsafe = allow_unsafe_codecs
        self._meta: ArrayMetadata | None = None
        self._engine_cache: Engine | None = None
        self._layout_cache: tuple[tuple[int, ...], tuple[int, ...], np.dtype] | None = None
        if metadata is not None:
            self._set_metadata(metadata)

    # -- (lazy) metadata ----------------------------------------------------------------------
    def _set_metadata(self, metadata: ArrayMetadata) -> None:
        self._meta = metadata
        self._engine_cache = None
        self._layout_cache = None

    @property
    def metadata(self) -> ArrayMetadata:
        """The parsed metadata document (loaded on first use after unpickling)."""
        if self._meta is None:
            node = read_node(self._store, self._path)
            if not is_array(node):
                raise NodeTypeError(f"path {self._path or '/'!r} in {self._store!r} is a group, "
                                    "not an array")
            self._set_metadata(node)
        return self._meta  # type: ignore[return-value]

    @property
    def _engine(self) -> Engine:
        if self._engine_cache is None:
            meta = self.metadata
            pipeline = build_pipeline(meta, self._where(), self._allow_unsafe)
            self._engine_cache = open_engine(self._store, layout_of(meta, self._path), pipeline,
                                             meta, self.name, self._synchronizer,
                                             self._write_empty_chunks)
        return self._engine_cache

    @property
    def layout(self) -> ChunkLayout:
        """Where the array's elements live: chunk (read unit) and shard or chunk (write
        unit) grids and their store keys."""
        return self._engine.layout

    def _where(self) -> str:
        doc = "zarr.json" if self.metadata.zarr_format == 3 else ".zarray"
        return describe(self._store, self._path, doc)

    def __reduce__(self):
        return (_reopen, (self._store, self._path, self._read_only, self._synchronizer,
                          self._write_empty_chunks, self._allow_unsafe))

    def __eq__(self, other: object) -> bool:
        """The same array: same path in the same store location (an unpickled or reopened
        array equals the original)."""
        return (isinstance(other, Array) and other._path == self._path
                and other._store.location() == self._store.location())

    def __hash__(self) -> int:
        return hash(("array", self._store.location(), self._path))

    @classmethod
    def open(cls, store: Any, *, path: str = "", mode: str = "r+",
             zarr_format: int | None = None, storage_options: dict | None = None,
             synchronizer: Any = None) -> Array:
        """Open the existing array at ``path`` of ``store`` (zarr-python's ``Array.open``):
        mode "r" is read-only; NodeNotFoundError when nothing is there."""
        if mode not in ("r", "r+", "a"):
            raise ValueError(f"Array.open: mode must be 'r', 'r+' or 'a', got {mode!r}")
        st = resolve_store(store, mode=mode, storage_options=storage_options)
        path = normalize_path(path)
        node = try_read_node(st, path, zarr_format, kind="array")
        if node is None:
            raise NodeNotFoundError(f"no array at path {path or '/'!r} in {st!r}")
        if not is_array(node):
            raise NodeTypeError(f"path {path or '/'!r} in {st!r} is a group, not an array")
        return cls(st, path, node, read_only=mode == "r",  # type: ignore[arg-type]
                   synchronizer=synchronizer)

    def update_attributes(self, new_attributes: dict[str, Any]) -> Array:
        """Merge ``new_attributes`` into the attributes (one atomic update); returns self."""
        self.attrs.update(new_attributes)
        return self

    _on_metadata_change: Any = None  # set by a Group holding a consolidated snapshot

    def _adopt_metadata(self, metadata: ArrayMetadata) -> None:
        """Use ``metadata`` (just committed) from now on; tell a consolidated snapshot."""
        self._set_metadata(metadata)
        if self._on_metadata_change is not None:
            self._on_metadata_change(metadata)

    def _check_writable(self) -> None:
        if self._read_only:
            raise ReadOnlyError(f"array {self.name!r} is read-only")

    # -- properties ------------------------------------------------------------------------------
    store = property(lambda self: self._store, doc="The Store holding the array.")
    path = property(lambda self: self._path, doc="Path of the array within the store.")
    read_only = property(lambda self: self._read_only, doc="True when writes are refused.")
    synchronizer = property(lambda self: self._synchronizer)

    @property
    def name(self) -> str:
        return "/" + self._path

    @property
    def basename(self) -> str:
        return self._path.rsplit("/", 1)[-1]

    @property
    def shape(self) -> tuple[int, ...]:
        """The array's shape; assigning a new one resizes (as ``resize``)."""
        return tuple(self.metadata.shape)

    @shape.setter
    def shape(self, value: Any) -> None:
        self.resize(value)
    dtype = property(lambda self: np.dtype(self.metadata.dtype))
    chunks = property(lambda self: inner_chunk_shape(self.metadata)
                      or tuple(self.metadata.chunk_shape),
                      doc="Chunk shape (the inner chunks of a sharded array).")
    fill_value = property(lambda self: self.metadata.fill_value)
    order = property(lambda self: self.metadata.order)
    zarr_format = property(lambda self: self.metadata.zarr_format)
    shards = property(lambda self: tuple(self.metadata.chunk_shape)
                      if inner_chunk_shape(self.metadata) is not None else None,
                      doc="Shard shape (None: not sharded).")
    dimension_names = property(lambda self: self.metadata.dimension_names)
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))
    nbytes = property(lambda self: self.size * self.dtype.itemsize)
    cdata_shape = property(lambda self: ix.chunk_grid_shape(self.shape, self.chunks))
    nchunks = property(lambda self: math.prod(self.cdata_shape))

    @property
    def compressors(self) -> tuple[Any, ...]:
        """The bytes->bytes codecs (v3; inside the shards if sharded) or the compressor (v2)."""
        pipe = getattr(self._engine, "inner_pipeline", self._engine.pipeline)
        if isinstance(pipe, CodecPipeline):
            return tuple(pipe.bytes_bytes)
        return (pipe.compressor,) if pipe.compressor is not None else ()

    @property
    def compressor(self) -> Any:
        """The single compressor (zarr-python 2 spelling), or None."""
        found = self.compressors
        return found[0] if found else None

    @property
    def filters(self) -> tuple[Any, ...]:
        """The array->array codecs (v3; inside the shards if sharded) or the filters (v2)."""
        pipe = getattr(self._engine, "inner_pipeline", self._engine.pipeline)
        if isinstance(pipe, CodecPipeline):
            return tuple(c for c, _ in pipe.array_array)
        return tuple(pipe.filters)

    @property
    def attrs(self) -> Attributes:
        """User attributes; each change is an atomic read-modify-write of the stored ones."""
        def mutate(fn: Any) -> dict[str, Any]:
            self._check_writable()
            meta = update_node(self._store, self._path,
                               lambda m: m.replace(attributes=fn(m.attributes)),
                               synchronizer=self._synchronizer, zarr_format=self.zarr_format,
                               kind="array")
            self._adopt_metadata(meta)  # type: ignore[arg-type]
            return meta.attributes
        return Attributes(lambda: self.metadata.attributes, mutate, f"array {self.name!r}")

    def _chunk_keys(self) -> list[str]:
        prefix = f"{self._path}/" if self._path else ""
        pattern = _chunk_key_pattern(self.metadata, self.ndim)
        return [k for k in self._store.list_prefix(prefix) if pattern.fullmatch(k[len(prefix):])]

    @property
    def nchunks_initialized(self) -> int:
        """Number of chunks present in the store (lists the array's keys). For a sharded
        array, as zarr-python counts: stored shards x inner chunks per shard."""
        if self.shards is not None:
            return len(self._chunk_keys()) * math.prod(
                s // c for s, c in zip(self.shards, self.chunks, strict=True))
        return len(self._chunk_keys())

    @property
    def nbytes_stored(self) -> StoredBytes:
        """Bytes stored for this array: metadata documents plus chunks. An int that is
        also callable, as zarr-python 3's ``nbytes_stored()`` method."""
        docs = [join_path(self._path, k) for k in ("zarr.json", ".zarray", ".zattrs")]
        keys = [k for k in docs if self._store.exists(k)] + self._chunk_keys()
        return StoredBytes(sum(self._store.getsize(k) or 0 for k in keys))

    def info_complete(self) -> InfoTable:
        """``info`` (zarr-python's spelling for the table with storage figures, which
        ``info`` always has)."""
        return self.info

    @property
    def info(self) -> InfoTable:
        """Type, shape, chunks, codecs, storage and compression ratio."""
        stored = self.nbytes_stored
        meta = self.metadata
        extra = []
        if self.dimension_names is not None:
            extra.append(("Dimension names", str(tuple(self.dimension_names))))
        if meta.attributes:
            extra.append(("Attributes", json.dumps(meta.attributes, sort_keys=True)[:200]))
        rows = [
            ("Type", "chunkstore.Array"),
            ("Zarr format", str(self.zarr_format)),
            ("Name", self.name),
            ("Data type", str(self.dtype)),
            ("Shape", str(self.shape)),
            *([("Shard shape", str(self.shards))] if self.shards is not None else []),
            ("Chunk shape", str(self.chunks)),
            ("Order", self.order),
            ("Read-only", str(self.read_only)),
            ("Fill value", str(self.fill_value)),
            ("Filters", str(self.filters)),
            ("Compressors", str(self.compressors)),
            ("Codecs", array_codec_chain(meta.to_json())),
            *extra,
            ("Store type", type(self._store).__name__),
            ("Store", repr(self._store)),
            ("No. bytes", f"{self.nbytes} ({human_bytes(self.nbytes)})"),
            ("No. bytes stored", f"{stored} ({human_bytes(stored)})"),
            ("Storage ratio", f"{self.nbytes / stored:.1f}" if stored else "-"),
            ("Chunks initialized", f"{self.nchunks_initialized}/{self.nchunks}"),
        ]
        return InfoTable(rows)

    def __repr__(self) -> str:
        return (f"<chunkstore.Array {self.name!r} shape={self.shape} dtype={self.dtype} "
                f"chunks={self.chunks} zarr_format={self.zarr_format}>")

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    # -- selections --------------------------------------------------------------------------
    @property
    def _layout(self) -> tuple[tuple[int, ...], tuple[int, ...], np.dtype]:
        """(shape, chunks, dtype), worked out once per metadata: every selection needs them."""
        if self._layout_cache is None:
            self._layout_cache = (self.shape, self.chunks, self.dtype)
        return self._layout_cache

    def _indexer(self, selection: Any, kind: str):
        shape, chunks, _ = self._layout
        try:
            if kind == COORDINATE:
                return ix.CoordinateIndexer(selection, shape, chunks)
            return ix.OrthogonalIndexer(selection, shape, chunks, kind == ORTHOGONAL)
        except IndexError as e:
            raise IndexError(f"array {self.name!r}: {e}") from None

    def _get(self, selection: Any, kind: str, out: np.ndarray | None = None) -> Any:
        indexer = self._indexer(selection, kind)
        shape = indexer.shape
        if out is None:
            # as zarr-python: an order-"F" v2 array gives F-ordered results (not points)
            f_order = kind != COORDINATE and self.zarr_format == 2 and self.order == "F"
            result = np.empty(shape, dtype=self._layout[2], order="F" if f_order else "C")
        else:
            if out.shape != shape:
                raise ValueError(f"array {self.name!r}: out has shape {out.shape}, the selection "
                                 f"has {shape}")
            result = out
        target = result.reshape(-1) if kind == COORDINATE else result
        self._engine.read(indexer, target)
        if kind == COORDINATE:
            return result
        return result[()] if result.ndim == 0 and out is None else result

    def _set(self, selection: Any, value: Any, kind: str) -> None:
        self._check_writable()
        indexer = self._indexer(selection, kind)
        if kind == BASIC and _is_lazy_array(value) and tuple(value.shape) == indexer.shape:
            region = _as_region(selection, self.shape)
            if region is not None:  # another Array, an h5py dataset...: block by block
                copy_blocks(value, self.write_region, self.layout, region,
                            self.dtype.itemsize)
                return
        scalar = np.ndim(value) == 0
        try:
            arr = np.asarray(value, dtype=self.dtype)
        except (ValueError, TypeError) as e:
            raise UnstorableValueError(f"array {self.name!r}: cannot store "
                                       f"{type(value).__name__} as {self.dtype}: {e}") from None
        try:
            arr = np.broadcast_to(arr, indexer.shape)
        except ValueError:
            raise ValueError(f"array {self.name!r}: value of shape {arr.shape} cannot be "
                             f"assigned to a selection of shape {indexer.shape}") from None
        if kind == COORDINATE:
            arr = arr.reshape(-1)
        self._engine.write(indexer, arr, scalar=scalar)

    def __getitem__(self, selection: Any) -> Any:
        selection, kind = ix.numpy_selection(selection, self._layout[0])
        return self._get(selection, kind)

    def __setitem__(self, selection: Any, value: Any) -> None:
        selection, kind = ix.numpy_selection(selection, self._layout[0])
        self._set(selection, value, kind)

    def get_basic_selection(self, selection: Any = Ellipsis, out: np.ndarray | None = None) -> Any:
        """Ints, slices and Ellipsis, as NumPy's basic indexing."""
        return self._get(selection, BASIC, out)

    def set_basic_selection(self, selection: Any, value: Any) -> None:
        self._set(selection, value, BASIC)

    def get_orthogonal_selection(self, selection: Any, out: np.ndarray | None = None) -> Any:
        """Per-axis ints, slices, integer arrays or bool masks, applied independently."""
        return self._get(selection, ORTHOGONAL, out)

    def set_orthogonal_selection(self, selection: Any, value: Any) -> None:
        self._set(selection, value, ORTHOGONAL)

    def get_coordinate_selection(self, selection: Any, out: np.ndarray | None = None) -> Any:
        """Points given by integer arrays (broadcast together), one per axis."""
        return self._get(selection, COORDINATE, out)

    def set_coordinate_selection(self, selection: Any, value: Any) -> None:
        self._set(selection, value, COORDINATE)

    def get_mask_selection(self, mask: Any, out: np.ndarray | None = None) -> Any:
        """The elements where a bool array of the array's shape is True."""
        return self._get(_as_mask(mask, self), COORDINATE, out)

    def set_mask_selection(self, mask: Any, value: Any) -> None:
        self._set(_as_mask(mask, self), value, COORDINATE)

    def get_block_selection(self, selection: Any, out: np.ndarray | None = None) -> Any:
        """Select whole chunks: ``a.blocks[1, :2]`` is chunk row 1, chunk columns 0-1."""
        return self._get(self._blocks_to_slices(selection), BASIC, out)

    def set_block_selection(self, selection: Any, value: Any) -> None:
        self._set(self._blocks_to_slices(selection), value, BASIC)

    def _blocks_to_slices(self, selection: Any) -> tuple[slice, ...]:
        try:
            return ix.block_selection_to_basic(selection, self.shape, self.chunks)
        except IndexError as e:
            raise IndexError(f"array {self.name!r}: {e}") from None

    oindex = property(lambda self: _SelectionView(self, "orthogonal"))
    vindex = property(lambda self: _SelectionView(self, "coordinate"))
    blocks = property(lambda self: _SelectionView(self, "block"))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if copy is False:  # NumPy 2's protocol, as zarr-python: the data is always a copy
            raise ValueError(f"array {self.name!r}: cannot give a NumPy view without a copy "
                             "(the data lives in a store); use np.asarray(a) or a[...]")
        data = np.asarray(self[...])
        return data if dtype is None else data.astype(dtype, copy=False)

    def __iter__(self) -> Iterator[Any]:
        """Iterate over the first axis, decoding each chunk row once."""
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        step = self.chunks[0]
        for start in range(0, self.shape[0], step):
            block = self[start:start + step]
            yield from block

    # -- chunk primitives (the seam the Dask layer uses) ---------------------------------------
    def chunk_key(self, coords: tuple[int, ...]) -> str:
        """The store key of the chunk at grid coordinates ``coords`` (of a sharded
        array: the key of the shard holding that inner chunk)."""
        return self.layout.chunk_key(tuple(int(c) for c in coords))

    def read_chunk(self, coords: tuple[int, ...]) -> np.ndarray:
        """The data of one chunk, clipped to the array's bounds."""
        coords = self._check_coords(coords)
        chunk = self._engine.read_chunk(coords)
        region = ix.chunk_region(coords, self.shape, self.chunks)
        return chunk[tuple(slice(0, s.stop - s.start) for s in region)]

    def write_chunk(self, coords: tuple[int, ...], data: Any) -> None:
        """Replace one whole chunk; ``data`` has the chunk's (edge-clipped) shape."""
        self._check_writable()
        coords = self._check_coords(coords)
        region = ix.chunk_region(coords, self.shape, self.chunks)
        expected = tuple(s.stop - s.start for s in region)
        data = np.asarray(data, dtype=self.dtype)
        if data.shape != expected:
            raise ValueError(f"array {self.name!r}: chunk {coords} needs data of shape "
                             f"{expected}, got {data.shape}")
        if expected != self.chunks:
            full = np.full(self.chunks, self._engine.read_fill, dtype=self.dtype)
            full[tuple(slice(0, n) for n in expected)] = data
            data = full
        self._engine.write_chunk(coords, data)

    def read_region(self, region: tuple[slice, ...]) -> np.ndarray:
        """``a[region]`` for a tuple of step-1 slices (chunk-aligned or not)."""
        return self._get(tuple(region), BASIC)

    def write_region(self, region: tuple[slice, ...], data: Any) -> None:
        """``a[region] = data``; chunk-aligned regions never read existing chunks."""
        self._set(tuple(region), data, BASIC)

    def _check_coords(self, coords: Any) -> tuple[int, ...]:
        coords = tuple(int(c) for c in coords)
        grid = self.cdata_shape
        if len(coords) != len(grid) or any(not 0 <= c < g for c, g in zip(coords, grid, strict=True)):
            raise IndexError(f"array {self.name!r}: chunk coordinates {coords} outside the "
                             f"chunk grid {grid}")
        return coords

    # -- resize / append -------------------------------------------------------------------------
    def resize(self, *shape: Any) -> None:
        """Change the shape. Chunks wholly outside the new shape are deleted; chunks cut by
        the new edge are cleared beyond it, so growing again shows fill_value, never stale
        data."""
        self._check_writable()
        new_shape = tuple(int(s) for s in (shape[0] if len(shape) == 1 and
                                            not isinstance(shape[0], int | np.integer) else shape))
        if len(new_shape) != self.ndim or any(s < 0 for s in new_shape):
            raise ValueError(f"array {self.name!r}: cannot resize {self.shape} to {new_shape}")
        for _attempt in range(RESIZE_ATTEMPTS):
            # clear beyond the new edge from the shape as stored now (another handle may
            # have appended), and commit only over that very shape: a growth in between
            # means clearing again, so no stale rows survive for a later growth to show
            stored = read_node(self._store, self._path, self.zarr_format, kind="array")
            self._adopt_metadata(stored)  # type: ignore[arg-type]
            old = tuple(stored.shape)
            if any(n < o for n, o in zip(new_shape, old, strict=True)):
                self._engine.clear_outside(old, new_shape)

            def change(m: ArrayMetadata, old: tuple[int, ...] = old) -> ArrayMetadata:
                if tuple(m.shape) != old:
                    raise _ShapeMoved
                return m.replace(shape=new_shape)

            try:
                self._change_metadata(change)
                return
            except _ShapeMoved:
                continue
        raise ConcurrentWriteError(f"array {self.name!r}: the shape kept changing under "
                                   f"{RESIZE_ATTEMPTS} attempts to resize to {new_shape}")

    def _change_metadata(self, change: Any) -> ArrayMetadata:
        """Read-modify-write the stored document (``change(current) -> new``, applied to
        what is stored at that moment, so concurrent changes are never lost)."""
        self._check_writable()
        meta = update_node(self._store, self._path, change, synchronizer=self._synchronizer,
                           zarr_format=self.zarr_format, kind="array")
        self._adopt_metadata(meta)  # type: ignore[arg-type]
        return meta  # type: ignore[return-value]

    def append(self, data: Any, axis: int = 0) -> tuple[int, ...]:
        """Grow along ``axis`` and write ``data`` there; returns the new shape.

        The rows are reserved by one read-modify-write of the stored shape, so
        concurrent appenders (threads or processes) each get their own rows."""
        self._check_writable()
        data = np.asarray(data, dtype=self.dtype)
        axis = axis + self.ndim if axis < 0 else axis
        if data.ndim != self.ndim or not 0 <= axis < self.ndim:
            raise ValueError(f"array {self.name!r}: cannot append data of shape {data.shape} "
                             f"to shape {self.shape} along axis {axis}")
        start: list[int] = []

        def grow(meta: ArrayMetadata) -> ArrayMetadata:
            old = tuple(meta.shape)
            if any(d != s for i, (d, s) in enumerate(zip(data.shape, old, strict=True))
                   if i != axis):
                raise ValueError(f"array {self.name!r}: cannot append data of shape "
                                 f"{data.shape} to shape {old} along axis {axis}")
            start[:] = [old[axis]]
            return meta.replace(shape=tuple(s + data.shape[axis] if i == axis else s
                                            for i, s in enumerate(old)))

        new_shape = tuple(self._change_metadata(grow).shape)
        region = tuple(slice(start[0], start[0] + data.shape[axis]) if i == axis
                       else slice(None) for i in range(self.ndim))
        self[region] = data
        return new_shape


class UnstorableValueError(ValueError, TypeError):
    """A value that cannot be converted to the array's dtype: a ValueError, as NumPy and
    zarr-python raise for ``"abc"`` into ints, and a TypeError, as chunkstore raised."""


class StoredBytes(int):
    """``Array.nbytes_stored``: an int that can also be called (zarr-python 3 made it a
    method), so ``a.nbytes_stored`` and ``a.nbytes_stored()`` both work."""

    def __call__(self) -> int:
        return int(self)


class _ShapeMoved(Exception):
    """Another writer changed the stored shape between a resize's clear and its commit."""


class _SelectionView:
    """``a.oindex``, ``a.vindex`` and ``a.blocks``: ``view[sel]`` / ``view[sel] = v``."""

    def __init__(self, array: Array, kind: str) -> None:
        self._array, self._kind = array, kind

    def __getitem__(self, selection: Any) -> Any:
        a = self._array
        if self._kind == "orthogonal":
            return a.get_orthogonal_selection(selection)
        if self._kind == "block":
            return a.get_block_selection(selection)
        return a.get_coordinate_selection(selection)

    def __setitem__(self, selection: Any, value: Any) -> None:
        a = self._array
        if self._kind == "orthogonal":
            a.set_orthogonal_selection(selection, value)
        elif self._kind == "block":
            a.set_block_selection(selection, value)
        else:
            a.set_coordinate_selection(selection, value)


def _as_mask(mask: Any, array: Array) -> np.ndarray:
    mask = np.asarray(mask)
    if mask.dtype != bool or mask.shape != array.shape:
        raise IndexError(f"array {array.name!r}: a mask selection needs a bool array of shape "
                         f"{array.shape}, got {mask.dtype} {mask.shape}")
    return mask


def _is_lazy_array(value: Any) -> bool:
    """An array-like that reads on slicing (not an ndarray): copied block by block."""
    return (not isinstance(value, np.ndarray) and hasattr(value, "shape")
            and hasattr(value, "dtype") and hasattr(value, "__getitem__") and len(value.shape) > 0)


def _as_region(selection: Any, shape: tuple[int, ...]) -> tuple[slice, ...] | None:
    """``selection`` as unit-step slices per axis, or None when it is anything else."""
    items = selection if isinstance(selection, tuple) else (selection,)
    if sum(1 for s in items if s is Ellipsis) > 1 or not all(
            s is Ellipsis or isinstance(s, slice) for s in items):
        return None
    if Ellipsis in items:
        i = items.index(Ellipsis)
        items = items[:i] + (slice(None),) * (len(shape) - len(items) + 1) + items[i + 1:]
    items = items + (slice(None),) * (len(shape) - len(items))
    region = []
    for s, n in zip(items, shape, strict=True):
        start, stop, step = s.indices(n)
        if step != 1:
            return None
        region.append(slice(start, max(start, stop)))
    return tuple(region)


def _chunk_key_pattern(meta: ArrayMetadata, ndim: int) -> re.Pattern[str]:
    if meta.zarr_format == 3 and meta.chunk_key_encoding[0] == "default":
        sep = re.escape(meta.chunk_key_encoding[1])
        return re.compile("c" + "".join(sep + r"\d+" for _ in range(ndim)))
    sep = re.escape(meta.chunk_key_encoding[1] if meta.zarr_format == 3
                    else meta.dimension_separator)
    return re.compile(sep.join([r"\d+"] * ndim) if ndim else "0")


def _reopen(store: Store, path: str, read_only: bool, synchronizer: Any,
            write_empty_chunks: bool, allow_unsafe: bool) -> Array:
    """Unpickling: a lazy Array that loads its metadata on first use."""
    return Array(store, path, None, read_only=read_only, synchronizer=synchronizer,
                 write_empty_chunks=write_empty_chunks, allow_unsafe_codecs=allow_unsafe)
