"""Creating nodes: user arguments -> metadata -> placed in the hierarchy -> Array; the
metadata of a new group.

Shared by ``Group.create_array`` and the top-level ``chunkstore.create_array`` (which sits
above groups), so it lives below both."""

from __future__ import annotations

from typing import Any

import numpy as np

from chunkstore.array.array import Array
from chunkstore.config import ArrayConfig, array_config
from chunkstore.config import config as settings
from chunkstore.metadata.dtypes_extra import infer_object_dtype
from chunkstore.metadata.json_io import check_json_value
from chunkstore.metadata.nodes import GroupMetadata, GroupMetadataV2, GroupMetadataV3
from chunkstore.nodes.creation import build_array_metadata
from chunkstore.nodes.placement import place_node
from chunkstore.storage.base import Store

UNSET: Any = "unset"


def group_metadata(zarr_format: int, attributes: dict | None, where: str) -> GroupMetadata:
    """The metadata of a new group of ``zarr_format`` with ``attributes`` (checked as
    JSON; errors begin with ``where``)."""
    attrs = check_json_value(dict(attributes or {}), f"{where}: attributes")
    return GroupMetadataV3(attributes=attrs) if zarr_format == 3 else GroupMetadataV2(
        attributes=attrs)


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


def array_options(config: Any, write_empty_chunks: bool | None) -> ArrayConfig:
    """The array's settings (``ArrayConfig``) from ``write_empty_chunks=``, the per-array
    ``config=`` (a dict of zarr-python's ArrayConfig keys, or an ArrayConfig) and
    ``chunkstore.config``; an unknown key is a TypeError, a bad value a ValueError."""
    return array_config(config, write_empty_chunks)


def resolve_compressors(compressors: Any, compressor: Any) -> Any:
    """One compressor setting from ``compressors=`` / the zarr-python 2 ``compressor=``
    spelling / ``chunkstore.config`` "array.default_compressor"."""
    if compressor is not UNSET:
        if not (isinstance(compressors, str) and compressors == "auto"):
            raise TypeError("give compressors= or compressor=, not both")
        compressors = compressor
    if isinstance(compressors, str) and compressors == "auto":
        compressors = settings.get("array.default_compressor")
    return compressors


def new_array(st: Store, path: str, *, shape: Any, dtype: Any = "f8",
              compressors: Any = "auto", compressor: Any = UNSET, filters: Any = None,
              order: str | None = None, overwrite: bool = False, synchronizer: Any = None,
              write_empty_chunks: bool | None = None, allow_unsafe_codecs: bool = False,
              config: dict[str, Any] | None = None, zarr_format: int = 3,
              dimension_separator: str | None = None, within: str | None = None,
              checked: bool = False,
              **meta_kwargs: Any) -> Array:
    """Create the array node at ``path`` of a resolved store and return it.

    ``within`` and ``checked`` say what the caller knows of the
    hierarchy already (see ``placement.place_node``); ``meta_kwargs`` are the other
    arguments of ``creation.build_array_metadata``."""
    if zarr_format == 3 and dimension_separator is not None:
        raise ValueError("dimension_separator cannot be used for arrays with zarr_format 3. "
                         "Use chunk_key_encoding instead.")
    options = array_options(config, write_empty_chunks)
    # the stored order: ``order=``, else the config's (whose order is that of the arrays
    # reads return; ``order=`` of a v3 array only sets how its chunks are stored)
    order = options.order if order is None else order
    compressors = resolve_compressors(compressors, compressor)
    where = f"{st!r}/{path}" if path else repr(st)
    meta = build_array_metadata(shape=shape, dtype=dtype, compressors=compressors,
                                filters=filters, order=order, zarr_format=zarr_format,
                                dimension_separator=dimension_separator, where=where,
                                allow_unsafe_codecs=allow_unsafe_codecs, **meta_kwargs)
    place_node(st, path, meta, overwrite=overwrite, within=within, checked=checked,
               synchronizer=synchronizer)
    return Array(st, path, meta, synchronizer=synchronizer, config=options,
                 allow_unsafe_codecs=allow_unsafe_codecs)
