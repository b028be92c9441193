"""Convenience functions mirroring zarr-python 3: create_array, zeros, open, save, load..."""

from __future__ import annotations

from typing import Any

import numpy as np

from .array import Array
from .copying import copy_into
from .creation import build_array_metadata, normalize_path, prepare_node, write_metadata
from .errors import NodeNotFoundError, NodeTypeError
from .metadata import NodeMetadata, is_array, parse_node, try_load_node
from .metadata import consolidated as cons
from .metadata.dtypes_extra import infer_object_dtype
from .metadata.nodes import read_documents, where_prefix
from .storage.base import Store
from .storage.resolve import resolve_store

_MODES = ("r", "r+", "a", "w", "w-")


def _check_mode(mode: str) -> None:
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")


def create_array(store: Any = None, name: str | None = None, *, shape: Any = None,
                 dtype: Any = None, data: Any = None,
                 chunks: Any = None, shards: Any = None, fill_value: Any = None, order: str = "C",
                 compressors: Any = "auto", filters: Any = None, codecs: Any = None,
                 zarr_format: int = 3, dimension_names: Any = None, attributes: dict | None = None,
                 overwrite: bool = False, synchronizer: Any = None,
                 chunk_key_encoding: Any = None, dimension_separator: str | None = None,
                 write_empty_chunks: bool = False, allow_unsafe_codecs: bool = False,
                 storage_options: dict | None = None, path: str | None = None,
                 compressor: Any = "unset") -> Array:
    """Create a new array and return it.

    ``store``: None (memory), a path, ``*.zip``, an fsspec URL, a Store or a dict.
    ``chunks``: per-axis chunk lengths (None in an axis = the whole axis; omitted = ~1 MiB).
    ``shards``: v3 sharding: the shard shape (a multiple of ``chunks``), or
    ``{"shape": ..., "index_location": "start" | "end"}``; ``chunks`` are then the
    inner chunks, each encoded with the compressors inside its shard.
    ``compressors``: "auto" (Blosc lz4, shuffle), None, or numcodecs codecs
    (``compressor=`` is accepted too, as the zarr-python 2 spelling of one codec).
    ``data``: an array-like to store (its shape and dtype unless given), copied block
    by block.

    >>> a = create_array(None, shape=(100, 100), dtype="i4", chunks=(10, 10))
    >>> a.nchunks
    100
    """
    data, shape, dtype = shape_and_dtype(data, shape, dtype, "create_array")
    st = resolve_store(store, mode="w" if overwrite else "a", storage_options=storage_options)
    a = new_array(
        st, normalize_path(name if name is not None else path), shape=shape, dtype=dtype,
        chunks=chunks, shards=shards, fill_value=fill_value, order=order,
        compressors=compressors, filters=filters, codecs=codecs, zarr_format=zarr_format,
        dimension_names=dimension_names, attributes=attributes, overwrite=overwrite,
        synchronizer=synchronizer, chunk_key_encoding=chunk_key_encoding,
        dimension_separator=dimension_separator, write_empty_chunks=write_empty_chunks,
        allow_unsafe_codecs=allow_unsafe_codecs, compressor=compressor)
    if data is not None:
        copy_into(data, a)
    return a


def shape_and_dtype(data: Any, shape: Any, dtype: Any, what: str) -> tuple[Any, Any, Any]:
    """``(data, shape, dtype)`` for a new array: taken from ``data`` (made array-like)
    unless given; dtype defaults to float64 without data. TypeError without either."""
    if data is None:
        if shape is None:
            raise TypeError(f"{what}() needs shape= or data=")
        return None, shape, "f8" if dtype is None else dtype
    if not (hasattr(data, "shape") and hasattr(data, "dtype")):
        data = np.asarray(data)
    if dtype is None and isinstance(data, np.ndarray) and data.dtype.kind == "O":
        dtype = infer_object_dtype(data)  # all str -> variable-length strings
    return data, data.shape if shape is None else shape, data.dtype if dtype is None else dtype


def new_array(st: Store, path: str, *, shape: Any, dtype: Any = "f8", compressors: Any = "auto",
              compressor: Any = "unset", overwrite: bool = False, synchronizer: Any = None,
              write_empty_chunks: bool = False, allow_unsafe_codecs: bool = False,
              within: str | None = None, checked: bool = False, **meta_kwargs: Any) -> Array:
    """``create_array`` on a resolved store and a normalized path; ``within`` and
    ``checked`` say what is known to exist already (see ``creation.prepare_node``), and
    ``meta_kwargs`` are the other arguments of ``build_array_metadata``."""
    if compressor != "unset":
        if compressors != "auto":
            raise TypeError("give compressors= or compressor=, not both")
        compressors = compressor
    where = f"{st!r}/{path}" if path else repr(st)
    meta = build_array_metadata(shape=shape, dtype=dtype, compressors=compressors, where=where,
                                allow_unsafe_codecs=allow_unsafe_codecs, **meta_kwargs)
    prepare_node(st, path, meta.zarr_format, overwrite, within=within, checked=checked)
    write_metadata(st, path, meta)
    return Array(st, path, meta, synchronizer=synchronizer,
                 write_empty_chunks=write_empty_chunks, allow_unsafe_codecs=allow_unsafe_codecs)


def _fill_key(kw: dict[str, Any]) -> dict[str, Any]:
    kw.setdefault("store", None)
    return kw


def empty(shape: Any, **kwargs: Any) -> Array:
    """A new array whose unwritten chunks read as the fill value (0 unless given)."""
    return create_array(shape=shape, **_fill_key(kwargs))


