"""Writing xarray Datasets (``chunkstore.xarray``): ``to_store(ds, "out.zarr")``.

Writes xarray's Zarr encoding as ``Dataset.to_zarr`` does: CF encoding by xarray's own
coders (``_FillValue``, ``scale_factor``/``add_offset``, ``units``/``calendar`` of
times, the ``coordinates`` attribute), dimension names (v3 ``dimension_names``, v2 the
``_ARRAY_DIMENSIONS`` attribute), Zarr ``fill_value`` as xarray sets it, consolidated
metadata. Unlike ``to_zarr``, a variable of irregular dask chunks (``(10, 10, 5, 7)``)
is written as a v3 ``rectilinear`` chunk grid of exactly those chunks, each block one
chunk written by one task: no rechunking, no two tasks on one chunk. Read it back with
``xr.open_dataset(path, engine="chunkstore")`` or ``xr.open_zarr`` (zarr-python >= 3.4
with ``zarr.config.set({"array.rectilinear_chunks": True})``).

This module imports xarray; ``import chunkstore`` does not import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dask.array as da
import numpy as np
from xarray import Dataset, Variable, conventions
from xarray.backends.zarr import (
    DIMENSION_KEY,
    FillValueCoder,
    encode_zarr_attr_value,
    encode_zarr_variable,
)
from xarray.coding.strings import check_vlen_dtype

from chunkstore.api.consolidation import consolidate_metadata
from chunkstore.api.opening import open_group
from chunkstore.group.group import Group

#: variable encodings ``to_store`` passes on to ``create_array``
_ARRAY_ENCODINGS = ("compressors", "filters", "serializer", "shards")


def to_store(ds: Dataset, store: Any, path: str | None = None, *, mode: str = "w-",
             zarr_format: int = 3, consolidated: bool = True,
             encoding: Mapping[str, Mapping[str, Any]] | None = None,
             storage_options: dict | None = None) -> Group:
    """Write ``ds`` as the group at ``path`` of ``store``; returns the group.

    ``mode``: "w-" (refuse an existing node) or "w" (replace it). ``encoding``: per
    variable, as ``to_zarr``'s: CF keys (``dtype``, ``_FillValue``, ``scale_factor``,
    ``add_offset``, ``units``, ``calendar``), ``chunks`` (numpy-backed variables only: a
    dask-backed one is stored in its dask chunks), ``fill_value`` (v3), and
    chunkstore's ``create_array`` arguments ``compressors``, ``filters``,
    ``serializer``, ``shards`` (numpy-backed only), taken from this argument only (not
    from a variable's ``encoding``, which may hold another library's codec objects). Irregular dask chunks need ``zarr_format=3`` (a
    rectilinear grid); ValueError with 2. ``consolidated``: consolidate the group's
    metadata after writing."""
    if mode not in ("w", "w-"):
        raise ValueError(f"to_store: mode must be 'w' or 'w-', got {mode!r}")
    if zarr_format not in (2, 3):
        raise ValueError(f"to_store: zarr_format must be 2 or 3, got {zarr_format!r}")
    encoding = dict(encoding or {})
    unknown = set(encoding) - set(ds.variables)
    if unknown:
        raise ValueError(f"to_store: encoding for variables not in the dataset: {sorted(unknown)}")
    variables, attrs = conventions.encode_dataset_coordinates(ds)
    # every variable encoded and its array worked out before anything is written: a
    # variable that cannot be stored leaves the store untouched
    arrays = []
    for name, var in variables.items():
        given = dict(encoding.get(name, {}))
        var = var.copy(deep=False)
        var.encoding = {k: v for k, v in {**var.encoding, **given}.items()
                        if k not in _ARRAY_ENCODINGS}
        encoded = encode_zarr_variable(var, name=name, zarr_format=zarr_format)
        arrays.append((str(name), encoded.data, _array_arguments(
            str(name), encoded, {k: given[k] for k in _ARRAY_ENCODINGS if k in given},
            zarr_format == 3)))
    group = open_group(store, mode="w" if mode == "w" else "w-", path=path,
                       zarr_format=zarr_format, storage_options=storage_options)
    group.update_attributes({k: encode_zarr_attr_value(v) for k, v in attrs.items()})
    for name, data, arguments in arrays:
        target = group.create_array(name, **arguments)
        if isinstance(data, da.Array):
            # every dask block is one chunk of the grid: the tasks never share a chunk
            da.store(data, target, lock=False, compute=True)
        else:
            target[...] = np.asarray(data)
    if consolidated:
        consolidate_metadata(group.store, group.path, zarr_format=zarr_format)
    return group


def _array_arguments(name: str, var: Variable, kwargs: dict[str, Any], v3: bool
                     ) -> dict[str, Any]:
    """The ``create_array`` arguments of the CF-encoded ``var`` (and ``kwargs``):
    xarray's fill value, attributes and dimension names; a dask-backed variable's grid
    its dask chunks. ValueError for what the format cannot store."""
    attrs, enc = dict(var.attrs), dict(var.encoding)
    # the fill value, as xarray's zarr writer: v2 masks with it (it is the _FillValue),
    # v3 keeps _FillValue an attribute and fills floats with NaN
    if v3:
        fill = enc.get("fill_value")
        if fill is None and var.dtype.kind == "f":
            fill = np.nan
        if attrs.get("_FillValue") is not None:
            attrs["_FillValue"] = FillValueCoder.encode(attrs["_FillValue"], var.dtype)
    else:
        fill = attrs.pop("_FillValue", None)
    attrs = {k: encode_zarr_attr_value(v) for k, v in attrs.items()}
    if v3:
        kwargs["dimension_names"] = list(var.dims)
    else:
        attrs[DIMENSION_KEY] = list(var.dims)
    data = var.data
    if isinstance(data, da.Array):
        if any(np.isnan(c) for sizes in data.chunks for c in sizes):
            raise ValueError(f"to_store: variable {name!r} has unknown dask chunk sizes")
        if kwargs.get("shards") is not None:
            raise ValueError(f"to_store: variable {name!r}: a dask-backed variable is stored "
                             "in its dask chunks, not sharded")
        chunks: Any = _grid(data.chunks)
    else:
        chunks = enc.get("chunks") or "auto"
    if not v3 and not isinstance(chunks, str) and any(isinstance(c, tuple) for c in chunks):
        raise ValueError(f"to_store: variable {name!r} has irregular chunks {chunks}: a Zarr "
                         "v2 array cannot store them (use zarr_format=3, or rechunk)")
    # variable-length text (object dtype), as xarray: zarr's string data type
    dtype = str if check_vlen_dtype(var.dtype) is str else var.dtype
    return {"shape": var.shape, "dtype": dtype, "chunks": chunks, "fill_value": fill,
            "attributes": attrs, **kwargs}


def _grid(chunks: tuple[tuple[int, ...], ...]) -> tuple[int | tuple[int, ...], ...]:
    """The chunk grid of dask ``chunks``: per axis the length where they are regular
    (all equal but a shorter last one), else every chunk's length (rectilinear)."""
    out: list[int | tuple[int, ...]] = []
    for axis in chunks:
        if len(set(axis[:-1])) <= 1 and (not axis or axis[-1] <= axis[0]):
            out.append(max(axis[0], 1) if axis else 1)
        else:
            out.append(tuple(axis))
    return tuple(out)


__all__ = ["to_store"]
