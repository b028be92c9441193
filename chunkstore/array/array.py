"""Array: a chunked, compressed N-d array in a store. A thin facade over metadata,
indexing (pure selection math) and the chunk IO engine."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from chunkstore import indexing as ix
from chunkstore.array.copy import copy_value, note_read
from chunkstore.array.grids import (
    chunk_sizes,
    chunks_label,
    regular_chunks,
    regular_shards,
    write_grid,
)
from chunkstore.array.hdf5_files import check_value
from chunkstore.array.info import (
    StoredBytes,
    chunks_initialized,
    compressors_of,
    filters_of,
    info_table,
    nbytes_stored,
)
from chunkstore.array.resize import (
    RESIZE_ATTEMPTS,
    ShapeMoved,
    appended,
    requested_shape,
    resized_from,
)
from chunkstore.array.selection import (
    SelectionView,
    as_region,
    as_values,
    block_slices,
    broadcast_value,
    checked_coords,
    checked_mask,
    chunk_extent,
    is_lazy_array,
    require_stored,
)
from chunkstore.array.snapshot import Snapshot, open_engine_of
from chunkstore.config import ArrayConfig, array_config
from chunkstore.errors import (
    ArrayNotFoundError,
    ConcurrentWriteError,
    NodeTypeError,
    ReadOnlyError,
)
from chunkstore.indexing import BASIC, COORDINATE, ORTHOGONAL
from chunkstore.io.cache import chunk_cache
from chunkstore.io.engine import Engine
from chunkstore.io.layout import ChunkLayout
from chunkstore.metadata import ArrayMetadata, is_array
from chunkstore.nodes.attributes import Attributes
from chunkstore.nodes.documents import read_node, try_read_node, update_node
from chunkstore.nodes.info import InfoTable
from chunkstore.nodes.paths import normalize_path
from chunkstore.storage.base import Store
from chunkstore.storage.reference import ObjectRef, store_ref
from chunkstore.storage.resolve import resolve_store

__all__ = ["Array"]


class Array:
    """A Zarr array (v2 or v3) in a store. Create with ``chunkstore.create_array`` or open
    with ``chunkstore.open_array``; index like NumPy.

    >>> import chunkstore as cs
    >>> a = cs.zeros((4, 4), chunks=(2, 2), dtype="i4")
    >>> a[0, :] = 7
    >>> int(a[0, 3])
    7

    ``cache``: the decoded chunks kept between reads (``io.chunk_cache``): None follows
    ``config["cache.chunk_bytes"]`` (off by default); 0 or False, off; a byte budget
    (``"256MiB"``), a private LRU; a ``ChunkCache``, shared with the arrays given it.
    Writes invalidate the chunks they touch. ValueError for anything else.

    ``config``: this handle's settings (``Array.config``, an ``ArrayConfig``: ``order``,
    ``write_empty_chunks``, ``read_missing_chunks``...), from a dict of some of them, the
    rest from ``chunkstore.config`` when the handle is made; ``write_empty_chunks=``
    overrides the one of that name.
    """

    def __init__(self, store: Store, path: str = "", metadata: ArrayMetadata | None = None, *,
                 read_only: bool = False, synchronizer: Any = None,
                 write_empty_chunks: bool | None = None, allow_unsafe_codecs: bool = False,
                 cache: Any = None, config: Any = None) -> None:
        self._config = array_config(config, write_empty_chunks)
        self._cache = chunk_cache.from_argument(cache)
        self._store, self._path = store, path
        self._read_only = bool(read_only or store.read_only)
        self._synchronizer = synchronizer
        self._allow_unsafe = allow_unsafe_codecs
        self._meta: ArrayMetadata | None = None
        self._snap: Snapshot | None = None
        if metadata is not None:
            self._set_metadata(metadata)

    # -- (lazy) metadata ----------------------------------------------------------------------
    def _set_metadata(self, metadata: ArrayMetadata) -> None:
        self._meta = metadata
        self._snap = None

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

    def _snapshot(self) -> Snapshot:
        """The current metadata with its layout and engine (see ``snapshot.Snapshot``)."""
        meta, snap = self.metadata, self._snap
        if snap is None or snap.meta is not meta:  # (no reference back to self: when the
            # last handle goes, a store such as a ZipStore is closed at once)
            snap = self._snap = Snapshot(meta, functools.partial(
                open_engine_of, self._store, self._path, self._synchronizer,
                self._config.write_empty_chunks, self._allow_unsafe, self._cache))
        return snap

    @property
    def _engine(self) -> Engine:
        return self._snapshot().engine

    @property
    def layout(self) -> ChunkLayout:
        """Where the array's elements live: chunk (read unit) and shard or chunk (write
        unit) grids and their store keys."""
        return self._engine.layout

    def __reduce__(self):
        return (_reopen, (self._store, self._path, self._read_only, self._synchronizer,
                          self._config.write_empty_chunks, self._allow_unsafe, self._cache,
                          self._config))

    @property
    def config(self) -> ArrayConfig:
        """This handle's settings (zarr-python's ``Array.config``): order of the arrays
        reads return, write_empty_chunks, read_missing_chunks..."""
        return self._config

    def with_config(self, config: Any) -> Array:
        """A handle on the same array with other settings: a dict changes the fields it
        names (the others stay this handle's), an ArrayConfig replaces them all."""
        if isinstance(config, ArrayConfig):
            new = config
        elif isinstance(config, dict):
            new = array_config({**self._config.to_dict(), **config})
        else:
            raise TypeError(f"with_config takes a dict of array settings or an ArrayConfig, "
                            f"got {type(config).__name__}: {config!r}")
        return type(self)(self._store, self._path, self._meta, read_only=self._read_only,
                          synchronizer=self._synchronizer, config=new,
                          allow_unsafe_codecs=self._allow_unsafe, cache=self._cache)

    def _use_cache(self, cache: Any) -> None:
        """Use ``cache`` (a ``cache=`` argument) from now on."""
        self._cache = chunk_cache.from_argument(cache)
        self._snap = None

    def __eq__(self, other: object) -> bool:
        """The same array: same path in the same store location (an unpickled or reopened
        array equals the original)."""
        return isinstance(other, Array) and other._ref() == self._ref()

    def __hash__(self) -> int:
        return hash(("array", self._ref()))

    def _ref(self) -> ObjectRef:
        """The node's object reference: equal for every handle on it, whatever root it
        was opened from (a group handle's member and a handle on the array itself)."""
        return store_ref(self._store).child(self._path)

    @classmethod
    def open(cls, store: Any, *, path: str = "", mode: str = "r+",
             zarr_format: int | None = None, storage_options: dict | None = None,
             synchronizer: Any = None, cache: Any = None, config: Any = None) -> Array:
        """Open the existing array at ``path`` of ``store`` (zarr-python's ``Array.open``):
        mode "r" is read-only; ArrayNotFoundError (a NodeNotFoundError) when nothing is
        there. ``cache``: the decoded-chunk cache, ``config``: the handle's settings (see
        the class docstring)."""
        if mode not in ("r", "r+", "a"):
            raise ValueError(f"Array.open: mode must be 'r', 'r+' or 'a', got {mode!r}")
        cache = chunk_cache.from_argument(cache)  # checked before anything is opened
        config = array_config(config)
        st = resolve_store(store, mode=mode, storage_options=storage_options)
        path = normalize_path(path)
        node = try_read_node(st, path, zarr_format, kind="array")
        if node is None:
            raise ArrayNotFoundError(f"no array at path {path or '/'!r} in {st!r}")
        if not is_array(node):
            raise NodeTypeError(f"path {path or '/'!r} in {st!r} is a group, not an array")
        return cls(st, path, node, read_only=mode == "r",  # type: ignore[arg-type]
                   synchronizer=synchronizer, cache=cache, config=config)

    def update_attributes(self, new_attributes: dict[str, Any]) -> Array:
        """Merge ``new_attributes`` into the attributes (one atomic update); returns self."""
        self.attrs.update(new_attributes)
        return self

    _on_metadata_change: Any = None  # set by a Group holding a consolidated snapshot
    #: the metadata came from a group's consolidated snapshot and has not been compared
    #: with the stored document yet (set by the Group; see ``_check_snapshot``)
    _from_snapshot = False

    def _adopt_metadata(self, metadata: ArrayMetadata) -> None:
        """Use ``metadata`` (just committed) from now on; tell a consolidated snapshot."""
        self._set_metadata(metadata)
        if self._on_metadata_change is not None:
            self._on_metadata_change(metadata)

    def _check_snapshot(self) -> None:
        """Before the first write of an array handed out from a consolidated snapshot: the
        stored document is read once, and adopted when the array was changed or replaced
        through another handle since (a write through the snapshot's layout would write
        chunks of another dtype or shape into the new array); gone, ArrayNotFoundError."""
        stored = try_read_node(self._store, self._path, self.zarr_format, kind="array")
        if stored is None or not is_array(stored):
            raise ArrayNotFoundError(
                f"array {self.name!r}: no longer in {self._store!r} (removed since its "
                "group's consolidated metadata was read); reopen the group")
        if stored != self.metadata:
            self._adopt_metadata(stored)  # type: ignore[arg-type]
        self._from_snapshot = False

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
    chunks = property(lambda self: regular_chunks(self.metadata, self.name),
                      doc="Chunk shape (the inner chunks of a sharded array); "
                          "NotImplementedError for a rectilinear grid, as zarr-python.")
    fill_value = property(lambda self: self.metadata.fill_value)
    order = property(lambda self: self.metadata.order)
    zarr_format = property(lambda self: self.metadata.zarr_format)
    shards = property(lambda self: regular_shards(self.metadata, self.name),
                      doc="Shard shape (None: not sharded); NotImplementedError for "
                          "rectilinear shards, as zarr-python.")
    read_chunk_sizes = property(lambda self: chunk_sizes(self._snapshot().grid),
                                doc="Per axis the length of every chunk (as zarr-python).")
    write_chunk_sizes = property(lambda self: chunk_sizes(write_grid(self.metadata)),
                                 doc="Per axis the length of every stored object (shard, "
                                     "or chunk), as zarr-python.")
    dimension_names = property(lambda self: self.metadata.dimension_names)
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))
    nbytes = property(lambda self: self.size * self.dtype.itemsize)
    cdata_shape = property(lambda self: self._snapshot().grid.grid_shape)
    nchunks = property(lambda self: math.prod(self.cdata_shape))

    @property
    def compressors(self) -> tuple[Any, ...]:
        """The bytes->bytes codecs (v3; inside the shards if sharded) or the compressor (v2)."""
        return compressors_of(self._engine)

    @property
    def compressor(self) -> Any:
        """The single compressor (zarr-python 2 spelling), or None."""
        found = self.compressors
        return found[0] if found else None

    @property
    def filters(self) -> tuple[Any, ...]:
        """The array->array codecs (v3; inside the shards if sharded) or the filters (v2)."""
        return filters_of(self._engine)

    @property
    def attrs(self) -> Attributes:
        """User attributes; each change is an atomic read-modify-write of the stored ones."""
        def mutate(fn: Any) -> dict[str, Any]:
            return self._change_metadata(lambda m: m.replace(attributes=fn(m.attributes))
                                         ).attributes
        return Attributes(lambda: self.metadata.attributes, mutate, f"array {self.name!r}")

    @property
    def nchunks_initialized(self) -> int:
        """Number of chunks present in the store (lists the array's keys). For a sharded
        array, as zarr-python counts: stored shards x inner chunks per shard."""
        return chunks_initialized(self)

    @property
    def nbytes_stored(self) -> StoredBytes:
        """Bytes stored for this array: metadata documents plus chunks. An int that is
        also callable, as zarr-python 3's ``nbytes_stored()`` method."""
        return nbytes_stored(self)

    def info_complete(self) -> InfoTable:
        """``info`` (zarr-python's spelling for the table with storage figures, which
        ``info`` always has)."""
        return self.info

    @property
    def info(self) -> InfoTable:
        """Type, shape, chunks, codecs, storage and compression ratio."""
        return info_table(self)

    def __repr__(self) -> str:
        return (f"<chunkstore.Array {self.name!r} shape={self.shape} dtype={self.dtype} "
                f"chunks={chunks_label(self.metadata)} zarr_format={self.zarr_format}>")

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    # -- selections --------------------------------------------------------------------------
    @property
    def _layout(self) -> tuple[tuple[int, ...], tuple[int, ...], np.dtype]:
        """(shape, chunks, dtype), worked out once per metadata: every selection needs them."""
        return self._snapshot().layout

    def _indexer(self, selection: Any, kind: str, snap: Snapshot | None = None):
        shape, chunks, _ = (snap or self._snapshot()).layout
        try:
            if kind == COORDINATE:
                return ix.CoordinateIndexer(selection, shape, chunks)
            return ix.OrthogonalIndexer(selection, shape, chunks, kind == ORTHOGONAL)
        except IndexError as e:  # (BoundsCheckError stays one)
            raise type(e)(f"array {self.name!r}: {e}") from None

    def _get(self, selection: Any, kind: str, out: np.ndarray | None = None) -> Any:
        """The elements at ``selection`` (run as ``kind``), into ``out`` if given."""
        note_read(self)
        snap = self._snapshot()
        indexer = self._indexer(selection, kind, snap)
        if not self.config.read_missing_chunks:
            require_stored(self._store, snap.engine.layout, indexer, self.name)
        if out is None:
            # as zarr-python: the config's order, and an order-"F" v2 array's (not for points)
            f_order = kind != COORDINATE and (self.config.order == "F" or (
                snap.meta.zarr_format == 2 and snap.meta.order == "F"))
            result = np.empty(indexer.shape, dtype=snap.layout[2],
                              order="F" if f_order else "C")
        elif out.shape != indexer.shape:
            raise ValueError(f"array {self.name!r}: out has shape {out.shape}, the selection "
                             f"has {indexer.shape}")
        else:
            result = out
        snap.engine.read(indexer, result.reshape(-1) if kind == COORDINATE else result)
        if kind == COORDINATE:
            return result
        return result[()] if result.ndim == 0 and out is None else result

    def _set(self, selection: Any, value: Any, kind: str) -> None:
        """Store ``value`` (broadcast to the selection) at ``selection`` (run as ``kind``)."""
        self._check_writable()
        check_value(value)  # an h5py dataset whose bytes are in other files is refused
        if self._from_snapshot:
            self._check_snapshot()
        snap = self._snapshot()
        indexer = self._indexer(selection, kind, snap)
        if kind == BASIC and is_lazy_array(value) and tuple(value.shape) == indexer.shape:
            region = as_region(selection, snap.shape)
            if region is not None:  # another Array, an h5py dataset...: block by block
                copy_value(value, self, region)
                return
        scalar = np.ndim(value) == 0
        arr = as_values(value, self.dtype, self.name)
        if self._snapshot() is not snap:  # resized (by the value's conversion, or a thread)
            snap = self._snapshot()
            indexer = self._indexer(selection, kind, snap)
        arr = broadcast_value(arr, indexer.shape, self.name)
        if kind == COORDINATE:
            arr = arr.reshape(-1)
        snap.engine.write(indexer, arr, scalar=scalar)

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
        """``a[selection] = value`` for ints, slices and Ellipsis."""
        self._set(selection, value, BASIC)

    def get_orthogonal_selection(self, selection: Any, out: np.ndarray | None = None) -> Any:
        """Per-axis ints, slices, integer arrays or bool masks, applied independently."""
        return self._get(selection, ORTHOGONAL, out)

    def set_orthogonal_selection(self, selection: Any, value: Any) -> None:
        """Store ``value`` at a per-axis (orthogonal) selection."""
        self._set(selection, value, ORTHOGONAL)

    def get_coordinate_selection(self, selection: Any, out: np.ndarray | None = None) -> Any:
        """Points given by integer arrays (broadcast together), one per axis."""
        return self._get(selection, COORDINATE, out)

    def set_coordinate_selection(self, selection: Any, value: Any) -> None:
        """Store ``value`` (one per point) at the points of a coordinate selection."""
        self._set(selection, value, COORDINATE)

    def get_mask_selection(self, mask: Any, out: np.ndarray | None = None) -> Any:
        """The elements where a bool array of the array's shape is True."""
        return self._get(checked_mask(mask, self.shape, self.name), COORDINATE, out)

    def set_mask_selection(self, mask: Any, value: Any) -> None:
        """Store ``value`` where a bool array of the array's shape is True."""
        self._set(checked_mask(mask, self.shape, self.name), value, COORDINATE)

    def get_block_selection(self, selection: Any, out: np.ndarray | None = None) -> Any:
        """Select whole chunks: ``a.blocks[1, :2]`` is chunk row 1, chunk columns 0-1."""
        return self._get(self._block_slices(selection), BASIC, out)

    def set_block_selection(self, selection: Any, value: Any) -> None:
        """Store ``value`` in whole chunks (a selection in units of chunks)."""
        self._set(self._block_slices(selection), value, BASIC)

    def _block_slices(self, selection: Any) -> tuple[slice, ...]:
        snap = self._snapshot()
        return block_slices(selection, snap.shape, snap.layout[1], self.name)

    oindex = property(lambda self: SelectionView(self.get_orthogonal_selection,
                                                 self.set_orthogonal_selection))
    vindex = property(lambda self: SelectionView(self.get_coordinate_selection,
                                                 self.set_coordinate_selection))
    blocks = property(lambda self: SelectionView(self.get_block_selection,
                                                 self.set_block_selection))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """``np.asarray(a)``: all of it, always a copy."""
        if copy is False:  # NumPy 2's protocol, as zarr-python: the data is always a copy
            raise ValueError(f"array {self.name!r}: cannot give a NumPy view without a copy "
                             "(the data lives in a store); use np.asarray(a) or a[...]")
        data = np.asarray(self[...])
        return data if dtype is None else data.astype(dtype, copy=False)

    def __iter__(self) -> Iterator[Any]:
        """Iterate over the first axis, decoding each chunk row once."""
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        grid = self._snapshot().grid
        for c in range(grid.grid_shape[0]):
            yield from self[grid.chunk_region((c,) + (0,) * (self.ndim - 1))[0]]

    # -- chunk primitives (the seam the Dask layer uses) ---------------------------------------
    def chunk_key(self, coords: tuple[int, ...]) -> str:
        """The store key of the chunk at grid coordinates ``coords`` (of a sharded
        array: the key of the shard holding that inner chunk)."""
        return self.layout.chunk_key(tuple(int(c) for c in coords))

    def read_chunk(self, coords: tuple[int, ...]) -> np.ndarray:
        """The data of one chunk, clipped to the array's bounds."""
        note_read(self)
        coords = checked_coords(coords, self.cdata_shape, self.name)
        snap = self._snapshot()
        if not self.config.read_missing_chunks:
            require_stored(self._store, snap.engine.layout,
                           [ix.ChunkProjection(coords, (), (), True)], self.name)
        chunk = snap.engine.read_chunk(coords)
        extent = chunk_extent(coords, snap.grid)
        return chunk[tuple(slice(0, n) for n in extent)]

    def write_chunk(self, coords: tuple[int, ...], data: Any) -> None:
        """Replace one whole chunk; ``data`` has the chunk's (edge-clipped) shape."""
        self._check_writable()
        if self._from_snapshot:
            self._check_snapshot()
        coords = checked_coords(coords, self.cdata_shape, self.name)
        snap = self._snapshot()
        expected = chunk_extent(coords, snap.grid)
        data = np.asarray(data, dtype=self.dtype)
        if data.shape != expected:
            raise ValueError(f"array {self.name!r}: chunk {coords} needs data of shape "
                             f"{expected}, got {data.shape}")
        full_shape = snap.grid.chunk_shape(coords)
        if expected != full_shape:
            full = np.full(full_shape, snap.engine.read_fill, dtype=self.dtype)
            full[tuple(slice(0, n) for n in expected)] = data
            data = full
        snap.engine.write_chunk(coords, data)

    def read_region(self, region: tuple[slice, ...]) -> np.ndarray:
        """``a[region]`` for a tuple of step-1 slices (chunk-aligned or not)."""
        return self._get(tuple(region), BASIC)

    def write_region(self, region: tuple[slice, ...], data: Any) -> None:
        """``a[region] = data``; chunk-aligned regions never read existing chunks."""
        self._set(tuple(region), data, BASIC)

    # -- resize / append -------------------------------------------------------------------------
    def _change_metadata(self, change: Any) -> ArrayMetadata:
        """Read-modify-write the stored document (``change(current) -> new``, applied to
        what is stored at that moment, so concurrent changes are never lost)."""
        self._check_writable()
        meta = update_node(self._store, self._path, change, synchronizer=self._synchronizer,
                           zarr_format=self.zarr_format, kind="array")
        self._adopt_metadata(meta)  # type: ignore[arg-type]
        return meta  # type: ignore[return-value]

    def resize(self, *shape: Any) -> None:
        """Change the shape. Chunks wholly outside the new shape are deleted; chunks cut by
        the new edge are cleared beyond it, so growing again shows fill_value, never stale
        data."""
        self._check_writable()
        new_shape = requested_shape(shape, self.shape, self.name)
        for _attempt in range(RESIZE_ATTEMPTS):
            # clear beyond the new edge from the shape as stored now (another handle may
            # have appended), and commit only over that very shape: a growth in between
            # means clearing again, so no stale rows survive for a later growth to show
            stored = read_node(self._store, self._path, self.zarr_format, kind="array")
            self._adopt_metadata(stored)  # type: ignore[arg-type]
            old = tuple(stored.shape)  # type: ignore[union-attr]
            change = resized_from(stored, new_shape, self.name)  # type: ignore[arg-type]
            if any(n < o for n, o in zip(new_shape, old, strict=True)):
                self._engine.clear_outside(old, new_shape)
            try:
                self._change_metadata(change)
                return
            except ShapeMoved:
                continue
        raise ConcurrentWriteError(f"array {self.name!r}: the shape kept changing under "
                                   f"{RESIZE_ATTEMPTS} attempts to resize to {new_shape}")

    def append(self, data: Any, axis: int = 0, *, new_chunk: bool = False) -> tuple[int, ...]:
        """Grow along ``axis`` and write ``data`` there; returns the new shape.

        The rows are reserved by one read-modify-write of the stored shape, so
        concurrent appenders (threads or processes) each get their own rows.

        The grid follows zarr-python 3.4's resize: a rectilinear axis whose chunks no
        longer cover the new length gets one chunk covering the growth; otherwise the
        rows fill the last chunk (read, merged, rewritten). ``new_chunk=True`` (a
        rectilinear grid only) always makes ``data`` a chunk (shard) of its own along
        ``axis``, added to the grid in the same atomic update as the shape: streaming
        ragged batches then never read or rewrite a stored chunk, and concurrent
        appenders each get their own chunk. ValueError on a regular grid (v2, or v3
        ``regular``), or when the array's length along ``axis`` ends inside a chunk
        (e.g. after a shrinking ``resize``)."""
        self._check_writable()
        data = np.asarray(data, dtype=self.dtype)
        axis = axis + self.ndim if axis < 0 else axis
        if data.ndim != self.ndim or not 0 <= axis < self.ndim:
            raise ValueError(f"array {self.name!r}: cannot append data of shape {data.shape} "
                             f"to shape {self.shape} along axis {axis}")
        start: list[int] = []
        new_shape = tuple(self._change_metadata(
            appended(data.shape, axis, self.name, start, new_chunk)).shape)
        self[tuple(slice(start[0], start[0] + data.shape[axis]) if i == axis
                   else slice(None) for i in range(self.ndim))] = data
        return new_shape

    # -- for executors over the chunk primitives (the Dask layer) ---------------------------
    @property
    def read_fill(self) -> Any:
        """The value of elements never written, as reads return it: ``fill_value``, or
        the dtype's zero when that is None (a v2 ``null`` fill value)."""
        return self._engine.read_fill


def _reopen(store: Store, path: str, read_only: bool, synchronizer: Any,
            write_empty_chunks: bool, allow_unsafe: bool, cache: Any = None,
            config: Any = None) -> Array:
    """Unpickling: a lazy Array that loads its metadata on first use."""
    return Array(store, path, None, read_only=read_only, synchronizer=synchronizer,
                 write_empty_chunks=write_empty_chunks, allow_unsafe_codecs=allow_unsafe,
                 cache=cache, config=config)
