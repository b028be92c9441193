"""What ``copy`` reads from: a Zarr array, a ``.npy`` file or an HDF5 dataset, behind one
small interface (shape, dtype, chunks, metadata worth keeping, ``source[region]``); or a
whole HDF5/netCDF file or group (``TreeSource``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from chunkstore.api import hdf5
from chunkstore.array.grids import grid_arguments
from chunkstore.array.hdf5_files import allowed_directories, resolve
from chunkstore.cli.errors import CLIError
from chunkstore.cli.stores import open_node
from chunkstore.nodes.creation import DEFAULT_FILL

HDF5_SUFFIXES = (".h5", ".hdf5", ".he5", ".nc")


@dataclass
class Source:
    """An array-like to copy from, with what a copy should keep of it."""

    data: Any
    chunks: tuple[int, ...] | None = None
    zarr_format: int | None = None
    fill_value: Any = DEFAULT_FILL
    attributes: dict[str, Any] = field(default_factory=dict)
    dimension_names: tuple[str, ...] | None = None
    #: attributes holding NaN or infinities, written after the array is created
    late_attributes: dict[str, Any] = field(default_factory=dict)
    #: one line per attribute or member left out (HDF5)
    notices: list[str] = field(default_factory=list)

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


@dataclass
class TreeSource:
    """A whole HDF5 file or group, copied as a group (``hdf5.Plan``)."""

    plan: hdf5.Plan

    @property
    def notices(self) -> list[str]:
        """One line per attribute or member left out."""
        return self.plan.notices

    @property
    def narrays(self) -> int:
        """The number of arrays the copy creates."""
        return sum(isinstance(n, hdf5.ArrayPlan) for n in self.plan.nodes)


def _datasets(group: Any) -> list[str]:
    import h5py
    found: list[str] = []
    group.visititems(lambda name, obj: found.append(name)
                     if isinstance(obj, h5py.Dataset) else None)
    return found


def _is_netcdf(path: str, f: Any) -> bool:
    return path.lower().endswith(".nc") or "_NCProperties" in f.attrs


def open_hdf5(path: str, node: str | None, *, zarr_format: int | None = None,
              allow_external: list[str] | None = None) -> Source | TreeSource:
    """The dataset or group ``node`` of an HDF5 file; without ``node``, the only dataset of
    a plain HDF5 file, else the whole file (a netCDF file always). Other files its bytes
    come from are refused unless inside the ``allow_external`` directories."""
    try:
        import h5py
    except ImportError:
        raise CLIError(f"{path}: reading HDF5 files needs the package 'h5py', which is not "
                       "installed (pip install h5py)") from None
    allowed = allowed_directories(allow_external)
    if not os.path.isfile(path):
        raise CLIError(f"{path}: no such file (expected an HDF5 file)")
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise CLIError(f"{path}: not a readable HDF5 file ({e})") from None
    names = _datasets(f)
    if node is not None:
        obj = resolve(f, node, allowed)
        if obj is None:
            raise CLIError(f"{path}: no dataset or group {node!r} in the HDF5 file (datasets: "
                           f"{', '.join(names[:10]) or 'none'})")
    elif len(names) == 1 and not _is_netcdf(path, f):
        obj = resolve(f, names[0], allowed)
    else:
        obj = f
    if not isinstance(obj, h5py.Group | h5py.Dataset):
        raise CLIError(f"{path}: {node!r} is a named datatype, not data (datasets: "
                       f"{', '.join(names[:10]) or 'none'})")
    plan = hdf5.plan_copy(obj, zarr_format=zarr_format or 3, allow_external=allowed)
    if isinstance(obj, h5py.Group):
        return TreeSource(plan)
    a: Any = plan.nodes[0]  # an ArrayPlan
    return Source(a.data, chunks=a.chunks, fill_value=a.fill_value, attributes=a.attributes,
                  dimension_names=a.dimension_names, late_attributes=a.late_attributes,
                  notices=plan.notices)


def open_source(path: str, node: str | None, options: dict[str, Any] | None, *,
                zarr_format: int | None = None, allow_external: list[str] | None = None
                ) -> Source | TreeSource:
    """What ``copy`` reads: a ``.npy`` file, an HDF5 dataset, file or group (translated for
    Zarr ``zarr_format``), or a Zarr array."""
    suffix = os.path.splitext(path)[1].lower()
    if suffix == ".npy":
        if not os.path.isfile(path):
            raise CLIError(f"{path}: no such file (expected a .npy file)")
        try:
            return Source(np.load(path, mmap_mode="r"))
        except ValueError as e:
            raise CLIError(f"{path}: not a readable .npy file ({e})") from None
    if suffix in HDF5_SUFFIXES:
        return open_hdf5(path, node, zarr_format=zarr_format, allow_external=allow_external)
    array = open_node(path, options, node, kind="array")
    return Source(array, chunks=grid_arguments(array.metadata)[0], zarr_format=array.zarr_format,
                  fill_value=array.fill_value, attributes=array.attrs.asdict(),
                  dimension_names=array.dimension_names)
