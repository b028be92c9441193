"""save, load and copy: whole arrays and hierarchies in and out of stores."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from .api import create_array, open
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
    st = resolve_store(store, mode="w", storage_options=storage_options)
    fmt = zarr_format or 3
    if len(arrays) == 1 and not named:
        _store_copy(arrays[0], st, normalize_path(path), fmt)
        return
    if not arrays and not named:
        raise ValueError("save needs at least one array")
    members = {f"arr_{i}": a for i, a in enumerate(arrays)} | named
    g = open_group(st, "w", path, zarr_format=fmt)
    for name, data in members.items():
        _store_copy(data, st, g._full(name), fmt)


def _store_copy(data: Any, store: Any, path: str, zarr_format: int) -> Array:
    data = data if hasattr(data, "shape") and hasattr(data, "dtype") else np.asarray(data)
    arr = create_array(store, path, shape=data.shape, dtype=data.dtype, overwrite=True,
                       zarr_format=zarr_format)
    copy_into(data, arr)
    return arr


class LoadedGroup(Mapping[str, np.ndarray]):
    """What ``load`` returns for a group: member arrays by name, each read when accessed."""

    def __init__(self, group: Group) -> None:
        self._group = group
        self._names = group.array_keys()

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
        chunks = getattr(source, "chunks", None)
    arr = create_array(st, path, shape=tuple(source.shape), dtype=source.dtype, chunks=chunks,
                       overwrite=overwrite,
                       attributes=_jsonable_attrs(source, f"copy of {source!r}"),
                       **create_kwargs)
    copy_into(source, arr, max_bytes)
    return arr
