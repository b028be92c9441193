"""Creating arrays, with zarr-python 3's names: ``create_array``, ``create``, ``zeros``,
``ones``, ``empty``, ``full``, ``array``, ``from_array`` and the ``*_like`` forms."""

from __future__ import annotations

from typing import Any

import numcodecs
import numpy as np

from chunkstore.array.array import Array
from chunkstore.array.grids import grid_arguments
from chunkstore.array.hdf5_files import check_value
from chunkstore.array.sources import refuse_reader_of
from chunkstore.errors import ReadOnlyError
from chunkstore.group.like_args import like_arguments, regular_chunks
from chunkstore.group.members import UNSET, new_array, shape_and_dtype
from chunkstore.group.opening import MODES
from chunkstore.io.cache import chunk_cache
from chunkstore.io.copy import copy_into
from chunkstore.metadata.json_io import check_json_value
from chunkstore.nodes.creation import DEFAULT_FILL
from chunkstore.nodes.paths import normalize_path
from chunkstore.storage.resolve import resolve_store


def _seed_compression(compression: Any, compression_opts: Any) -> Any:
    """The seeds' (h5py-like) ``compression="zlib", compression_opts=1`` as a codec."""
    config: dict[str, Any] = {"id": str(compression).lower()}
    if config["id"] == "gzip" or config["id"] == "zlib" or isinstance(compression_opts, int):
        if compression_opts is not None:
            config["level"] = int(compression_opts)
    if isinstance(compression_opts, dict):
        config.update(compression_opts)
    return numcodecs.get_codec(config)


def create_array(store: Any = None, name: str | None = None, *, shape: Any = None,
                 dtype: Any = None, data: Any = None, chunks: Any = None, shards: Any = None,
                 fill_value: Any = DEFAULT_FILL, order: str | None = None,
                 compressors: Any = "auto", filters: Any = None, codecs: Any = None,
                 serializer: Any = "auto", zarr_format: int | None = 3,
                 dimension_names: Any = None, attributes: dict | None = None,
                 overwrite: bool = False,
                 synchronizer: Any = None, chunk_key_encoding: Any = None,
                 dimension_separator: str | None = None, write_empty_chunks: bool | None = None,
                 allow_unsafe_codecs: bool = False, storage_options: dict | None = None,
                 path: str | None = None, compressor: Any = UNSET,
                 config: dict[str, Any] | None = None, write_data: bool = True,
                 compression: Any = None, compression_opts: Any = None,
                 cache: Any = None) -> Array:
    """Create a new array and return it.

    ``store``: None (memory), a path, ``*.zip``, an fsspec URL, a Store or a dict.
    ``chunks``: per-axis chunk lengths (None in an axis = the whole axis; omitted = the
    shape zarr-python would pick). ``shards``: v3 sharding: the shard shape (a multiple
    of ``chunks``), or ``{"shape": ..., "index_location": "start" | "end"}``; ``chunks``
    are then the inner chunks. ``compressors``: "auto" (``chunkstore.config``
    "array.default_compressor": Blosc lz4 with shuffle unless set), None, or numcodecs
    codecs (``compressor=`` and the seeds' ``compression=``/``compression_opts=`` are
    accepted too). ``serializer``: the v3 array->bytes codec, e.g.
    ``{"name": "bytes", "configuration": {"endian": "big"}}`` ("auto": ``bytes``, or
    ``vlen-utf8``/``vlen-bytes`` for strings and bytes). ``fill_value``: omitted = the dtype's default; None in v2 is stored as
    ``null``. ``config``: ``{"write_empty_chunks": ..., "order": ...}`` (zarr-python's
    ArrayConfig). ``data``: an array-like to store (its shape and dtype unless given),
    copied block by block unless ``write_data=False``. ``cache``: the array's
    decoded-chunk cache, as ``open_array`` (None: ``config["cache.chunk_bytes"]``; 0: off;
    a byte budget such as ``"256MiB"``; a shared ``ChunkCache``).

    >>> a = create_array(None, shape=(100, 100), dtype="i4", chunks=(10, 10))
    >>> a.nchunks
    100
    """
    if compression is not None:
        if compressor is not UNSET or not (isinstance(compressors, str) and compressors == "auto"):
            raise TypeError("give one of compression=, compressor= or compressors=")
        compressor = _seed_compression(compression, compression_opts)
    cache = chunk_cache.from_argument(cache)  # checked before anything is created
    data, shape, dtype = shape_and_dtype(data, shape, dtype, "create_array")
    st = resolve_store(store, mode="w" if overwrite else "a", storage_options=storage_options)
    where = normalize_path(name if name is not None else path)
    if data is not None:  # never onto (or over) its own source: before any delete
        check_value(data)  # an h5py dataset reading other files: refused
        refuse_reader_of(data, st, where, "from_array / create_array(data=...)")
    a = new_array(
        st, where, shape=shape, dtype=dtype,
        chunks=chunks, shards=shards, fill_value=fill_value, order=order,
        compressors=compressors, filters=filters, codecs=codecs, serializer=serializer,
        zarr_format=3 if zarr_format is None else zarr_format,
        dimension_names=dimension_names, attributes=attributes, overwrite=overwrite,
        synchronizer=synchronizer, chunk_key_encoding=chunk_key_encoding,
        dimension_separator=dimension_separator, write_empty_chunks=write_empty_chunks,
        allow_unsafe_codecs=allow_unsafe_codecs, compressor=compressor, config=config)
    a._use_cache(cache)
    if data is not None and write_data:
        copy_into(data, a)
    return a


