"""HDF5 and netCDF-4 sources of a copy (h5py files, groups and datasets): a plan of the
arrays and groups to create, checked and translated before anything is written, and its
writing. ``copy`` and the command line's ``copy``/``convert`` use it.

Files: see ``hdf5_files`` (external storage, external links and virtual datasets are
refused unless ``allow_external`` names the directories they may read).

Metadata, with netCDF-4's conventions as xarray reads them from a ``.nc`` file and writes
them to Zarr, so that ``xr.open_zarr`` of the copy gives the Dataset ``xr.open_dataset``
gives of the file:

* dimension scales (and h5py's dimension labels) name the dimensions: v3
  ``dimension_names``, v2 the ``_ARRAY_DIMENSIONS`` attribute; netCDF's dimension-only
  datasets ("This is a netCDF dimension but not a netCDF variable") are not copied;
* ``_FillValue`` becomes the fill value; in v3 it stays an attribute as xarray writes it
  (a float as the base64 of its little-endian float64), in v2 the fill value is it;
  without one, a v2 fill value is ``null`` (no value is masked) and a v3 one HDF5's;
* the attributes the Dimension Scale API and netCDF-4 keep for themselves
  (``DIMENSION_LIST``, ``REFERENCE_LIST``, ``_Netcdf4Dimid``, ``_NCProperties``...) go;
  bytes become str, arrays lists (a length-1 array its item, as netCDF readers give
  it), NaN and infinities are written as zarr-python writes them (bare ``NaN``,
  ``Infinity``); an attribute with no JSON form (an object reference, a compound or
  complex value) is skipped with a notice naming it;
* variable-length strings are copied as ``str``.
"""

from __future__ import annotations

import base64
import math
import posixpath
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from chunkstore.api.creation import create_array
from chunkstore.api.opening import open_array, open_group
from chunkstore.array.hdf5_files import (
    allowed_directories,
    check_dataset,
    h5py_module,
    is_hdf5,
    member,
)
from chunkstore.io.copy import copy_into
from chunkstore.metadata.json_io import check_json_value
from chunkstore.nodes.creation import DEFAULT_FILL
from chunkstore.nodes.documents import update_node

__all__ = ["ArrayPlan", "GroupPlan", "Plan", "add_late_attributes", "is_hdf5", "plan_copy",
           "write_plan"]

#: the Dimension Scale API's attributes: turned into dimension names
_SCALE_ATTRS = frozenset({"DIMENSION_LIST", "REFERENCE_LIST", "DIMENSION_LABELS"})
#: netCDF-4's own attributes, which netCDF readers hide
_NETCDF_ATTRS = frozenset({"_Netcdf4Coordinates", "_Netcdf4Dimid", "_nc3_strict",
                           "_NCProperties", "_SuperblockVersion", "_IsNetcdf4"})
_DIMENSION_ONLY = b"This is a netCDF dimension but not a netCDF variable"
_NON_COORD = "_nc4_non_coord_"  # netCDF-C's name of a variable named like a dimension
_SKIP = object()


class UntranslatableError(TypeError):
    """A dataset whose values Zarr cannot hold (object references, variable-length
    sequences, no shape): an error for the dataset itself, a notice in a group."""


@dataclass
class ArrayPlan:
    """A dataset to copy as an array: what to create, and ``data[region]`` to read it."""

    path: str
    data: Any
    dtype: Any
    chunks: tuple[int, ...] | None
    fill_value: Any
    attributes: dict[str, Any]
    late_attributes: dict[str, Any]
    dimension_names: tuple[str | None, ...] | None

    @property
    def shape(self) -> tuple[int, ...]:
        """The dataset's shape."""
        return tuple(self.data.shape)


@dataclass
class GroupPlan:
    """A group to create (``late_attributes``: those written after, see ``Plan``)."""

    path: str
    attributes: dict[str, Any]
    late_attributes: dict[str, Any]


@dataclass
class Plan:
    """What a copy creates, groups before their members (the first node is the copied
    object itself, path ""), and a notice per attribute or member left out.
    ``late_attributes`` hold NaN or infinities, which chunkstore refuses in a value it is
    given: they are written into the node's document after it is created."""

    nodes: list[ArrayPlan | GroupPlan]
    notices: list[str] = field(default_factory=list)