def zeros(shape: Any, **kwargs: Any) -> Array:
    """A new array of zeros (nothing is written: missing chunks read as 0)."""
    kwargs["fill_value"] = 0
    return create_array(shape=shape, **_fill_key(kwargs))


def ones(shape: Any, **kwargs: Any) -> Array:
    """A new array of ones (fill_value=1, nothing is written)."""
    kwargs["fill_value"] = 1
    return create_array(shape=shape, **_fill_key(kwargs))


def full(shape: Any, fill_value: Any, **kwargs: Any) -> Array:
    """A new array filled with ``fill_value`` (nothing is written)."""
    kwargs["fill_value"] = fill_value
    return create_array(shape=shape, **_fill_key(kwargs))


def array(data: Any, **kwargs: Any) -> Array:
    """A new array holding a copy of ``data`` (a NumPy array or array-like).

    >>> import numpy as np
    >>> a = array(np.arange(10), chunks=(5,))
    >>> a[7]
    np.int64(7)
    """
    return create_array(data=data, **_fill_key(kwargs))


def _like_kwargs(a: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    kwargs.setdefault("dtype", a.dtype)
    kwargs.setdefault("chunks", getattr(a, "chunks", None))
    if isinstance(a, Array):
        kwargs.setdefault("zarr_format", a.zarr_format)
        kwargs.setdefault("order", a.order)
    return _fill_key(kwargs)


def empty_like(a: Any, **kwargs: Any) -> Array:
    """An empty array with the shape, dtype and chunks of ``a``."""
    return empty(a.shape, **_like_kwargs(a, kwargs))


def zeros_like(a: Any, **kwargs: Any) -> Array:
    """Zeros with the shape, dtype and chunks of ``a``."""
    return zeros(a.shape, **_like_kwargs(a, kwargs))


def ones_like(a: Any, **kwargs: Any) -> Array:
    """Ones with the shape, dtype and chunks of ``a``."""
    return ones(a.shape, **_like_kwargs(a, kwargs))


def full_like(a: Any, fill_value: Any, **kwargs: Any) -> Array:
    """``fill_value`` everywhere, with the shape, dtype and chunks of ``a``."""
    return full(a.shape, fill_value, **_like_kwargs(a, kwargs))


def open_array(store: Any = None, mode: str = "a", path: str | None = None, *,
               zarr_format: int | None = None, storage_options: dict | None = None,
               synchronizer: Any = None, write_empty_chunks: bool = False,
               allow_unsafe_codecs: bool = False, **create_kwargs: Any) -> Array:
    """Open (or, by mode, create) an array.

    ``mode``: "r" read-only, "r+" must exist, "a" create if missing (needs ``shape``),
    "w" create and overwrite, "w-" create, fail if anything exists.
    """
    _check_mode(mode)
    st = resolve_store(store, mode=mode, storage_options=storage_options)
    path = normalize_path(path)
    node = None if mode in ("w", "w-") else try_load_node(st, path, zarr_format, kind="array")
    return _open_or_create(st, mode, path, node, zarr_format=zarr_format,
                           synchronizer=synchronizer, write_empty_chunks=write_empty_chunks,
                           allow_unsafe_codecs=allow_unsafe_codecs, **create_kwargs)


def _open_or_create(st: Store, mode: str, path: str, node: NodeMetadata | None, *,
                    zarr_format: int | None = None, synchronizer: Any = None,
                    write_empty_chunks: bool = False, allow_unsafe_codecs: bool = False,
                    **create_kwargs: Any) -> Array:
    """open_array once the node at ``path`` has been read (in ``zarr_format``, or in both
    formats when it is None)."""
    opts = {"synchronizer": synchronizer, "write_empty_chunks": write_empty_chunks,
            "allow_unsafe_codecs": allow_unsafe_codecs}
    if mode in ("w", "w-") or (mode == "a" and node is None and "shape" in create_kwargs):
        if "shape" not in create_kwargs:
            raise TypeError(f"creating an array at {path or '/'!r} needs a shape")
        if zarr_format is not None:
            create_kwargs["zarr_format"] = zarr_format
        checked = mode == "a" and zarr_format is None  # both formats were read: nothing there
        return new_array(st, path, overwrite=mode == "w", checked=checked, **opts,
                         **create_kwargs)
    if node is None:
        raise NodeNotFoundError(f"no array at path {path or '/'!r} in {st!r}")
    if not is_array(node):
        raise NodeTypeError(f"path {path or '/'!r} in {st!r} is a group, not an array")
    return Array(st, path, node, read_only=mode == "r", **opts)  # type: ignore[arg-type]


def open(store: Any = None, mode: str = "a", path: str | None = None, **kwargs: Any) -> Any:
    """Open the array or group at ``path`` (an array if ``shape`` is given and it is new).

    Its documents are read once (``zarr.json`` first; the v2 ones only if it is missing).
    """
    _check_mode(mode)
    st = resolve_store(store, mode=mode, storage_options=kwargs.pop("storage_options", None))
    path = normalize_path(path)
    if "shape" in kwargs:
        return open_array(st, mode, path, **kwargs)
    zarr_format = kwargs.get("zarr_format")
    extra = () if kwargs.get("use_consolidated") is False else (cons.V2_KEY,)
    docs = read_documents(st, [path], zarr_format, group_extra=extra)[path]
    node = parse_node(docs, where_prefix(st, path), zarr_format)
    if node is not None and is_array(node):
        return _open_or_create(st, mode, path, node, **kwargs)
    from .group_api import group_from_documents
    return group_from_documents(st, mode, path, docs, **kwargs)