def create(shape: Any, *, store: Any = None, path: str | None = None, dtype: Any = None,
           chunk_shape: Any = None, zarr_format: int | None = 3, compressor: Any = UNSET,
           filters: Any = None, dimension_separator: str | None = None,
           mode: str | None = None, overwrite: bool = False, storage_options: dict | None = None,
           **create_kwargs: Any) -> Array:
    """zarr-python's ``create``: ``create_array`` with the shape first (``chunk_shape`` is
    accepted for ``chunks``, ``dtype=None`` means float64, ``data=`` is written into the
    new array without setting its shape or dtype). As in zarr-python, the v2 spellings
    ``compressor=``, ``filters=`` and ``dimension_separator=`` are refused for a v3 array
    (ValueError).

    ``mode`` (zarr-python 2's way to say ``overwrite``): None or "a" / "r+" create the
    array, refusing a node already at ``path`` (ContainsArrayError /
    ContainsGroupError) unless ``overwrite``; "w" replaces the node at ``path`` with
    everything stored below it (with no node there, other keys under ``path`` are left
    alone, where zarr-python deletes them); "w-" refuses to create where anything is stored under ``path``
    (FileExistsError), whatever ``overwrite`` says; "r" opens the store read-only, so
    creating fails (ReadOnlyError). A read-only store with any other mode is refused."""
    fmt = 3 if zarr_format is None else zarr_format
    if fmt == 3:
        for given, what, instead in ((compressor is not UNSET, "compressor", "bytes-to-bytes"),
                                     (filters is not None, "filters", "array-to-array")):
            if given:
                raise ValueError(f"{what} cannot be used for arrays with zarr_format 3. Use "
                                 f"{instead} codecs instead.")
    if chunk_shape is not None:
        create_kwargs.setdefault("chunks", chunk_shape)
    st, overwrite = creation_mode(store, path, mode, overwrite, storage_options, "create")
    return create_array(st, path, shape=shape, dtype="f8" if dtype is None else dtype,
                        zarr_format=fmt, compressor=compressor, filters=filters,
                        dimension_separator=dimension_separator, overwrite=overwrite,
                        **create_kwargs)