class _Reader:
    """An HDF5 dataset read as its Zarr dtype (variable-length strings as str)."""

    def __init__(self, dset: Any, dtype: Any, strings: bool, where: str) -> None:
        self._dset = dset.asstr() if strings else dset
        self._where = where
        self.shape = tuple(dset.shape)
        self.dtype = dtype

    def __getitem__(self, region: Any) -> np.ndarray:
        try:
            return np.asarray(self._dset[region])
        except UnicodeDecodeError as e:
            raise ValueError(f"{self._where}: a string is not UTF-8 text ({e})") from None


def plan_copy(source: Any, *, zarr_format: int = 3, allow_external: Any = None) -> Plan:
    """The plan of a copy of the h5py group or dataset ``source`` as Zarr ``zarr_format``:
    every file it reads checked (``ExternalDataError`` unless allowed: see ``hdf5_files``),
    every dataset and attribute translated, before anything is written."""
    h5py = h5py_module()
    allowed = allowed_directories(allow_external)
    plan = Plan([])
    if isinstance(source, h5py.Dataset):
        plan.nodes.append(_array_plan(source, "", allowed, zarr_format, plan.notices))
    else:
        _add_group(source, "", allowed, zarr_format, plan, ())
    return plan


def _add_group(group: Any, path: str, allowed: tuple[str, ...], zarr_format: int, plan: Plan,
               above: tuple[int, ...]) -> None:
    h5py = h5py_module()
    where = f"{group.file.filename}: group {group.name!r}"
    attrs, late = _attributes(group, where, plan.notices)
    plan.nodes.append(GroupPlan(path, attrs, late))
    above = above + (hash(group.id),)
    for name in group:
        obj = member(group, name, allowed)
        label = f"{where}: member {name!r}"
        if obj is None:
            plan.notices.append(f"{label} skipped: a link to nothing")
            continue
        child = posixpath.join(path, _zarr_name(name)) if path else _zarr_name(name)
        if isinstance(obj, h5py.Dataset):
            if _dimension_only(obj):
                continue
            try:
                plan.nodes.append(_array_plan(obj, child, allowed, zarr_format, plan.notices))
            except UntranslatableError as e:
                plan.notices.append(f"{e}; skipped")
        elif isinstance(obj, h5py.Group):
            if hash(obj.id) in above:
                plan.notices.append(f"{label} skipped: a link to a group that holds it")
            else:
                _add_group(obj, child, allowed, zarr_format, plan, above)
        else:
            plan.notices.append(f"{label} skipped: a named HDF5 datatype, not data")


def _zarr_name(name: str) -> str:
    return name[len(_NON_COORD):] if name.startswith(_NON_COORD) else name


def _attr(obj: Any, key: str, default: Any = None) -> Any:
    try:
        return obj.attrs.get(key, default)
    except (TypeError, ValueError, OSError, KeyError):
        return default


def _bytes_attr(obj: Any, key: str) -> bytes:
    value = _attr(obj, key, b"")
    return value.encode("utf-8", "replace") if isinstance(value, str) else (
        value if isinstance(value, bytes) else b"")


def _is_scale(obj: Any) -> bool:
    return _bytes_attr(obj, "CLASS") == b"DIMENSION_SCALE"


def _dimension_only(dset: Any) -> bool:
    """A netCDF dimension without a variable (its dataset holds no data)."""
    return _is_scale(dset) and _bytes_attr(dset, "NAME").startswith(_DIMENSION_ONLY)


def _array_plan(dset: Any, path: str, allowed: tuple[str, ...], zarr_format: int,
                notices: list[str]) -> ArrayPlan:
    where = f"{dset.file.filename}: dataset {dset.name!r}"
    check_dataset(dset, allowed)
    if dset.shape is None:
        raise UntranslatableError(f"{where}: an empty HDF5 dataset (no shape), which Zarr "
                                  "cannot hold")
    dtype, strings = _zarr_dtype(dset, where)
    attrs, late = _attributes(dset, where, notices)
    attrs.pop("_FillValue", None)
    late.pop("_FillValue", None)
    fill, fill_attr = _fill_value(dset, dtype, zarr_format, where, notices)
    if fill_attr is not _SKIP:
        attrs["_FillValue"] = fill_attr
    names = _dimension_names(dset)
    if zarr_format == 2:
        if all(isinstance(n, str) for n in names):
            attrs["_ARRAY_DIMENSIONS"] = list(names)
        dims = None
    else:
        dims = names if any(n is not None for n in names) or not names else None
    return ArrayPlan(path, _Reader(dset, dtype, strings, where), dtype, dset.chunks, fill,
                     attrs, late, dims)


