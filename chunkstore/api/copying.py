"""``copy``: an array or a whole hierarchy into another store, block by block."""

from __future__ import annotations

import warnings
from typing import Any

from chunkstore.api import hdf5
from chunkstore.api.creation import create_array, jsonable_attrs, like_array_kwargs
from chunkstore.api.opening import open_group
from chunkstore.array.array import Array
from chunkstore.array.grids import grid_arguments
from chunkstore.array.sources import refuse_reader_of
from chunkstore.group.group import Group
from chunkstore.group.like_args import regular_chunks
from chunkstore.io.copy import COPY_BLOCK_BYTES, copy_into
from chunkstore.io.overlap import refuse_onto_itself
from chunkstore.nodes.paths import normalize_path
from chunkstore.storage.resolve import resolve_store


def copy(source: Any, store: Any = None, path: str | None = None, *,
         chunks: Any = None, max_bytes: int = COPY_BLOCK_BYTES, overwrite: bool = False,
         storage_options: dict | None = None, allow_external: Any = None,
         **create_kwargs: Any) -> Array | Group:
    """Copy ``source`` into a new array (or hierarchy) at ``store``/``path``, a block of at
    most ``max_bytes`` at a time: never the whole array in memory.

    ``source``: a chunkstore Array or Group, or any array-like with ``shape``, ``dtype`` and
    NumPy slicing (a NumPy array or memmap, an h5py dataset...). Its attributes come along;
    chunks default to the source's chunks (and shards, between v3 arrays); an Array keeps
    its format (unless ``zarr_format`` is given), fill value, dimension names and v2
    separator.

    An h5py file, group or dataset (HDF5, netCDF-4) is translated as xarray reads it:
    dimension scales become dimension names, ``_FillValue`` the fill value, attributes
    JSON (one warning per attribute that has none); see ``chunkstore.api.hdf5``. Its
    bytes kept in other files (external storage, external links, virtual datasets) raise
    ``ExternalDataError`` unless ``allow_external`` names the directories they may be in
    (``allow_external=["/data/raw"]``).
    """
    if hdf5.is_hdf5(source):  # checked and translated before anything is created
        fmt = create_kwargs.pop("zarr_format", None) or 3
        plan = hdf5.plan_copy(source, zarr_format=fmt, allow_external=allow_external)
        for notice in plan.notices:
            warnings.warn(notice, UserWarning, stacklevel=2)
        st = resolve_store(store, mode="w" if overwrite else "a",
                           storage_options=storage_options)
        return hdf5.write_plan(plan, st, normalize_path(path), zarr_format=fmt,
                               overwrite=overwrite, chunks=chunks, max_bytes=max_bytes,
                               create_kwargs=create_kwargs)
    path = normalize_path(path)
    # never over its own source, before any delete: a chunkstore node by its place, any
    # other source (a zarr-python handle, a dask graph, a group-like mapping) by the
    # readers it holds
    target = resolve_store(store, storage_options=storage_options)
    if isinstance(source, Array | Group):
        refuse_onto_itself(source, target, path, "copy")
    else:
        refuse_reader_of(source, target, path, "copy")
    st = resolve_store(store, mode="w" if overwrite else "a", storage_options=storage_options)
    if isinstance(source, Group):
        kwargs = {**create_kwargs}
        if kwargs.get("zarr_format") is None:
            kwargs["zarr_format"] = source.zarr_format
        g = open_group(st, "w" if overwrite else "w-", path, zarr_format=kwargs["zarr_format"],
                       attributes=source.attrs.asdict())
        for name, member in source.members():
            copy(member, st, g._full(name), max_bytes=max_bytes, **kwargs)
        return g
    if not isinstance(source, Array) and not hasattr(source, "shape"):
        if hasattr(source, "keys") and hasattr(source, "__getitem__"):  # an h5py Group...
            return _copy_mapping(source, st, path, max_bytes, overwrite, create_kwargs)
        raise TypeError(f"copy: cannot copy a {type(source).__name__}: expected an array-like "
                        "(shape, dtype, NumPy slicing), a chunkstore Array or Group, or a "
                        "group-like mapping of them (e.g. an h5py Group)")
    if isinstance(source, Array):
        like_array_kwargs(source, create_kwargs)
        if (chunks is None and source.layout.shards is not None and "shards" not in create_kwargs
                and create_kwargs["zarr_format"] == 3):
            chunks, create_kwargs["shards"] = grid_arguments(source.metadata)  # the same layout
        elif (chunks is None and source.layout.edges is not None
              and create_kwargs["zarr_format"] == 3):
            chunks = grid_arguments(source.metadata)[0]  # the same rectilinear grid
    if chunks is None:
        chunks = regular_chunks(source)
    arr = create_array(st, path, shape=tuple(source.shape), dtype=source.dtype, chunks=chunks,
                       overwrite=overwrite,
                       attributes=jsonable_attrs(source, f"copy of {source!r}"),
                       **create_kwargs)
    copy_into(source, arr, max_bytes)
    return arr


def _copy_mapping(source: Any, st: Any, path: str, max_bytes: int, overwrite: bool,
                  create_kwargs: dict[str, Any]) -> Group:
    """A group-like source (an h5py Group: ``keys()``, ``[name]``, ``attrs``) copied member
    by member into a new group."""
    g = open_group(st, "w" if overwrite else "w-", path,
                   zarr_format=create_kwargs.get("zarr_format") or 3,
                   attributes=jsonable_attrs(source, f"copy of {source!r}"))
    for name in source.keys():
        copy(source[name], st, g._full(str(name)), max_bytes=max_bytes, **create_kwargs)
    return g