def creation_mode(store: Any, path: str | None, mode: str | None, overwrite: bool | None,
                  storage_options: dict | None, what: str) -> tuple[Any, bool]:
    """``(store, overwrite)`` for creating an array at ``path`` of ``store`` opened in
    ``mode`` (see ``create``). A store given as a Store instance is used as it is (mode
    "r" makes a read-only view of it)."""
    mode = "a" if mode is None else mode
    if mode not in MODES:
        raise ValueError(f"Invalid mode: {mode} ({what} takes one of {MODES})")
    st = resolve_store(store, mode=mode, storage_options=storage_options)
    if mode == "r" and not st.read_only:  # (a new memory store)
        st = st.with_read_only(True)
    elif mode != "r" and st.read_only:
        raise ReadOnlyError(f"{what}: Store is read-only but mode is {mode!r}: {st!r}")
    if mode == "w-":
        prefix = normalize_path(path)
        found = next(iter(st.list_prefix(prefix + "/" if prefix else "")), None)
        if found is not None:
            raise FileExistsError(f"{what}: cannot create {prefix or '/'!r} in {st!r} with "
                                  f"mode 'w-' because it already contains data ({found!r}). "
                                  "Use mode 'w' to overwrite or 'a' to append.")
        return st, False
    return st, bool(overwrite) or mode == "w"


def _in_memory(kw: dict[str, Any]) -> dict[str, Any]:
    kw.setdefault("store", None)
    return kw


def empty(shape: Any, **kwargs: Any) -> Array:
    """A new array whose unwritten chunks read as the fill value (the dtype's default
    unless given)."""
    return create_array(shape=shape, **_in_memory(kwargs))


def zeros(shape: Any, **kwargs: Any) -> Array:
    """A new array of zeros (nothing is written: missing chunks read as 0)."""
    kwargs["fill_value"] = 0
    return create_array(shape=shape, **_in_memory(kwargs))


def ones(shape: Any, **kwargs: Any) -> Array:
    """A new array of ones (fill_value=1, nothing is written)."""
    kwargs["fill_value"] = 1
    return create_array(shape=shape, **_in_memory(kwargs))


def full(shape: Any, fill_value: Any, **kwargs: Any) -> Array:
    """A new array filled with ``fill_value`` (nothing is written)."""
    kwargs["fill_value"] = fill_value
    return create_array(shape=shape, **_in_memory(kwargs))


def array(data: Any, **kwargs: Any) -> Array:
    """A new array holding a copy of ``data`` (a NumPy array or array-like).

    >>> import numpy as np
    >>> a = array(np.arange(10), chunks=(5,))
    >>> a[7]
    np.int64(7)
    """
    return create_array(data=data, **_in_memory(kwargs))


def _like(a: Any, kwargs: dict[str, Any], keep_fill: bool = False
          ) -> tuple[Any, dict[str, Any]]:
    """``(shape, create kwargs)`` for a new array like ``a`` (``group.like_args``):
    its shape, dtype and chunks, and of an Array its format, order and codecs (those
    where the new array can use them), unless ``kwargs`` says otherwise."""
    kwargs = like_arguments(a, kwargs, keep_fill=keep_fill)
    return kwargs.pop("shape"), _in_memory(kwargs)


def empty_like(a: Any, **kwargs: Any) -> Array:
    """An empty array with the shape, dtype and chunks of ``a`` and, for an Array, its
    format, fill value, order and codecs (each overridable; see ``zeros_like``)."""
    shape, kw = _like(a, kwargs, keep_fill=True)
    return empty(shape, **kw)


def zeros_like(a: Any, **kwargs: Any) -> Array:
    """Zeros with the shape, dtype and chunks of ``a`` (each overridable). Like
    zarr-python, of an Array ``a`` it keeps the format (unless ``zarr_format`` is given)
    and, in that format, the memory order and codecs: all of them when dtype and number
    of dimensions are kept (a sharded array's shards too when its chunks are), else its
    compressors; give ``codecs``/``compressors``/``filters``... to choose instead."""
    shape, kw = _like(a, kwargs)
    return zeros(shape, **kw)