def _zarr_dtype(dset: Any, where: str) -> tuple[Any, bool]:
    """The Zarr dtype of a dataset, and whether it holds variable-length strings."""
    h5py = h5py_module()
    dt = dset.dtype
    text = h5py.check_string_dtype(dt)
    if text is not None and text.length is None:
        return np.dtypes.StringDType(), True
    if dt.kind == "O" or h5py.check_vlen_dtype(dt) is not None:
        raise UntranslatableError(f"{where}: its values (HDF5 object references or "
                                  "variable-length sequences) have no Zarr data type")
    return (dt if dt.names is not None else np.dtype(dt.str)), False


def _dimension_names(dset: Any) -> tuple[str | None, ...]:
    """Each axis's name: the dataset's own for the first axis of a dimension scale, else
    that of the first scale attached to the axis, else its label; None if none."""
    names: list[str | None] = []
    for axis in range(dset.ndim):
        name = None
        if axis == 0 and _is_scale(dset):
            name = posixpath.basename(dset.name or "") or None
        else:
            try:
                scales = dset.dims[axis].values()
                label = dset.dims[axis].label
            except (TypeError, ValueError, OSError, KeyError, RuntimeError):
                scales, label = [], ""
            if scales and scales[0].name:
                name = posixpath.basename(scales[0].name)
            elif label:
                name = str(label)
        names.append(name)
    return tuple(names)


def _fill_value(dset: Any, dtype: Any, zarr_format: int, where: str, notices: list[str]
                ) -> tuple[Any, Any]:
    """``(fill value, _FillValue attribute or _SKIP)`` of a dataset."""
    raw = _attr(dset, "_FillValue")
    value = _SKIP
    if raw is not None:
        value = _fill_scalar(raw, dtype)
        if value is _SKIP:
            notices.append(f"{where}: attribute '_FillValue' skipped: {raw!r} is not one "
                           f"value of the dataset's type {dtype}")
    if value is _SKIP:
        if zarr_format == 2:
            return None, _SKIP
        default = dset.fillvalue if np.dtype(dtype).kind in "biuf" else None
        return (DEFAULT_FILL if default is None else default.item()), _SKIP
    return value, (_SKIP if zarr_format == 2 else _xarray_fill_attribute(value, dtype))


def _fill_scalar(raw: Any, dtype: Any) -> Any:
    """The one value of a ``_FillValue`` attribute as a scalar of ``dtype``, or _SKIP."""
    array = np.asarray(raw)
    if array.size != 1:
        return _SKIP
    item = array.reshape(-1)[0]
    if np.dtype(dtype).kind == "T":
        value, why = _json_value(item)
        return value if why is None and isinstance(value, str) else _SKIP
    try:
        with np.errstate(all="ignore"):
            cast = np.asarray(item).astype(dtype)
        same = cast == item or (cast.dtype.kind in "fc" and bool(np.isnan(cast))
                                and bool(np.isnan(item)))
    except (TypeError, ValueError):
        return _SKIP
    return cast[()].item() if same else _SKIP


def _b64_float(x: float) -> str:
    return base64.standard_b64encode(struct.pack("<d", x)).decode()


def _xarray_fill_attribute(value: Any, dtype: Any) -> Any:
    """``_FillValue`` as xarray's Zarr engine writes it in a v3 array's attributes."""
    kind = np.dtype(dtype).kind
    if kind == "f":
        return _b64_float(float(value))
    if kind == "c":
        return [_b64_float(value.real), _b64_float(value.imag)]
    if kind == "S":
        return base64.standard_b64encode(value).decode()
    if kind == "b":
        return bool(value)
    return int(value) if kind in "iu" else value


def _attributes(obj: Any, where: str, notices: list[str]) -> tuple[dict, dict]:
    """``(attributes, late attributes)`` of an h5py object as JSON (``late``: those with
    NaN or infinities); each attribute with no JSON form gets a notice."""
    attrs: dict[str, Any] = {}
    late: dict[str, Any] = {}
    scale = _is_scale(obj)
    for key in obj.attrs:
        if key in _SCALE_ATTRS or key in _NETCDF_ATTRS or (scale and key in ("CLASS", "NAME")):
            continue
        try:
            raw = obj.attrs[key]
        except (TypeError, ValueError, OSError, KeyError) as e:
            notices.append(f"{where}: attribute {key!r} skipped: h5py cannot read it ({e})")
            continue
        value, why = _json_value(raw)
        if why is not None:
            notices.append(f"{where}: attribute {key!r} skipped: {why}")
        elif _finite(value):
            attrs[key] = check_json_value(value, f"{where}: attribute {key!r}")
        else:
            late[key] = value
    return attrs, late


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


