"""An xarray backend: ``xr.open_dataset(path, engine="chunkstore")``.

Reads a Zarr group (v2 or v3, consolidated or not) through chunkstore's own read path,
with the options of ``xr.open_zarr``::

    import xarray as xr
    ds = xr.open_dataset("weather.zarr", engine="chunkstore", chunks={})  # dask, per chunk
    ds = xr.open_dataset("s3://bucket/x.zarr", engine="chunkstore", group="run1",
                         consolidated=True, storage_options={"anon": True})
    tree = xr.open_datatree("weather.zarr", engine="chunkstore")

Nothing is read until it is needed: every variable wraps a chunkstore ``Array`` in a
``BackendArray`` that answers xarray's basic, outer and vectorized indexers with
``a[...]``, ``a.oindex[...]`` and ``a.vindex[...]``. Dimension names come from v3
``dimension_names`` or the v2 ``_ARRAY_DIMENSIONS`` attribute; CF decoding (scale/offset,
``_FillValue``, times) is xarray's own, through ``StoreBackendEntrypoint``. The Zarr
``fill_value`` masks missing data as the zarr engine does: by default in v2 groups, not
in v3 ones (``use_zarr_fill_value_as_mask``). ``chunks={}`` gives dask arrays aligned to
the stored chunks (``preferred_chunks``; a rectilinear grid's irregular dimensions as
tuples of chunk lengths, as the zarr engine gives them). To write a Dataset, irregular
dask chunks included: ``chunkstore.xarray.to_store`` (``chunkstore/xarray_io.py``).

Registered under the ``xarray.backends`` entry point group (see ``pyproject.toml``).
It claims ``.zarr`` paths and directories holding ``zarr.json`` / ``.zgroup``, so with
chunkstore installed ``xr.open_dataset("x.zarr")`` without ``engine=`` picks it (xarray
tries non-builtin engines in name order); pass ``engine="zarr"`` for zarr-python.
This module imports xarray; ``import chunkstore`` does not import it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
from xarray.backends.common import (
    AbstractDataStore,
    BackendArray,
    BackendEntrypoint,
    _normalize_path,
    datatree_from_dict_with_io_cleanup,
)
from xarray.backends.store import StoreBackendEntrypoint
from xarray.backends.zarr import FillValueCoder
from xarray.core import indexing
from xarray.core.dataset import Dataset
from xarray.core.datatree import DataTree
from xarray.core.utils import FrozenDict, HiddenKeyDict, close_on_error
from xarray.core.variable import Variable

from chunkstore.api.opening import open_group
from chunkstore.array.array import Array
from chunkstore.group.group import Group

DIMENSION_KEY = "_ARRAY_DIMENSIONS"
_META_FILES = ("zarr.json", ".zgroup", ".zarray", ".zmetadata")


class ChunkstoreArrayWrapper(BackendArray):
    """A chunkstore ``Array`` as xarray's lazily indexed backend array."""

    __slots__ = ("_array", "dtype", "shape")

    def __init__(self, array: Array) -> None:
        self._array = array
        self.shape = tuple(array.shape)
        self.dtype = np.dtype(array.dtype)

    def get_array(self) -> Array:
        return self._array

    def _basic(self, key: tuple) -> Any:
        return self._array[key]

    def _outer(self, key: tuple) -> Any:
        return self._array.oindex[key]

    def _vectorized(self, key: tuple) -> Any:
        return self._array.vindex[_arrayize(key, self.shape)]

    def __getitem__(self, key: indexing.ExplicitIndexer) -> np.ndarray:
        if isinstance(key, indexing.VectorizedIndexer):
            method = self._vectorized
        elif isinstance(key, indexing.OuterIndexer):
            method = self._outer
        else:
            method = self._basic
        value = indexing.explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.VECTORIZED, method)
        if not isinstance(value, np.ndarray):  # a 0-d selection gives a scalar
            value = np.asarray(value, dtype=self.dtype)
        return value

    async def async_getitem(self, key: indexing.ExplicitIndexer) -> np.ndarray:
        """For ``Dataset.load_async``: the (parallel inside) synchronous read, run in a
        worker thread so the event loop stays free."""
        return await asyncio.to_thread(self.__getitem__, key)


