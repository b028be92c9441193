"""Building the metadata of a new array from user arguments (shape, dtype, chunks,
shards, codecs, fill value...): validation and defaults only, no store IO."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from chunkstore.codecs.base import ChunkSpec
from chunkstore.codecs.convert import v2_codecs, v3_codec_chain
from chunkstore.codecs.sharding import ShardingCodec
from chunkstore.errors import CodecError, MetadataError, UnsupportedError
from chunkstore.metadata import (
    ArrayMetadata,
    ArrayMetadataV2,
    ArrayMetadataV3,
    default_fill_value,
    normalize_fill_value,
)
from chunkstore.metadata.dtypes import dtype_from_v2, v2_str_of, v3_name_of
from chunkstore.metadata.dtypes_extra import refine_v2_object_dtype, user_dtype, with_object_codec
from chunkstore.metadata.json_io import check_json_value
from chunkstore.metadata.rectilinear import max_lengths


class _DefaultFill:
    """The fill value of an array created without one: the dtype's default (0, "",
    NaT...). Distinct from ``None``, which a v2 array stores as ``null`` (zarr-python)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "DEFAULT_FILL"


DEFAULT_FILL: Any = _DefaultFill()

# zarr-python's chunk guess (from PyTables): a target chunk size growing with the array
CHUNK_BASE, CHUNK_MIN, CHUNK_MAX = 256 * 1024, 128 * 1024, 64 * 1024 * 1024


def _as_int(value: Any, what: str, given: Any) -> int:
    """``value`` as an int: ints, NumPy integers and bools (an int subclass, accepted as
    zarr-python does); anything else (a float such as 16.5 or even 16.0, a string)
    raises TypeError rather than being truncated."""
    if isinstance(value, int | np.integer):
        return int(value)
    raise TypeError(f"{what} must be integers, got {given!r} ({type(value).__name__} "
                    f"{value!r})")


def normalize_shape(shape: Any) -> tuple[int, ...]:
    """User shape (an int or a sequence of ints) -> a tuple of non-negative ints."""
    if isinstance(shape, int | np.integer):
        shape = (shape,)
    if isinstance(shape, str | bytes) or not hasattr(shape, "__iter__"):
        raise TypeError(f"shape must be an int or a sequence of ints, got {shape!r}")
    out = tuple(_as_int(s, "shape", shape) for s in shape)
    if any(s < 0 for s in out):
        raise ValueError(f"shape must not be negative, got {out}")
    return out