def _json_value(raw: Any) -> tuple[Any, str | None]:
    """``(JSON value, None)`` for an attribute's value, or ``(None, why not)``."""
    h5py = h5py_module()
    if isinstance(raw, h5py.Empty):
        return [], None
    if isinstance(raw, np.generic):
        if raw.dtype.kind in "biufSU":
            return _json_value(raw.item())
        return None, f"a {raw.dtype} value, which has no JSON form"
    if isinstance(raw, str | bool | int | float):
        return raw, None
    if isinstance(raw, bytes):
        try:
            return raw.decode("utf-8"), None
        except UnicodeDecodeError:
            return None, "bytes that are not UTF-8 text"
    if isinstance(raw, h5py.h5r.Reference | h5py.h5r.RegionReference):
        return None, "an HDF5 object reference, which has no JSON form"
    if isinstance(raw, np.ndarray):
        if raw.dtype.names is not None:
            return None, f"a compound value ({raw.dtype}), which has no JSON form"
        if raw.dtype.kind in "biuf":
            items = raw.reshape(-1).tolist()
        elif raw.dtype.kind in "SUO":
            items = []
            for item in raw.reshape(-1):
                value, why = _json_value(item)
                if why is not None:
                    return None, why
                items.append(value)
        else:
            return None, f"a {raw.dtype} value, which has no JSON form"
        if raw.shape == (1,):
            return items[0], None
        nested = np.empty(len(items), dtype=object)
        nested[:] = items
        return nested.reshape(raw.shape).tolist(), None
    return None, f"a {type(raw).__name__} value, which has no JSON form"


def write_plan(plan: Plan, store: Any, path: str, *, zarr_format: int,
               overwrite: bool = False, chunks: Any = None, max_bytes: int | None = None,
               create_kwargs: dict[str, Any] | None = None,
               on_array: Callable[[int, int, int], None] | None = None) -> Any:
    """Create what ``plan`` describes at ``store`` (a Store) / ``path`` and copy the data,
    block by block; returns the Array or Group. ``chunks`` (the copied object's, if it
    is a dataset) and ``create_kwargs`` (``compressors``, ``fill_value``...) override the
    plan's; ``on_array(i, n, bytes copied)`` after each array."""
    kwargs = {**(create_kwargs or {}), "zarr_format": zarr_format}
    root, *members = plan.nodes
    arrays = [n for n in plan.nodes if isinstance(n, ArrayPlan)]
    done: list[int] = [0, 0]

    def write_array(node: ArrayPlan, at: str, chunks: Any, overwrite: bool) -> Any:
        own: dict[str, Any] = {"attributes": node.attributes,
                               "dimension_names": node.dimension_names}
        if node.fill_value is not DEFAULT_FILL:
            own["fill_value"] = node.fill_value
        a = create_array(store, at, shape=node.shape, dtype=node.dtype, chunks=chunks,
                         overwrite=overwrite, **{**own, **kwargs})
        copy_into(node.data, a, max_bytes)
        done[0] += 1
        done[1] += math.prod(node.shape) * np.dtype(node.dtype).itemsize
        if on_array is not None:
            on_array(done[0], len(arrays), done[1])
        return a

    if isinstance(root, ArrayPlan):
        a = write_array(root, path, root.chunks if chunks is None else chunks, overwrite)
        add_late_attributes(store, a.path, root.late_attributes, zarr_format, "array")
        return open_array(store, mode="r+", path=a.path) if root.late_attributes else a
    g = open_group(store, "w" if overwrite else "w-", path, zarr_format=zarr_format,
                   attributes=root.attributes)
    for node in members:
        at = posixpath.join(g.path, node.path) if g.path else node.path
        if isinstance(node, GroupPlan):
            open_group(store, "w-", at, zarr_format=zarr_format, attributes=node.attributes)
        else:
            write_array(node, at, node.chunks, False)
    for node in plan.nodes:
        at = posixpath.join(g.path, node.path) if g.path else node.path
        add_late_attributes(store, at.strip("/"), node.late_attributes, zarr_format,
                  "array" if isinstance(node, ArrayPlan) else "group")
    return open_group(store, "r+", g.path) if any(n.late_attributes for n in plan.nodes) else g


def add_late_attributes(store: Any, path: str, late: dict[str, Any], zarr_format: int, kind: str
              ) -> None:
    """Write attributes holding NaN or infinities (bare ``NaN``, as zarr-python writes
    them) into the document of the node at ``path``."""
    if late:
        update_node(store, path,
                    lambda m: m.replace(attributes={**m.attributes, **late}),
                    zarr_format=zarr_format, kind=kind)