def _arrayize(key: tuple, shape: tuple[int, ...]) -> tuple:
    """A vectorized key with slices as integer arrays: the slice axes come after the
    broadcast axes of the index arrays, in order (xarray's vectorized semantics)."""
    if not any(isinstance(k, slice) for k in key):
        return key
    arrays = [np.asarray(k) for k in key if not isinstance(k, slice)]
    n_adv = np.broadcast_shapes(*(a.shape for a in arrays)) if arrays else ()
    n_slices = sum(isinstance(k, slice) for k in key)
    out, i = [], 0
    for k, size in zip(key, shape, strict=True):
        if isinstance(k, slice):
            r = np.arange(*k.indices(size))
            dims = [1] * (len(n_adv) + n_slices)
            dims[len(n_adv) + i] = r.size
            out.append(r.reshape(dims))
            i += 1
        else:
            k = np.asarray(k)
            out.append(k.reshape(k.shape + (1,) * n_slices))
    return tuple(out)


def compact_chunk_sizes(sizes: tuple[tuple[int, ...], ...]) -> tuple[int | tuple[int, ...], ...]:
    """Per dimension the chunk length where the lengths are regular (all equal but a
    shorter last one), else the tuple of them; ``(0,)`` for an empty dimension: the form
    xarray's zarr engine gives ``chunks`` / ``preferred_chunks`` of a rectilinear grid
    (dask takes either per dimension)."""
    out: list[int | tuple[int, ...]] = []
    for axis in sizes:
        axis = tuple(axis)
        if not axis:
            out.append((0,))
        elif len(set(axis[:-1])) <= 1 and axis[-1] <= axis[0]:
            out.append(axis[0])
        else:
            out.append(axis)
    return tuple(out)


def _dims_and_attrs(array: Array, *, try_nczarr: bool = False) -> tuple[tuple, dict[str, Any]]:
    """Dimension names and user attributes of an array, as the zarr engine reads them."""
    meta = array.metadata
    attrs = dict(meta.attributes)
    if meta.zarr_format == 3:
        dims = tuple(meta.dimension_names or ())
        if len(dims) != len(meta.shape):
            raise KeyError(f"array {array.name!r}: Zarr v3 array without `dimension_names`, "
                           "which xarray needs to name its dimensions")
        return dims, attrs
    dims = attrs.get(DIMENSION_KEY)
    if dims is None:
        raise KeyError(f"array {array.name!r}: missing the attribute {DIMENSION_KEY!r}, "
                       "which xarray needs to name the dimensions of a Zarr v2 array")
    hidden = [DIMENSION_KEY] + [k for k in attrs if k.lower().startswith("_nc")]
    return tuple(dims), dict(HiddenKeyDict(attrs, hidden))