def auto_chunks(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """The chunk shape zarr-python picks: a target size between 128 KiB and 64 MiB that
    grows with the array (``256 KiB * 2 ** log10(MiB)``), reached by halving the axes in
    turn until the chunk is below it or within 50% of it."""
    chunks = [max(1, s) for s in shape]
    if not chunks:
        return ()
    itemsize = max(1, itemsize)
    total = math.prod(chunks) * itemsize
    target = CHUNK_BASE * (2 ** math.log10(total / (1024.0 * 1024)))
    target = min(max(target, CHUNK_MIN), CHUNK_MAX)
    idx = 0
    while True:
        nbytes = math.prod(chunks) * itemsize
        if (nbytes < target or abs(nbytes - target) / target < 0.5) and nbytes < CHUNK_MAX:
            break
        if math.prod(chunks) == 1:
            break
        axis = idx % len(chunks)
        chunks[axis] = math.ceil(chunks[axis] / 2.0)
        idx += 1
    return tuple(chunks)


def normalize_chunks(chunks: Any, shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """User chunks -> a tuple of positive ints. None, True or "auto": zarr-python's guess;
    an int: the same length on every axis; None or -1 in an axis: the whole axis; 0 is
    accepted for an axis of length 0 (as zarr-python does) and stored as 1."""
    if chunks is None or chunks is True or (isinstance(chunks, str) and chunks == "auto"):
        return auto_chunks(shape, itemsize)
    if isinstance(chunks, int | np.integer):
        chunks = (int(chunks),) * len(shape)
    if isinstance(chunks, str | bytes) or not hasattr(chunks, "__iter__"):
        raise TypeError(f"chunks must be an int or a sequence of ints, got {chunks!r}")
    chunks = tuple(chunks)
    if len(chunks) != len(shape):
        raise ValueError(f"chunks {chunks} do not match the {len(shape)}-d shape {shape}")
    out = []
    for c, s in zip(chunks, shape, strict=True):
        if c is None or (isinstance(c, int | np.integer) and c == -1):
            c = max(1, s)
        c = _as_int(c, "chunks", chunks)
        if c == 0 and s == 0:
            c = 1
        if c < 1:
            raise ValueError(f"chunk sizes must be positive, got {chunks}")
        out.append(c)
    return tuple(out)


def is_rectilinear_spec(chunks: Any) -> bool:
    """Whether user ``chunks`` (or ``shards``) give some axis a list of chunk lengths
    (dask's ``((10, 10, 5), (15, 15))``): a rectilinear grid."""
    if isinstance(chunks, dict):
        chunks = chunks.get("shape")
    if isinstance(chunks, str | bytes | int | np.integer) or not hasattr(chunks, "__iter__"):
        return False
    return any(not isinstance(c, str | bytes) and hasattr(c, "__iter__") for c in chunks)


def normalize_edges(chunks: Any, shape: tuple[int, ...], what: str, where: str
                    ) -> tuple[int | tuple[int, ...], ...]:
    """User per-axis chunk lengths -> a rectilinear grid's edges: per axis an int (or
    None / -1: the whole axis) stays one regular length, a list gives every chunk's
    length and must sum to the axis length (zarr-python's rule; here the last may also
    reach past it, as in a shrunk array's grid)."""
    items = tuple(chunks)
    if len(items) != len(shape):
        raise ValueError(f"{where}: {what} {items} do not match the {len(shape)}-d shape "
                         f"{shape}")
    out: list[int | tuple[int, ...]] = []
    for axis, (c, n) in enumerate(zip(items, shape, strict=True)):
        if c is None or (isinstance(c, int | np.integer) and c == -1):
            out.append(max(1, n))
            continue
        if isinstance(c, int | np.integer):
            if c < 1:
                raise ValueError(f"{where}: {what} lengths must be positive, got {items}")
            out.append(int(c))
            continue
        lengths = tuple(_as_int(e, what, items) for e in c)
        if not lengths or any(e < 1 for e in lengths):
            raise ValueError(f"{where}: {what} on axis {axis} must be positive lengths, got "
                             f"{list(lengths)}")
        if n and not sum(lengths[:-1]) < n <= sum(lengths):
            raise ValueError(f"{where}: {what} on axis {axis} sum to {sum(lengths)}: they "
                             f"must cover the axis length {n}, only the last reaching past it")
        out.append(lengths)
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
    *, shape: Any, dtype: Any, chunks: Any = None, shards: Any = None, fill_value: Any = DEFAULT_FILL,
    order: str = "C",
    compressors: Any = "auto", filters: Any = None, codecs: Any = None, zarr_format: int = 3,
    dimension_names: Sequence[str | None] | None = None, attributes: dict | None = None,
    chunk_key_encoding: Any = None, dimension_separator: str | None = None, where: str = "array",
    allow_unsafe_codecs: bool = False, serializer: Any = "auto",
) -> ArrayMetadata:
    """Validated metadata for a new array. ``fill_value``: omitted -> the dtype's default;
    None -> the default too in v3, ``null`` in v2 (read as None, as zarr-python)."""
    shape = normalize_shape(shape)
    np_dtype = user_dtype(dtype, where)  # str -> StringDType, bytes -> object (vlen)
    shard_shape, index_location = None, "end"
    edges = None  # a rectilinear grid's edges (of the chunks, or of the shards)
    if (is_rectilinear_spec(chunks) or is_rectilinear_spec(shards)) and zarr_format != 3:
        raise ValueError(f"{where}: a rectilinear chunk grid (chunk lengths per axis) needs "
                         f"zarr_format=3 (Zarr v2 has only regular chunks), got "
                         f"zarr_format={zarr_format!r}")
    if shards is not None:
        if zarr_format != 3:
            raise ValueError(f"{where}: shards= needs zarr_format=3 (Zarr v2 has no sharding), "
                             f"got zarr_format={zarr_format!r}")
        if is_rectilinear_spec(chunks):
            raise ValueError(f"{where}: the chunks inside shards must be regular; give the "
                             f"shards per-axis lengths instead, got chunks={chunks!r}")
        if is_rectilinear_spec(shards):
            location = shards.get("index_location", "end") if isinstance(shards, dict) else "end"
            edges = normalize_edges(shards["shape"] if isinstance(shards, dict) else shards,
                                    shape, "shards", where)
            shard_shape, index_location = max_lengths(edges), location
            if index_location not in ("start", "end"):
                raise ValueError(f"{where}: shards index_location must be 'start' or 'end', "
                                 f"got {index_location!r}")
        else:
            shard_shape, index_location = _normalize_shards(shards, shape, where)
        if chunks is None:
            chunks = auto_chunks(shard_shape, np_dtype.itemsize)
    elif is_rectilinear_spec(chunks):
        edges = normalize_edges(chunks, shape, "chunks", where)
        chunks = max_lengths(edges)
    chunk_shape = normalize_chunks(chunks, shape, np_dtype.itemsize)
    if shard_shape is not None and edges is not None:
        bad = [(a, e) for a, (axis, c) in enumerate(zip(edges, chunk_shape, strict=True))
               for e in ((axis,) if isinstance(axis, int) else axis) if e % c]
        if bad:
            raise ValueError(f"{where}: every shard length must be a multiple of the chunk "
                             f"length {chunk_shape} (axis {bad[0][0]}: {bad[0][1]})")
    elif shard_shape is not None and any(
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
        fill = (default_fill_value(np_dtype) if fill_value is None or fill_value is DEFAULT_FILL
                else normalize_fill_value(fill_value, np_dtype, where))
        if np_dtype.kind != "T":  # StringDType has no byte order
            np_dtype = np_dtype.newbyteorder("=")
        chain = v3_codec_chain(dtype=np_dtype, chunk_shape=chunk_shape,
                               compressors=compressors, filters=filters, codecs=codecs,
                               order=order, where=where, allow_unsafe=allow_unsafe_codecs,
                               serializer=serializer, fill_value=fill)
        if shard_shape is not None:
            sharding = ShardingCodec(chunk_shape, chain, index_location=index_location)
            try:  # refused now rather than at the first read
                resolved = sharding.resolve(ChunkSpec(tuple(shard_shape), np_dtype, fill))
            except CodecError as e:
                raise CodecError(f"{where}: shards={list(shard_shape)}: {e}") from None
            # an index this machine cannot hold: no shard could ever be written here
            resolved.check_index_fits(f"{where}: shards={list(shard_shape)}")
            chain = [sharding.to_json()]
            chunk_shape = shard_shape
        return ArrayMetadataV3(
            shape=shape, dtype=np_dtype, chunk_shape=chunk_shape,
            fill_value=fill, codecs=tuple(chain),
            chunk_key_encoding=_key_encoding(chunk_key_encoding, dimension_separator),
            attributes=attributes, dimension_names=dimension_names, chunk_edges=edges)
    if zarr_format == 2:
        if codecs is not None:
            raise ValueError(f"{where}: 'codecs' is for Zarr v3; use compressors/filters for v2")
        if not (isinstance(serializer, str) and serializer == "auto"):
            raise ValueError(f"{where}: serializer= is for Zarr v3 (a v2 array stores its "
                             "chunks' bytes as they are); use filters/compressors for v2")
        if np_dtype.kind not in "OT":
            np_dtype = dtype_from_v2(v2_str_of(np_dtype), where)
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
        if fill_value is DEFAULT_FILL:
            fill = default_fill_value(np_dtype)
        elif fill_value is None:
            fill = None  # written as null, as zarr-python does
        else:
            fill = normalize_fill_value(fill_value, np_dtype, where)
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
