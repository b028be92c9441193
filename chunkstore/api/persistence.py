"""Whole arrays and groups of arrays in and out of stores: ``save``, ``save_array``,
``save_group`` and ``load``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from chunkstore.api.creation import array, creation_mode
from chunkstore.api.opening import open, open_group
from chunkstore.array.array import Array
from chunkstore.array.hdf5_files import check_value
from chunkstore.array.sources import refuse_reader_of
from chunkstore.group.group import Group
from chunkstore.nodes.paths import normalize_path
from chunkstore.storage.resolve import resolve_store


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
               mode: str | None = None, **create_kwargs: Any) -> None:
    """Save one array-like to ``store``/``path`` (``create_kwargs``, e.g. ``chunks=``, go
    to ``create_array``). Without ``mode`` whatever is at ``path`` is replaced; with
    one, as zarr-python: "a" / "r+" refuse an existing node unless ``overwrite=True``,
    "w" replaces what is stored under ``path``, "w-" refuses to write where anything is
    (see ``create``)."""
    overwrite = create_kwargs.pop("overwrite", None)
    if mode is None:
        st, overwrite = resolve_store(store, mode="w", storage_options=storage_options), True
    else:
        st, overwrite = creation_mode(store, path, mode, overwrite, storage_options,
                                      "save_array")
    _store_copy(arr, st, normalize_path(path), zarr_format or 3, overwrite=overwrite,
                **create_kwargs)


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
    where = normalize_path(path)
    for name, data in members.items():  # the group is replaced: none of them may be in it
        check_value(data)  # an h5py dataset reading other files: refused
        refuse_reader_of(data, st, where, f"save of {name!r}")
    g = open_group(st, "w", path, zarr_format=fmt)
    for name, data in members.items():
        _store_copy(data, st, g._full(name), fmt)


def _store_copy(data: Any, store: Any, path: str, zarr_format: int,
                overwrite: bool = True, **create_kwargs: Any) -> Array:
    # ``array`` infers the dtype of object arrays (all str -> variable-length strings)
    return array(data, store=store, name=path, overwrite=overwrite, zarr_format=zarr_format,
                 **create_kwargs)


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
