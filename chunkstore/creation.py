"""Building the metadata of new nodes from user arguments, and writing node documents."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .codecs.convert import v2_codecs, v3_codec_chain
from .codecs.sharding import ShardingCodec
from .errors import ContainsArrayError, ContainsGroupError, MetadataError, UnsupportedError
from .metadata import (
    ArrayMetadata,
    ArrayMetadataV2,
    ArrayMetadataV3,
    GroupMetadataV2,
    GroupMetadataV3,
    NodeMetadata,
    default_fill_value,
    is_array,
    join_path,
    node_keys,
    normalize_fill_value,
)
from .metadata.dtypes import dtype_from_v2, v3_name_of
from .metadata.dtypes_extra import refine_v2_object_dtype, user_dtype, with_object_codec
from .metadata.json_io import check_json_value
from .metadata.nodes import probe_nodes
from .storage.base import Store, validate_key

TARGET_CHUNK_BYTES = 1 << 20


def normalize_path(path: str | None) -> str:
    """``"/a/b/"`` -> ``"a/b"``; ``None`` or ``"/"`` -> ``""`` (the root)."""
    if path is None:
        return ""
    path = str(path).strip("/")
    if path:
        validate_key(path)
    return path


def normalize_shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, int | np.integer):
        shape = (shape,)
    try:
        out = tuple(int(s) for s in shape)
    except TypeError as e:
        raise TypeError(f"shape must be an int or a sequence of ints, got {shape!r}") from e
    if any(s < 0 for s in out):
        raise ValueError(f"shape must not be negative, got {out}")
    return out


def auto_chunks(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Chunks of about 1 MiB: halve the largest axis until the chunk is small enough."""
    chunks = [max(1, s) for s in shape]
    while math.prod(chunks) * itemsize > TARGET_CHUNK_BYTES and max(chunks) > 1:
        i = chunks.index(max(chunks))
        chunks[i] = math.ceil(chunks[i] / 2)
    return tuple(chunks)