class ChunkstoreDataStore(AbstractDataStore):
    """One chunkstore group as an xarray data store (read only)."""

    def __init__(self, group: Group, *, use_zarr_fill_value_as_mask: bool | None = None) -> None:
        self.group = group
        if use_zarr_fill_value_as_mask is None:
            use_zarr_fill_value_as_mask = group.zarr_format == 2
        self._mask_with_fill = use_zarr_fill_value_as_mask
        self._arrays = {name: a for name, a in group.arrays()}

    @classmethod
    def open(cls, store: Any, *, group: str | None = None, consolidated: bool | None = None,
             storage_options: dict | None = None, zarr_format: int | None = None,
             use_zarr_fill_value_as_mask: bool | None = None,
             mode: str = "r") -> ChunkstoreDataStore:
        return cls(open_chunkstore_group(store, group=group, consolidated=consolidated,
                                         storage_options=storage_options,
                                         zarr_format=zarr_format, mode=mode),
                   use_zarr_fill_value_as_mask=use_zarr_fill_value_as_mask)

    def open_store_variable(self, name: str, array: Array) -> Variable:
        dims, attrs = _dims_and_attrs(array)
        wrapper = ChunkstoreArrayWrapper(array)
        data = indexing.LazilyIndexedArray(wrapper)
        if array.layout.edges is None:
            chunks = tuple(array.chunks)
            encoding: dict[str, Any] = {
                "chunks": chunks,
                "preferred_chunks": dict(zip(dims, chunks, strict=True)),
                "shards": array.shards,
            }
        else:  # a rectilinear grid: as the zarr engine, a tuple per irregular dimension
            chunks = compact_chunk_sizes(array.read_chunk_sizes)
            shards = (compact_chunk_sizes(array.write_chunk_sizes)
                      if array.layout.shards is not None else None)
            encoding = {"chunks": chunks, "preferred_chunks": dict(zip(dims, chunks, strict=True)),
                        "shards": shards}
        if wrapper.dtype.kind == "T":
            encoding["dtype"] = wrapper.dtype
        fill = array.fill_value
        if self._mask_with_fill:
            if fill is not None:
                attrs["_FillValue"] = fill
        else:
            if array.zarr_format == 3:
                encoding["fill_value"] = fill
            if "_FillValue" in attrs:
                attrs["_FillValue"] = FillValueCoder.decode(attrs["_FillValue"], wrapper.dtype)
        return Variable(dims, data, attrs, encoding)

    def get_variables(self) -> FrozenDict:
        return FrozenDict((k, self.open_store_variable(k, a)) for k, a in self._arrays.items())

    def get_attrs(self) -> dict[str, Any]:
        return {k: v for k, v in self.group.metadata.attributes.items()
                if not k.lower().startswith("_nc")}

    def get_dimensions(self) -> dict[str, int]:
        dims: dict[str, int] = {}
        for array in self._arrays.values():
            names, _ = _dims_and_attrs(array)
            for d, n in zip(names, array.shape, strict=True):
                if d in dims and dims[d] != n:
                    raise ValueError(f"found conflicting lengths for dimension {d} "
                                     f"({n} != {dims[d]})")
                dims[d] = n
        return dims

    def close(self) -> None:
        pass


def _is_url(path: str) -> bool:
    return "://" in path or "::" in path


def open_chunkstore_group(store: Any, *, group: str | None = None,
                          consolidated: bool | None = None, storage_options: dict | None = None,
                          zarr_format: int | None = None, mode: str = "r") -> Group:
    """The group to read, as the zarr engine finds it: with ``consolidated`` None or True
    the root is opened (its consolidated metadata used if there, required if True) and
    ``group`` looked up below it; with False the group is opened directly."""
    if isinstance(store, Group):
        return store[group.strip("/")] if group and group.strip("/") else store
    if isinstance(store, os.PathLike):
        store = os.fspath(store)
    if storage_options and not (isinstance(store, str) and _is_url(store)):
        storage_options = None  # as xarray: ignored for local paths
    path = (group or "").strip("/")
    if consolidated is False:
        return open_group(store, mode=mode, path=path, zarr_format=zarr_format,
                          storage_options=storage_options, use_consolidated=False)
    root = open_group(store, mode=mode, zarr_format=zarr_format,
                      storage_options=storage_options, use_consolidated=consolidated)
    if not path:
        return root
    node = root[path]
    if not isinstance(node, Group):
        raise ValueError(f"group={group!r} is an array, not a group, in {store!r}")
    return node


def _check_flag(value: Any, name: str) -> None:
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be True or False, got {value!r}")


def _iter_groups(root: Group, parent: str = "/") -> Iterator[tuple[str, Group]]:
    yield parent, root
    for name, child in root.groups():
        yield from _iter_groups(child, parent.rstrip("/") + "/" + name)