def ones_like(a: Any, **kwargs: Any) -> Array:
    """Ones with the shape, dtype and chunks of ``a`` (and what ``zeros_like`` keeps)."""
    shape, kw = _like(a, kwargs)
    return ones(shape, **kw)


def full_like(a: Any, fill_value: Any = DEFAULT_FILL, **kwargs: Any) -> Array:
    """``fill_value`` (default: ``a``'s, for an Array) everywhere, with the shape, dtype
    and chunks of ``a`` (and what ``zeros_like`` keeps)."""
    if fill_value is DEFAULT_FILL:
        fill_value = a.fill_value if isinstance(a, Array) else None
    shape, kw = _like(a, kwargs)
    return full(shape, fill_value, **kw)


def jsonable_attrs(source: Any, where: str) -> dict[str, Any]:
    """The attributes of ``source`` (an Array, an h5py dataset...) as plain JSON; the
    dimension names of an Array go with ``like_array_kwargs``, not as an attribute."""
    attrs = getattr(source, "attrs", None)
    if attrs is None:
        return {}
    out = {}
    for key, value in dict(attrs).items():
        if isinstance(value, np.generic | np.ndarray):
            value = value.tolist()
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        out[str(key)] = check_json_value(value, f"{where}: attribute {key!r}")
    if getattr(source, "dimension_names", None) is not None:
        # v2's spelling of dimension names, passed on as dimension_names (a v3 copy would
        # otherwise keep it as a user attribute beside them)
        out.pop("_ARRAY_DIMENSIONS", None)
    return check_json_value(out, f"{where}: attributes")


def like_array_kwargs(source: Array, kwargs: dict[str, Any]) -> dict[str, Any]:
    """What a copy of the Array ``source`` keeps unless told otherwise: its format
    (``zarr_format=None`` means "the source's"), fill value, dimension names and, in v2,
    its dimension separator."""
    if kwargs.get("zarr_format") is None:
        kwargs["zarr_format"] = source.zarr_format
    kwargs.setdefault("fill_value", source.fill_value)
    if source.dimension_names is not None:
        kwargs.setdefault("dimension_names", source.dimension_names)
    if source.zarr_format == 2 and kwargs["zarr_format"] == 2 and (
            "chunk_key_encoding" not in kwargs):
        kwargs.setdefault("dimension_separator", source.metadata.dimension_separator)  # type: ignore[union-attr]
    return kwargs


def from_array(store: Any, *, data: Any, name: str | None = None, chunks: Any = "keep",
               write_data: bool = True, **create_kwargs: Any) -> Array:
    """A new array at ``store``/``name`` shaped like ``data`` (an Array or any array-like),
    holding a copy of it unless ``write_data=False``. ``chunks="keep"`` keeps the source's
    chunks ("auto" picks them); an Array source also passes on its format (unless
    ``zarr_format`` is given), fill value, attributes, dimension names and v2 separator."""
    if isinstance(chunks, str):
        if chunks not in ("keep", "auto"):
            raise ValueError(f"chunks must be 'keep', 'auto' or a shape, got {chunks!r}")
        chunks = regular_chunks(data) if chunks == "keep" else None
        if chunks is None and isinstance(data, Array) and data.layout.edges is not None:
            chunks = grid_arguments(data.metadata)[0]  # rectilinear: the same lengths
    if isinstance(data, Array):
        like_array_kwargs(data, create_kwargs)
        create_kwargs.setdefault("attributes", jsonable_attrs(data, f"copy of {data!r}"))
    if not (hasattr(data, "shape") and hasattr(data, "dtype")):
        data = np.asarray(data)
    return create_array(store, name, data=data, chunks=chunks, write_data=write_data,
                        **create_kwargs)