def normalize_chunks(chunks: Any, shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """User chunks -> a tuple of positive ints (None / -1 in an axis = the whole axis)."""
    if chunks is None or chunks is True or chunks == "auto":
        return auto_chunks(shape, itemsize)
    if isinstance(chunks, int | np.integer):
        chunks = (int(chunks),) * len(shape)
    chunks = tuple(chunks)
    if len(chunks) != len(shape):
        raise ValueError(f"chunks {chunks} do not match the {len(shape)}-d shape {shape}")
    out = []
    for c, s in zip(chunks, shape, strict=True):
        if c is None or c == -1:
            c = max(1, s)
        c = int(c)
        if c < 1:
            raise ValueError(f"chunk sizes must be positive, got {chunks}")
        out.append(c)
    return tuple(out)


def _normalize_shards(shards: Any, shape: tuple[int, ...], where: str
                      ) -> tuple[tuple[int, ...], str]:
    """User ``shards`` (a shape, or ``{"shape": ..., "index_location": ...}``) ->
    (shard shape, index location); None / -1 in an axis = the whole axis."""
    location = "end"
    if isinstance(shards, dict):
        location = shards.get("index_location", "end")
        shards = shards.get("shape")
    if location not in ("start", "end"):
        raise ValueError(f"{where}: shards index_location must be 'start' or 'end', "
                         f"got {location!r}")
    if isinstance(shards, int | np.integer):
        shards = (int(shards),) * len(shape)
    try:
        items = tuple(shards)
    except TypeError:
        raise TypeError(f"{where}: shards must be a shape (a tuple of ints), got "
                        f"{shards!r}") from None
    if len(items) != len(shape):
        raise ValueError(f"{where}: shards {items} do not match the {len(shape)}-d shape {shape}")
    out = tuple(max(1, n) if s is None or s == -1 else int(s)
                for s, n in zip(items, shape, strict=True))
    if any(s < 1 for s in out):
        raise ValueError(f"{where}: shard sizes must be positive, got {items}")
    return out, location


def _key_encoding(chunk_key_encoding: Any, dimension_separator: str | None) -> tuple[str, str]:
    if chunk_key_encoding is None:
        return ("default", dimension_separator or "/")
    if isinstance(chunk_key_encoding, str):
        name, sep = chunk_key_encoding, None
    elif isinstance(chunk_key_encoding, tuple):
        name, sep = chunk_key_encoding
    else:
        name = chunk_key_encoding.get("name")
        sep = chunk_key_encoding.get("separator") or (
            chunk_key_encoding.get("configuration") or {}).get("separator")
    if name not in ("default", "v2"):
        raise UnsupportedError(f"chunk_key_encoding {name!r} is not supported")
    return (name, sep or ("/" if name == "default" else "."))


def build_array_metadata(
    *, shape: Any, dtype: Any, chunks: Any = None, shards: Any = None, fill_value: Any = None,
    order: str = "C",
    compressors: Any = "auto", filters: Any = None, codecs: Any = None, zarr_format: int = 3,
    dimension_names: Sequence[str | None] | None = None, attributes: dict | None = None,
    chunk_key_encoding: Any = None, dimension_separator: str | None = None, where: str = "array",
    allow_unsafe_codecs: bool = False,
) -> ArrayMetadata:
    """Validated metadata for a new array."""
    shape = normalize_shape(shape)
    np_dtype = user_dtype(dtype, where)  # str -> StringDType, bytes -> object (vlen)
    shard_shape, index_location = None, "end"
    if shards is not None:
        if zarr_format != 3:
            raise ValueError(f"{where}: shards= needs zarr_format=3 (Zarr v2 has no sharding), "
                             f"got zarr_format={zarr_format!r}")
        shard_shape, index_location = _normalize_shards(shards, shape, where)
        if chunks is None:
            chunks = auto_chunks(shard_shape, np_dtype.itemsize)
    chunk_shape = normalize_chunks(chunks, shape, np_dtype.itemsize)
    if shard_shape is not None and any(
            s % c for s, c in zip(shard_shape, chunk_shape, strict=True)):
        raise ValueError(f"{where}: shards {shard_shape} must be a multiple of chunks "
                         f"{chunk_shape} in every dimension")
    if order not in ("C", "F"):
        raise ValueError(f"{where}: order must be 'C' or 'F', got {order!r}")
    attributes = check_json_value(dict(attributes or {}), f"{where}: attributes")
    if dimension_names is not None:
        dimension_names = tuple(dimension_names)
        if len(dimension_names) != len(shape):
            raise MetadataError(f"{where}: dimension_names {list(dimension_names)} do not "
                                f"match the {len(shape)}-d shape")
    if zarr_format == 3:
        v3_name_of(np_dtype, where)
        fill = (default_fill_value(np_dtype) if fill_value is None
                else normalize_fill_value(fill_value, np_dtype, where))
        if np_dtype.kind != "T":  # StringDType has no byte order
            np_dtype = np_dtype.newbyteorder("=")
        chain = v3_codec_chain(dtype=np_dtype, chunk_shape=chunk_shape,
                               compressors=compressors, filters=filters, codecs=codecs,
                               order=order, where=where, allow_unsafe=allow_unsafe_codecs)
        if shard_shape is not None:
            chain = [ShardingCodec(chunk_shape, chain, index_location=index_location).to_json()]
            chunk_shape = shard_shape
        return ArrayMetadataV3(
            shape=shape, dtype=np_dtype, chunk_shape=chunk_shape,
            fill_value=fill, codecs=tuple(chain),
            chunk_key_encoding=_key_encoding(chunk_key_encoding, dimension_separator),
            attributes=attributes, dimension_names=dimension_names)
    if zarr_format == 2:
        if codecs is not None:
            raise ValueError(f"{where}: 'codecs' is for Zarr v3; use compressors/filters for v2")
        if np_dtype.kind not in "OT":
            np_dtype = dtype_from_v2(np_dtype.str, where)
        compressor, v2_filters = v2_codecs(compressors=compressors, filters=filters, where=where,
                                           allow_unsafe=allow_unsafe_codecs)
        v2_filters = with_object_codec(np_dtype, v2_filters, where)
        np_dtype = refine_v2_object_dtype(np_dtype, v2_filters, where)
        sep = dimension_separator
        if sep is None and chunk_key_encoding is not None:
            sep = _key_encoding(chunk_key_encoding, None)[1]
        sep = sep or "."
        if sep not in (".", "/"):
            raise ValueError(f"{where}: dimension_separator must be '.' or '/', got {sep!r}")
        fill = normalize_fill_value(fill_value, np_dtype, where) if fill_value is not None else (
            default_fill_value(np_dtype))
        if dimension_names is not None:  # v2 has no field: the xarray convention
            if not all(isinstance(n, str) for n in dimension_names):
                raise MetadataError(f"{where}: v2 dimension_names must all be strings, got "
                                    f"{list(dimension_names)}")
            attributes = {**attributes, "_ARRAY_DIMENSIONS": list(dimension_names)}
        return ArrayMetadataV2(
            shape=shape, dtype=np_dtype, chunk_shape=chunk_shape, fill_value=fill,
            compressor=compressor, filters=v2_filters, order=order, dimension_separator=sep,
            attributes=attributes)
    raise ValueError(f"{where}: zarr_format must be 2 or 3, got {zarr_format!r}")


def write_metadata(store: Store, path: str, metadata: NodeMetadata) -> None:
    """Store a node's documents (each one replaced atomically by the store)."""
    store.set_many(_documents(store, path, metadata))


def _documents(store: Store, path: str, metadata: NodeMetadata) -> dict[str, bytes]:
    where = f"{store!r}/{join_path(path, node_keys(metadata)[0])}"
    return {join_path(path, k): v for k, v in metadata.documents(where).items()}


def _ancestors(path: str, within: str | None) -> list[str]:
    """The groups above ``path``, root first; only those below ``within`` when given."""
    if not path:
        return []
    parts = path.split("/")[:-1]
    out = [""] + ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    if within is None:
        return out
    return [p for p in out if len(p) > len(within) and (not within or p.startswith(within + "/"))]


def prepare_node(store: Store, path: str, zarr_format: int, overwrite: bool, *,
                 within: str | None = None, checked: bool = False) -> None:
    """Make room for a new node at ``path`` with one batched read.

    A node already there (in either format: an existing v2 array blocks a new v3 one)
    raises ContainsArrayError / ContainsGroupError, or is deleted with ``overwrite``.
    The missing groups above ``path`` are created (root included, as zarr-python does);
    a parent that is an array raises ContainsArrayError. ``within``: the path of a group
    known to exist (its ancestors are not read); ``checked``: nothing is at ``path``
    (the caller just read it in both formats).
    """
    parents = _ancestors(path, within)
    nodes = probe_nodes(store, parents if checked else [*parents, path])
    existing = None if checked else nodes[path]
    if existing is not None and not overwrite:
        kind = ContainsArrayError if is_array(existing) else ContainsGroupError
        what = "an array" if is_array(existing) else "a group"
        raise kind(f"{what} already exists at path {path or '/'!r} in {store!r}")
    for parent in parents:
        node = nodes[parent]
        if node is not None and is_array(node):
            raise ContainsArrayError(f"cannot create {path!r}: {parent or '/'!r} in {store!r} "
                                     "is an array")
    if existing is not None:
        store.delete_prefix(path)
    meta = GroupMetadataV3() if zarr_format == 3 else GroupMetadataV2()
    docs: dict[str, bytes] = {}
    for parent in parents:
        if nodes[parent] is None:
            docs.update(_documents(store, parent, meta))
    if docs:
        store.set_many(docs)
