"""save, load and copy: whole arrays and hierarchies in and out of stores; and the
zarr-python 3 convenience spellings (save_array, save_group, from_array, create,
create_group, open_consolidated, open_like) over the same machinery."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from .api import array, create_array, open, open_array
from .array import Array
from .copying import COPY_BLOCK_BYTES, copy_into
from .creation import normalize_path
from .group import Group
from .group_api import open_group
from .metadata.json_io import check_json_value
from .storage.resolve import resolve_store


def save(store: Any, *arrays: Any, path: str | None = None, zarr_format: int | None = None,
         storage_options: dict | None = None, **named: Any) -> None:
    """Save one array to ``store`` (``save(store, arr)``), or several into a group:
    positional ones as ``arr_0``, ``arr_1``..., keyword ones under their names.
    Whatever is at ``path`` is replaced."""
    if len(arrays) == 1 and not named:
        save_array(store, arrays[0], path=path, zarr_format=zarr_format,
                   storage_options=storage_options)
        return
    save_group(store, *arrays, path=path, zarr_format=zarr_format,
               storage_options=storage_options, **named)


def save_array(store: Any, arr: Any, *, path: str | None = None,
               zarr_format: int | None = None, storage_options: dict | None = None,
               **create_kwargs: Any) -> None:
    """Save one array-like to ``store``/``path``, replacing whatever is there
    (``create_kwargs``, e.g. ``chunks=``, go to ``create_array``)."""
    st = resolve_store(store, mode="w", storage_options=storage_options)
    _store_copy(arr, st, normalize_path(path), zarr_format or 3, **create_kwargs)


def save_group(store: Any, *arrays: Any, path: str | None = None,
               zarr_format: int | None = None, storage_options: dict | None = None,
               **named: Any) -> None:
    """Save arrays into a new group at ``store``/``path`` (replacing whatever is there):
    positional ones as ``arr_0``, ``arr_1``..., keyword ones under their names."""
    if not arrays and not named:
        raise ValueError("save needs at least one array")
    st = resolve_store(store, mode="w", storage_options=storage_options)
    fmt = zarr_format or 3
    members = {f"arr_{i}": a for i, a in enumerate(arrays)} | named
    g = open_group(st, "w", path, zarr_format=fmt)
    for name, data in members.items():
        _store_copy(data, st, g._full(name), fmt)


def _store_copy(data: Any, store: Any, path: str, zarr_format: int,
                **create_kwargs: Any) -> Array:
    # ``array`` infers the dtype of object arrays (all str -> variable-length strings)
    return array(data, store=store, name=path, overwrite=True, zarr_format=zarr_format,
                 **create_kwargs)


def _chunks_of(source: Any) -> tuple[int, ...] | None:
    """The regular chunk shape of an array-like (Array, h5py dataset), or None: a dask
    array's chunks (a tuple of tuples) or an unchunked dataset's give no answer."""
    chunks = getattr(source, "chunks", None)
    if isinstance(chunks, tuple) and all(isinstance(c, int | np.integer) for c in chunks):
        return tuple(int(c) for c in chunks)
    return None


class LoadedGroup(Mapping[str, np.ndarray]):
    """What ``load`` returns for a group: member arrays by name, each read when accessed."""

    def __init__(self, group: Group) -> None:
        self._group = group
        self._names = group.array_keys()

    def __contains__(self, name: object) -> bool:  # without reading the array
        return name in self._names

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._names:
            raise KeyError(f"no array {name!r} in group {self._group.name!r}")
        return self._group[name][...]  # type: ignore[index]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        return f"<LoadedGroup {self._group.name!r}: {', '.join(self._names)}>"


def load(store: Any, path: str | None = None, *, zarr_format: int | None = None,
         storage_options: dict | None = None) -> np.ndarray | LoadedGroup:
    """The array at ``path`` as an ndarray, or for a group a mapping of its arrays
    (each loaded on access)."""
    node = open(store, mode="r", path=path, zarr_format=zarr_format,
                storage_options=storage_options)
    if isinstance(node, Array):
        return node[...]
    return LoadedGroup(node)


def _jsonable_attrs(source: Any, where: str) -> dict[str, Any]:
    attrs = getattr(source, "attrs", None)
    if attrs is None:
        return {}
    out = {}
    for key, value in dict(attrs).items():
        if isinstance(value, np.generic | np.ndarray):
            value = value.tolist()
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        out[str(key)] = value
    return check_json_value(out, f"{where}: attributes")


def copy(source: Any, store: Any = None, path: str | None = None, *,
         chunks: Any = None, max_bytes: int = COPY_BLOCK_BYTES, overwrite: bool = False,
         storage_options: dict | None = None, **create_kwargs: Any) -> Array | Group:
    """Copy ``source`` into a new array (or hierarchy) at ``store``/``path``, a block of at
    most ``max_bytes`` at a time: never the whole array in memory.

    ``source``: a chunkstore Array or Group, or any array-like with ``shape``, ``dtype`` and
    NumPy slicing (a NumPy array or memmap, an h5py dataset...). Its attributes come along;
    chunks default to the source's chunks.
    """
    st = resolve_store(store, mode="w" if overwrite else "a", storage_options=storage_options)
    path = normalize_path(path)
    if isinstance(source, Group):
        kwargs = {"zarr_format": source.zarr_format, **create_kwargs}
        g = open_group(st, "w" if overwrite else "w-", path, zarr_format=kwargs["zarr_format"],
                       attributes=source.attrs.asdict())
        for name, member in source.members():
            copy(member, st, g._full(name), max_bytes=max_bytes, **kwargs)
        return g
    if isinstance(source, Array):
        create_kwargs.setdefault("zarr_format", source.zarr_format)
        create_kwargs.setdefault("fill_value", source.fill_value)
        if source.dimension_names is not None:
            create_kwargs.setdefault("dimension_names", source.dimension_names)
    if chunks is None:
        chunks = _chunks_of(source)
    arr = create_array(st, path, shape=tuple(source.shape), dtype=source.dtype, chunks=chunks,
                       overwrite=overwrite,
                       attributes=_jsonable_attrs(source, f"copy of {source!r}"),
                       **create_kwargs)
    copy_into(source, arr, max_bytes)
    return arr


# -- zarr-python 3 spellings ---------------------------------------------------------------
def from_array(store: Any, *, data: Any, name: str | None = None, chunks: Any = "keep",
               write_data: bool = True, **create_kwargs: Any) -> Array:
    """A new array at ``store``/``name`` shaped like ``data`` (an Array or any array-like),
    holding a copy of it unless ``write_data=False``. ``chunks="keep"`` keeps the source's
    chunks ("auto" picks them); an Array source also passes on its format, fill value,
    attributes and dimension names."""
    if isinstance(chunks, str):
        if chunks not in ("keep", "auto"):
            raise ValueError(f"chunks must be 'keep', 'auto' or a shape, got {chunks!r}")
        chunks = _chunks_of(data) if chunks == "keep" else None
    if isinstance(data, Array):
        create_kwargs.setdefault("zarr_format", data.zarr_format)
        create_kwargs.setdefault("fill_value", data.fill_value)
        create_kwargs.setdefault("attributes", _jsonable_attrs(data, f"copy of {data!r}"))
        if data.dimension_names is not None:
            create_kwargs.setdefault("dimension_names", data.dimension_names)
    if write_data:
        return array(data, store=store, name=name, chunks=chunks, **create_kwargs)
    if not (hasattr(data, "shape") and hasattr(data, "dtype")):
        data = np.asarray(data)
    create_kwargs.setdefault("dtype", data.dtype)
    return create_array(store, name, shape=tuple(data.shape), chunks=chunks, **create_kwargs)


def create(shape: Any, *, store: Any = None, path: str | None = None, dtype: Any = None,
           chunk_shape: Any = None, **create_kwargs: Any) -> Array:
    """zarr-python's ``create``: ``create_array`` with the shape first (``chunk_shape`` is
    accepted for ``chunks``, ``dtype=None`` means float64)."""
    if chunk_shape is not None:
        create_kwargs.setdefault("chunks", chunk_shape)
    return create_array(store, path, shape=shape, dtype="f8" if dtype is None else dtype,
                        **create_kwargs)


def create_group(store: Any, *, path: str | None = None, zarr_format: int | None = None,
                 overwrite: bool = False, attributes: dict | None = None,
                 storage_options: dict | None = None) -> Group:
    """A new group at ``store``/``path``; an existing node there raises (ContainsGroupError
    or ContainsArrayError) unless ``overwrite=True``."""
    return open_group(store, "w" if overwrite else "w-", path, zarr_format=zarr_format,
                      attributes=attributes, storage_options=storage_options)


def open_consolidated(store: Any = None, mode: str = "a", path: str | None = None,
                      **kwargs: Any) -> Group:
    """``open_group`` that requires consolidated metadata (MetadataError without it)."""
    return open_group(store, mode, path, use_consolidated=True, **kwargs)


def open_like(a: Any, path: Any, **kwargs: Any) -> Array:
    """Open (or create) the array at ``path`` with the shape, dtype and chunks of ``a``."""
    kwargs.setdefault("shape", tuple(a.shape))
    kwargs.setdefault("dtype", a.dtype)
    kwargs.setdefault("chunks", _chunks_of(a))
    if isinstance(a, Array):
        kwargs.setdefault("fill_value", a.fill_value)
        kwargs.setdefault("zarr_format", a.zarr_format)
    return open_array(path, **kwargs)
