"""Creating and deleting members of a group: ``create_array``, ``create_group``, the
``zeros``/``ones``/``full``/``*_like`` spellings, ``require_*`` and ``del g[name]``.
A mixin of :class:`chunkstore.group.group.Group`."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, Self

import numpy as np

from chunkstore.array.array import Array
from chunkstore.array.hdf5_files import check_value
from chunkstore.array.sources import refuse_reader_of
from chunkstore.config import array_config
from chunkstore.errors import NodeTypeError
from chunkstore.group.like_args import like_arguments
from chunkstore.group.members import new_array, shape_and_dtype
from chunkstore.io.copy import copy_into
from chunkstore.metadata.json_io import check_json_value
from chunkstore.metadata.nodes import GroupMetadataV2, GroupMetadataV3, NodeMetadata, is_array
from chunkstore.nodes.documents import delete_node
from chunkstore.nodes.paths import between
from chunkstore.nodes.placement import empty_group, place_node


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"{old} is deprecated (as in zarr-python 3): use {new} instead.",
                  DeprecationWarning, stacklevel=3)


class GroupCreation:
    """The member-creating half of a Group (see the module docstring)."""

    # provided by Group: _store, _path, _read_only, _synchronizer, _cons (a consolidated
    # snapshot or None), zarr_format, name, _check_writable, _full,
    # _node, _wrap
    _store: Any
    _path: str
    _read_only: bool
    _synchronizer: Any
    _cons: Any
    zarr_format: int
    name: str
    if TYPE_CHECKING:
        def _check_writable(self) -> None: ...
        def _full(self, name: str) -> str: ...
        def _node(self, path: str) -> NodeMetadata | None: ...
        def _wrap(self, path: str, node: NodeMetadata, config: Any = None) -> Array | Self: ...

    def _note_created(self, path: str, node: NodeMetadata, overwrite: bool) -> None:
        """Keep an in-memory consolidated snapshot in step with a new member (the stored
        copies were refreshed by the hierarchy layer)."""
        snap = self._cons
        if snap is None:
            return
        if overwrite:
            snap.put(path, None)
        for parent in between(self._path, path)[:-1]:
            if snap.lookup(parent) is None:
                snap.put(parent, empty_group(self.zarr_format))
        snap.put(path, node)

    # -- groups ---------------------------------------------------------------------------------
    def create_group(self, name: str, *, overwrite: bool = False,
                     attributes: dict | None = None) -> Self:
        """A new group ``name`` (nested paths create the groups between; this group is
        known to exist, so only the new path and the groups between are read). An
        existing node there raises ContainsGroupError/ContainsArrayError unless
        ``overwrite``."""
        self._check_writable()
        path = self._full(name)
        attrs = check_json_value(dict(attributes or {}), f"group {path!r}: attributes")
        meta = (GroupMetadataV3(attributes=attrs) if self.zarr_format == 3
                else GroupMetadataV2(attributes=attrs))
        place_node(self._store, path, meta, overwrite=overwrite, within=self._path,
                   synchronizer=self._synchronizer)
        self._note_created(path, meta, overwrite)
        return type(self)(self._store, path, meta, read_only=self._read_only,  # type: ignore[call-arg]
                          consolidated=self._cons, synchronizer=self._synchronizer)

    def require_group(self, name: str, *, overwrite: bool = False) -> Self:
        """The group ``name``, created if missing; an array there raises ContainsArrayError."""
        node = self._node(self._full(name))
        if node is None or overwrite:
            return self.create_group(name, overwrite=overwrite)
        if is_array(node):
            raise NodeTypeError(f"Incompatible object: {self._full(name)!r} in {self._store!r} "
                                "is an array, not a group")
        return self._wrap(self._full(name), node)  # type: ignore[return-value]

    def require_groups(self, *names: str) -> tuple[Self, ...]:
        """``require_group`` for each name."""
        return tuple(self.require_group(name) for name in names)

    # -- arrays ---------------------------------------------------------------------------------
    def create_array(self, name: str, *, shape: Any = None, dtype: Any = None, data: Any = None,
                     write_data: bool = True, **kwargs: Any) -> Array:
        """A new array ``name`` in this group (arguments as ``chunkstore.create_array``,
        ``data=`` included; ``write_data=False`` takes only its shape and dtype).

        A direct child costs one batched existence check of its path and one write."""
        self._check_writable()
        data, shape, dtype = shape_and_dtype(data, shape, dtype, f"create_array({name!r})")
        if kwargs.get("zarr_format") not in (None, self.zarr_format):
            raise ValueError(f"cannot create a zarr_format={kwargs['zarr_format']} array in a "
                             f"zarr_format={self.zarr_format} group: it would not be a member")
        kwargs["zarr_format"] = self.zarr_format
        kwargs.setdefault("synchronizer", self._synchronizer)
        kwargs.pop("storage_options", None)
        path = self._full(name)
        if data is not None:  # never onto (or over) its own source: before any delete
            check_value(data)  # an h5py dataset reading other files: refused
            refuse_reader_of(data, self._store, path, f"create_array({name!r}, data=...)")
        arr = new_array(self._store, path, shape=shape, dtype=dtype, within=self._path,
                        **kwargs)
        self._note_created(path, arr.metadata, bool(kwargs.get("overwrite")))
        if self._cons is not None:
            snap = self._cons
            arr._on_metadata_change = lambda meta: snap.put(path, meta)
        if data is not None and write_data:
            copy_into(data, arr)
        return arr

    def create(self, name: str, **kwargs: Any) -> Array:
        """zarr-python's ``Group.create``: ``create_array``."""
        return self.create_array(name, **kwargs)

    def array(self, name: str, data: Any = None, **kwargs: Any) -> Array:
        """Deprecated (zarr-python 3): ``create_array(name, data=...)``."""
        _deprecated("Group.array", "Group.create_array")
        return self.create_array(name, data=data, **kwargs)

    def create_dataset(self, name: str, **kwargs: Any) -> Array:
        """Deprecated (zarr-python 3; the seeds' and h5py's spelling): ``create_array``
        from ``data=`` or ``shape=``/``dtype=``."""
        _deprecated("Group.create_dataset", "Group.create_array")
        return self.create_array(name, **kwargs)

    def require_array(self, name: str, *, shape: Any, dtype: Any = None, exact: bool = False,
                      **kwargs: Any) -> Array:
        """The array ``name`` if it exists with this shape (and a dtype its data casts to
        safely, or exactly this dtype with ``exact``: as zarr-python and h5py), else a new
        one; a mismatch raises TypeError ("Incompatible ...") naming the array.
        ``config=`` (the handle's settings) applies to an existing array too."""
        options = array_config(kwargs.get("config"), kwargs.get("write_empty_chunks"))
        node = self._node(self._full(name))
        if node is None:
            if dtype is not None:
                kwargs["dtype"] = dtype
            return self.create_array(name, shape=shape, **kwargs)
        if not is_array(node):
            raise NodeTypeError(f"Incompatible object: {self._full(name)!r} in {self._store!r} "
                                "is a group, not an array")
        arr: Array = self._wrap(self._full(name), node, options)  # type: ignore[assignment]
        want_shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
        if arr.shape != want_shape:
            raise TypeError(f"Incompatible shape: array {arr.name!r} has shape {arr.shape}, "
                            f"not {want_shape}")
        if dtype is not None:
            want = np.dtype(dtype)
            ok = arr.dtype == want if exact else np.can_cast(arr.dtype, want)
            if not ok:
                raise TypeError(f"Incompatible dtype: array {arr.name!r} has dtype "
                                f"{arr.dtype}, not {want}")
        return arr

    def require_dataset(self, name: str, *, shape: Any, **kwargs: Any) -> Array:
        """Deprecated (zarr-python 3; h5py's spelling): ``require_array``."""
        _deprecated("Group.require_dataset", "Group.require_array")
        return self.require_array(name, shape=shape, **kwargs)

    def __setitem__(self, name: str, data: Any) -> None:
        """``g[name] = ndarray`` stores ``data`` as the array ``name`` (replacing it)."""
        self.create_array(name, data=data, overwrite=True)

    def zeros(self, name: str, *, shape: Any, **kwargs: Any) -> Array:
        """A new array of zeros (nothing is written)."""
        return self.create_array(name, shape=shape, fill_value=0, **kwargs)

    def ones(self, name: str, *, shape: Any, **kwargs: Any) -> Array:
        """A new array of ones (fill_value=1, nothing is written)."""
        return self.create_array(name, shape=shape, fill_value=1, **kwargs)

    def full(self, name: str, *, shape: Any, fill_value: Any, **kwargs: Any) -> Array:
        """A new array of ``fill_value`` (nothing is written)."""
        return self.create_array(name, shape=shape, fill_value=fill_value, **kwargs)

    def empty(self, name: str, *, shape: Any, **kwargs: Any) -> Array:
        """A new array whose unwritten chunks read as the fill value."""
        return self.create_array(name, shape=shape, **kwargs)

    def _like(self, data: Any, kwargs: dict[str, Any], keep_fill: bool = False
              ) -> dict[str, Any]:
        """Arguments for a member like ``data`` (``like_args``: its shape, dtype and
        chunks, and of an Array of this group's format, its order and codecs)."""
        kwargs.setdefault("zarr_format", self.zarr_format)
        return like_arguments(data, kwargs, keep_fill=keep_fill)

    def zeros_like(self, name: str, data: Any, **kwargs: Any) -> Array:
        """Zeros with the shape, dtype and chunks of ``data`` (and, of an Array, what
        ``chunkstore.zeros_like`` keeps)."""
        return self.zeros(name, **self._like(data, kwargs))

    def ones_like(self, name: str, data: Any, **kwargs: Any) -> Array:
        """Ones shaped like ``data`` (as ``zeros_like``)."""
        return self.ones(name, **self._like(data, kwargs))

    def empty_like(self, name: str, data: Any, **kwargs: Any) -> Array:
        """An empty array shaped like ``data`` (as ``zeros_like``), with its fill value."""
        return self.empty(name, **self._like(data, kwargs, keep_fill=True))

    def full_like(self, name: str, data: Any, **kwargs: Any) -> Array:
        """``fill_value`` (default: ``data``'s, if an Array) everywhere, shaped like ``data``."""
        kwargs.setdefault("fill_value", getattr(data, "fill_value", None))
        return self.full(name, **self._like(data, kwargs))

    # -- deleting -------------------------------------------------------------------------------
    def __delitem__(self, name: str) -> None:
        """Remove the member and everything below it from the store (and from the
        consolidated copies above it)."""
        self._check_writable()
        path = self._full(name)
        node = self._node(path)
        if node is None:
            raise KeyError(f"no member {name!r} in group {self.name!r} of {self._store!r}")
        delete_node(self._store, path, zarr_format=node.zarr_format,
                    synchronizer=self._synchronizer)
        if self._cons is not None:
            self._cons.put(path, None)

