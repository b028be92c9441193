"""What ``copy`` reads from: a Zarr array, a ``.npy`` file or an HDF5 dataset, behind one
small interface (shape, dtype, chunks, metadata worth keeping, ``source[region]``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import CLIError
from .stores import open_node

HDF5_SUFFIXES = (".h5", ".hdf5", ".he5", ".nc")


@dataclass
class Source:
    """An array-like to copy from, with what a copy should keep of it."""

    data: Any
    chunks: tuple[int, ...] | None = None
    zarr_format: int | None = None
    fill_value: Any = None
    attributes: dict[str, Any] = field(default_factory=dict)
    dimension_names: tuple[str, ...] | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of the data."""
        return tuple(self.data.shape)

    @property
    def dtype(self) -> np.dtype:
        """The data type of the data."""
        return np.dtype(self.data.dtype)

    def __getitem__(self, region: tuple[slice, ...]) -> Any:
        return self.data[region]


def _json_value(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value.tolist() if hasattr(value, "tolist") else value


def _datasets(group: Any) -> list[str]:
    import h5py
    found: list[str] = []
    group.visititems(lambda name, obj: found.append(name)
                     if isinstance(obj, h5py.Dataset) else None)
    return found


def open_hdf5(path: str, node: str | None) -> Source:
    """The dataset ``node`` of an HDF5 file (the only one if ``node`` is None)."""
    try:
        import h5py
    except ImportError:
        raise CLIError(f"{path}: reading HDF5 files needs the package 'h5py', which is not "
                       "installed (pip install h5py)") from None
    if not os.path.isfile(path):
        raise CLIError(f"{path}: no such file (expected an HDF5 file)")
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise CLIError(f"{path}: not a readable HDF5 file ({e})") from None
    names = _datasets(f)
    if node is None:
        if len(names) != 1:
            raise CLIError(f"{path}: holds {len(names)} datasets, pick one with --node "
                           f"({', '.join(names[:10]) or 'none'})")
        node = names[0]
    obj = f.get(node.strip("/") or "/")
    if obj is None:
        raise CLIError(f"{path}: no dataset {node!r} in the HDF5 file (datasets: "
                       f"{', '.join(names[:10]) or 'none'})")
    if not isinstance(obj, h5py.Dataset):
        raise CLIError(f"{path}: {node!r} is an HDF5 group, not a dataset (datasets: "
                       f"{', '.join(names[:10]) or 'none'})")
    attrs = {k: _json_value(v) for k, v in obj.attrs.items()}
    return Source(obj, chunks=obj.chunks, attributes=attrs)


def open_source(path: str, node: str | None, options: dict[str, Any] | None) -> Source:
    """What ``copy`` reads: a ``.npy`` file, an HDF5 dataset, or a Zarr array."""
    suffix = os.path.splitext(path)[1].lower()
    if suffix == ".npy":
        if not os.path.isfile(path):
            raise CLIError(f"{path}: no such file (expected a .npy file)")
        try:
            return Source(np.load(path, mmap_mode="r"))
        except ValueError as e:
            raise CLIError(f"{path}: not a readable .npy file ({e})") from None
    if suffix in HDF5_SUFFIXES:
        return open_hdf5(path, node)
    array = open_node(path, options, node, kind="array")
    return Source(array, chunks=tuple(array.chunks), zarr_format=array.zarr_format,
                  fill_value=array.fill_value, attributes=array.attrs.asdict(),
                  dimension_names=array.dimension_names)