class ChunkstoreBackendEntrypoint(BackendEntrypoint):
    """Open Zarr v2/v3 groups with chunkstore (``engine="chunkstore"``)."""

    description = "Open Zarr groups (v2 and v3) with chunkstore's own reader"
    supports_groups = True
    open_dataset_parameters = (
        "filename_or_obj", "mask_and_scale", "decode_times", "concat_characters",
        "decode_coords", "drop_variables", "use_cftime", "decode_timedelta", "group",
        "mode", "consolidated", "storage_options", "zarr_format",
        "use_zarr_fill_value_as_mask", "cache_members",
    )

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        if isinstance(filename_or_obj, Group):
            return True
        if not isinstance(filename_or_obj, str | os.PathLike):
            return False
        path = os.fspath(filename_or_obj).rstrip("/")
        if os.path.splitext(path)[1] == ".zarr":
            return True
        return (not _is_url(path) and os.path.isdir(path)
                and any(os.path.exists(os.path.join(path, f)) for f in _META_FILES))

    def open_dataset(  # type: ignore[override]
        self,
        filename_or_obj: Any,
        *,
        mask_and_scale: bool = True,
        decode_times: Any = True,
        concat_characters: bool = True,
        decode_coords: Any = True,
        drop_variables: str | Iterable[str] | None = None,
        use_cftime: bool | None = None,
        decode_timedelta: Any = None,
        group: str | None = None,
        mode: str = "r",
        consolidated: bool | None = None,
        storage_options: dict | None = None,
        zarr_format: int | None = None,
        use_zarr_fill_value_as_mask: bool | None = None,
        cache_members: bool = True,
    ) -> Dataset:
        """Open a group as a Dataset. The options are those of xarray's zarr engine;
        ``cache_members`` is accepted for its signature: the group's members are always
        read once, when it is opened (one request with consolidated metadata)."""
        _check_flag(cache_members, "cache_members")
        store = ChunkstoreDataStore.open(
            _normalize_path(filename_or_obj), group=group, consolidated=consolidated,
            storage_options=storage_options, zarr_format=zarr_format, mode=mode,
            use_zarr_fill_value_as_mask=use_zarr_fill_value_as_mask)
        with close_on_error(store):
            return StoreBackendEntrypoint().open_dataset(
                store, mask_and_scale=mask_and_scale, decode_times=decode_times,
                concat_characters=concat_characters, decode_coords=decode_coords,
                drop_variables=drop_variables, use_cftime=use_cftime,
                decode_timedelta=decode_timedelta)

    def open_groups_as_dict(  # type: ignore[override]
        self, filename_or_obj: Any, *, group: str | None = None, mode: str = "r",
        consolidated: bool | None = None, storage_options: dict | None = None,
        zarr_format: int | None = None, use_zarr_fill_value_as_mask: bool | None = None,
        cache_members: bool = True, **decode: Any,
    ) -> dict[str, Dataset]:
        _check_flag(cache_members, "cache_members")
        start = open_chunkstore_group(
            _normalize_path(filename_or_obj), group=group, consolidated=consolidated,
            storage_options=storage_options, zarr_format=zarr_format, mode=mode)
        out = {}
        for name, node in _iter_groups(start):
            store = ChunkstoreDataStore(node,
                                        use_zarr_fill_value_as_mask=use_zarr_fill_value_as_mask)
            with close_on_error(store):
                out[name] = StoreBackendEntrypoint().open_dataset(store, **decode)
        return out

    def open_datatree(  # type: ignore[override]
        self, filename_or_obj: Any, **kwargs: Any) -> DataTree:
        return datatree_from_dict_with_io_cleanup(
            self.open_groups_as_dict(filename_or_obj, **kwargs))


__all__ = ["ChunkstoreArrayWrapper", "ChunkstoreBackendEntrypoint", "ChunkstoreDataStore",
           "open_chunkstore_group"]
