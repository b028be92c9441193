"""Groups: the hierarchy of arrays and groups. Opening and creating a group by mode,
member access and listing, creating and deleting members, attributes, tree and info.
Helpers beside it: ``opening`` (modes, the group's document, its consolidated snapshot),
``members`` (new nodes' metadata), ``like_args`` (``*_like``), ``tree`` (drawing)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any, Self

import numpy as np

from chunkstore.array.array import Array
from chunkstore.array.hdf5_files import check_value
from chunkstore.array.sources import refuse_reader_of
from chunkstore.config import array_config
from chunkstore.errors import (
    ArrayNotFoundError,
    ContainsArrayError,
    ContainsGroupError,
    GroupNotFoundError,
    NodeTypeError,
    ReadOnlyError,
)
from chunkstore.group.like_args import like_arguments
from chunkstore.group.members import group_metadata, new_array, shape_and_dtype
from chunkstore.group.opening import check_mode, consolidated_of, load_group
from chunkstore.group.tree import TreeView
from chunkstore.io.copy import copy_into
from chunkstore.metadata import consolidated as cons
from chunkstore.metadata.nodes import (
    GroupMetadata,
    NodeMetadata,
    is_array,
    join_path,
    parse_node,
    where_prefix,
)
from chunkstore.metadata.v3 import GroupMetadataV3
from chunkstore.nodes.attributes import Attributes
from chunkstore.nodes.consolidated import Consolidated
from chunkstore.nodes.consolidated_view import consolidated_field
from chunkstore.nodes.documents import delete_node, try_read_node, update_node
from chunkstore.nodes.info import InfoTable
from chunkstore.nodes.paths import between, normalize_path
from chunkstore.nodes.placement import empty_group, place_node
from chunkstore.nodes.reading import META_NAMES as _META_NAMES
from chunkstore.nodes.reading import read_documents, read_nodes, walk_descendants
from chunkstore.storage.base import Store
from chunkstore.storage.reference import ObjectRef, store_ref
from chunkstore.storage.resolve import resolve_store


class MemberCount(int):
    """The number of direct members; also callable, as zarr-python's
    ``Group.nmembers(max_depth=0)`` method (``max_depth=None``: the whole subtree)."""

    _group: Group

    def __new__(cls, value: int, group: Group) -> MemberCount:
        self = super().__new__(cls, value)
        self._group = group
        return self

    def __call__(self, max_depth: int | None = 0) -> int:
        if max_depth == 0:
            return int(self)
        return len(self._group._descendants(_checked_depth(max_depth)))


class Group:
    """A Zarr group (v2 or v3). Create with ``chunkstore.group`` / ``open_group``.

    >>> import chunkstore as cs
    >>> g = cs.group()
    >>> a = g.create_array("x/y", shape=(4,), dtype="i2")
    >>> sorted(g.group_keys()), g["x/y"].shape
    (['x'], (4,))
    """

    def __init__(self, store: Store, path: str = "", metadata: GroupMetadata | None = None, *,
                 read_only: bool = False, consolidated: Consolidated | None = None,
                 synchronizer: Any = None) -> None:
        self._store, self._path = store, path
        self._read_only = bool(read_only or store.read_only)
        self._meta = metadata if metadata is not None else load_group(store, path)
        self._cons = consolidated
        self._synchronizer = synchronizer

    # -- opening and creating (by mode) -------------------------------------------------------
    @classmethod
    def open(cls, store: Any, zarr_format: int | None = None, *, path: str | None = None,
             mode: str = "r+", use_consolidated: bool | None = None,
             storage_options: dict | None = None, synchronizer: Any = None) -> Self:
        """Open the existing group at ``path`` of ``store`` (zarr-python's
        ``Group.open``; ``zarr_format`` None reads either format)."""
        check_mode(mode)
        st = resolve_store(store, mode=mode, storage_options=storage_options)
        return cls._open_at(st, mode, normalize_path(path), zarr_format=zarr_format,
                            use_consolidated=use_consolidated, synchronizer=synchronizer)

    @classmethod
    def from_store(cls, store: Any, *, attributes: dict | None = None, zarr_format: int = 3,
                   overwrite: bool = False, path: str | None = None,
                   storage_options: dict | None = None) -> Self:
        """Create a new group at ``path`` of ``store`` (zarr-python's ``Group.from_store``);
        an existing node there raises ContainsGroupError/ContainsArrayError unless
        ``overwrite``."""
        st = resolve_store(store, mode="w" if overwrite else "a", storage_options=storage_options)
        return cls._create(st, normalize_path(path), zarr_format, attributes, overwrite, None)

    @classmethod
    def _create(cls, store: Store, path: str, zarr_format: int, attributes: dict | None,
                overwrite: bool, synchronizer: Any, checked: bool = False) -> Self:
        if zarr_format not in (2, 3):
            raise ValueError(f"{where_prefix(store, path)}: zarr_format must be 2 or 3, got "
                             f"{zarr_format!r}")
        meta = group_metadata(zarr_format, attributes, where_prefix(store, path))
        place_node(store, path, meta, overwrite=overwrite, checked=checked,
                   synchronizer=synchronizer)
        return cls(store, path, meta, synchronizer=synchronizer)

    @classmethod
    def _open_at(cls, st: Store, mode: str, path: str, *, zarr_format: int | None = None,
                 attributes: dict | None = None, use_consolidated: bool | None = None,
                 synchronizer: Any = None) -> Self:
        """``open_group`` on a resolved store and a normalized path: one read of the
        group's documents (``.zmetadata`` with the v2 ones), then by ``mode``."""
        docs: dict[str, bytes | None] = {}
        if mode not in ("w", "w-"):
            extra = () if use_consolidated is False else (cons.V2_KEY,)
            docs = read_documents(st, [path], zarr_format, "group", extra)[path]
        return cls._from_documents(st, mode, path, docs, zarr_format=zarr_format,
                                   attributes=attributes, use_consolidated=use_consolidated,
                                   synchronizer=synchronizer)

    @classmethod
    def _from_documents(cls, st: Store, mode: str, path: str, docs: dict[str, bytes | None], *,
                        zarr_format: int | None = None, attributes: dict | None = None,
                        use_consolidated: bool | None = None, synchronizer: Any = None
                        ) -> Self:
        """Open (or by ``mode`` create) the group at ``path`` once its documents are read
        (in ``zarr_format``, with ``.zmetadata`` for a v2 group; ignored in "w"/"w-")."""
        if mode in ("w", "w-"):
            return cls._create(st, path, zarr_format or 3, attributes, mode == "w",
                               synchronizer)
        node = parse_node(docs, where_prefix(st, path), zarr_format)
        if node is None:
            if mode in ("r", "r+"):
                raise GroupNotFoundError(f"no group at path {path or '/'!r} in {st!r}")
            return cls._create(st, path, zarr_format or 3, attributes, False, synchronizer,
                               checked=zarr_format is None)
        if is_array(node):
            raise NodeTypeError(f"path {path or '/'!r} in {st!r} is an array, not a group")
        snapshot = consolidated_of(st, path, node, docs.get(cons.V2_KEY),  # type: ignore[arg-type]
                                   use_consolidated)
        return cls(st, path, node, read_only=mode == "r",  # type: ignore[arg-type]
                   consolidated=snapshot, synchronizer=synchronizer)

    # -- properties ---------------------------------------------------------------------------
    store = property(lambda self: self._store, doc="The Store holding the group.")
    path = property(lambda self: self._path, doc="Path of the group within the store.")
    read_only = property(lambda self: self._read_only, doc="True when writes are refused.")

    @property
    def metadata(self) -> GroupMetadata:
        """The parsed group metadata. Of a v3 group, ``consolidated_metadata`` is a
        ``ConsolidatedMetadata`` (its stored JSON object, with zarr-python's attributes
        ``metadata``, ``flattened_metadata``, ``kind``...), or None when the group has
        none (a group reached through a consolidated parent shows its part of it)."""
        meta = self._meta
        if not isinstance(meta, GroupMetadataV3):
            return meta
        below = self._cons.below(self._path) if self._cons is not None else None
        field = consolidated_field(meta, below)
        if field is meta.consolidated_metadata:
            return meta
        return meta.replace(consolidated_metadata=field)

    synchronizer = property(lambda self: self._synchronizer, doc="Locks for writers, or None.")
    zarr_format = property(lambda self: self._meta.zarr_format, doc="2 or 3.")
    name = property(lambda self: "/" + self._path, doc="Absolute path, e.g. '/a/b'.")
    basename = property(lambda self: self._path.rsplit("/", 1)[-1], doc="Last path part.")

    @property
    def attrs(self) -> Attributes:
        """User attributes; each change is an atomic read-modify-write of the stored ones
        (consolidated copies above follow)."""
        def mutate(fn: Any) -> dict[str, Any]:
            self._check_writable()
            meta = update_node(self._store, self._path,
                               lambda m: m.replace(attributes=fn(m.attributes)),
                               synchronizer=self._synchronizer, zarr_format=self.zarr_format,
                               kind="group")
            self._meta = meta  # type: ignore[assignment]
            if self._cons is not None:
                self._cons.put(self._path, meta)
            return meta.attributes
        return Attributes(lambda: self._meta.attributes, mutate, f"group {self.name!r}")

    def update_attributes(self, new_attributes: dict[str, Any]) -> Group:
        """Merge ``new_attributes`` into the attributes (one atomic update); returns self."""
        self.attrs.update(new_attributes)
        return self

    def __repr__(self) -> str:
        return f"<chunkstore.Group {self.name!r} zarr_format={self.zarr_format}>"

    def __reduce__(self):
        return (_reopen, (self._store, self._path, self._read_only))

    def __eq__(self, other: object) -> bool:
        """Same kind of node at the same path of the same store location."""
        return isinstance(other, Group) and other._ref() == self._ref()

    def __hash__(self) -> int:
        return hash(("group", self._ref()))

    def _ref(self) -> ObjectRef:
        """The node's object reference: equal for every handle on it, whatever root it
        was opened from (a group handle's member and a handle on the array itself)."""
        return store_ref(self._store).child(self._path)

    def _check_writable(self) -> None:
        if self._read_only:
            raise ReadOnlyError(f"group {self.name!r} in {self._store!r} is read-only")

    # -- member access ------------------------------------------------------------------------
    def _full(self, name: str) -> str:
        rel = normalize_path(name)
        if not rel:
            raise KeyError(f"empty member name in group {self.name!r}")
        return join_path(self._path, rel)

    def _node(self, path: str) -> NodeMetadata | None:
        if self._cons is not None:
            return self._cons.lookup(path)
        return try_read_node(self._store, path, self.zarr_format)

    def _wrap(self, path: str, node: NodeMetadata, config: Any = None) -> Array | Group:
        """The member at ``path`` (an array with the settings ``config``, default: those
        of ``chunkstore.config``)."""
        if is_array(node):
            arr = Array(self._store, path, node, read_only=self._read_only,  # type: ignore[arg-type]
                        synchronizer=self._synchronizer, config=config)
            if self._cons is not None:  # the array's own changes keep the snapshot current
                snap = self._cons
                arr._on_metadata_change = lambda meta: snap.put(path, meta)
                arr._from_snapshot = not self._read_only  # checked before its first write
            return arr
        return Group(self._store, path, node, read_only=self._read_only,  # type: ignore[arg-type]
                     consolidated=self._cons, synchronizer=self._synchronizer)

    def __getitem__(self, name: str) -> Array | Group:
        path = self._full(name)
        node = self._node(path)
        if node is None:
            raise KeyError(f"no member {name!r} in group {self.name!r} of {self._store!r}")
        return self._wrap(path, node)

    def get(self, name: str, default: Any = None) -> Any:
        """The member ``name``, or ``default`` when there is none."""
        try:
            return self[name]
        except KeyError:
            return default

    def get_array(self, path: str) -> Array:
        """The array at ``path`` below this group (``"sub/x"`` reaches into subgroups):
        ArrayNotFoundError when nothing is there, ContainsGroupError when a group is (as
        zarr-python's ``Group.get_array``)."""
        full = self._full(path)
        node = self._node(full)
        if node is None:
            raise ArrayNotFoundError(f"No array found in store {self._store!r} at path "
                                     f"{full!r} (member {path!r} of group {self.name!r})")
        if not is_array(node):
            raise ContainsGroupError(f"A group exists in store {self._store!r} at path "
                                     f"{full!r}, not an array")
        return self._wrap(full, node)  # type: ignore[return-value]

    def get_group(self, path: str) -> Group:
        """The group at ``path`` below this group: GroupNotFoundError when nothing is
        there, ContainsArrayError when an array is (as zarr-python's ``Group.get_group``)."""
        full = self._full(path)
        node = self._node(full)
        if node is None:
            raise GroupNotFoundError(f"No group found in store {self._store!r} at path "
                                     f"{full!r} (member {path!r} of group {self.name!r})")
        if is_array(node):
            raise ContainsArrayError(f"An array exists in store {self._store!r} at path "
                                     f"{full!r}, not a group")
        return self._wrap(full, node)  # type: ignore[return-value]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._node(self._full(name)) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self._children())

    def _children(self) -> dict[str, NodeMetadata]:
        """Direct children, name -> metadata: the consolidated snapshot, or one listing plus
        one batched read of every child's documents (of the group's own format)."""
        if self._cons is not None:
            return cons.immediate(self._cons.below(self._path))
        names = [n for n in self._store.list_dir(self._path) if n not in _META_NAMES]
        nodes = read_nodes(self._store, [join_path(self._path, n) for n in names],
                           self.zarr_format)
        return {n: nodes[join_path(self._path, n)] for n in names
                if nodes[join_path(self._path, n)] is not None}  # type: ignore[misc]

    def _descendants(self, max_depth: int | None) -> dict[str, NodeMetadata]:
        """Every node below, relative path -> metadata (``max_depth`` None = unlimited,
        0 = children only): the snapshot, or a walk with one batched read per level."""
        if self._cons is not None:
            below = self._cons.below(self._path)
            return {k: v for k, v in below.items()
                    if max_depth is None or k.count("/") <= max_depth}
        return walk_descendants(self._store, self._path, self.zarr_format, max_depth)

    def members(self, max_depth: int | None = 0, *, use_consolidated_for_children: bool = True
                ) -> tuple[tuple[str, Array | Group], ...]:
        """``(name, member)`` pairs sorted by name; ``max_depth=None`` walks the whole subtree
        (names are then relative paths)."""
        found = self._descendants(_checked_depth(max_depth))
        return tuple((rel, self._wrap(join_path(self._path, rel), found[rel]))
                     for rel in sorted(found))

    def keys(self) -> list[str]:
        """Names of the direct members, sorted."""
        return sorted(self._children())

    def array_keys(self) -> list[str]:
        """Names of the direct member arrays, sorted."""
        return sorted(n for n, m in self._children().items() if is_array(m))

    def group_keys(self) -> list[str]:
        """Names of the direct member groups, sorted."""
        return sorted(n for n, m in self._children().items() if not is_array(m))

    def arrays(self) -> Iterator[tuple[str, Array]]:
        """``(name, Array)`` for the direct member arrays."""
        for name, member in self.members():
            if isinstance(member, Array):
                yield name, member

    def groups(self) -> Iterator[tuple[str, Group]]:
        """``(name, Group)`` for the direct member groups."""
        for name, member in self.members():
            if isinstance(member, Group):
                yield name, member

    def array_values(self) -> Iterator[Array]:
        """The direct member arrays."""
        return (member for _, member in self.arrays())

    def group_values(self) -> Iterator[Group]:
        """The direct member groups."""
        return (member for _, member in self.groups())

    @property
    def nmembers(self) -> MemberCount:
        """Number of direct members: an int, also callable as zarr-python's
        ``nmembers(max_depth=0)`` method."""
        return MemberCount(len(self), self)

    # -- creating members -----------------------------------------------------------------------
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

    def create_group(self, name: str, *, overwrite: bool = False,
                     attributes: dict | None = None) -> Self:
        """A new group ``name`` (nested paths create the groups between; this group is
        known to exist, so only the new path and the groups between are read). An
        existing node there raises ContainsGroupError/ContainsArrayError unless
        ``overwrite``."""
        self._check_writable()
        path = self._full(name)
        meta = group_metadata(self.zarr_format, attributes, f"group {path!r}")
        place_node(self._store, path, meta, overwrite=overwrite, within=self._path,
                   synchronizer=self._synchronizer)
        self._note_created(path, meta, overwrite)
        return type(self)(self._store, path, meta, read_only=self._read_only,
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

    # -- display --------------------------------------------------------------------------------
    def tree(self, expand: bool | None = None, level: int | None = None, *,
             max_nodes: int = 500, plain: bool = False) -> TreeView:
        """The hierarchy below this group drawn with box characters (HTML in notebooks),
        as zarr-python 3 draws it: ``level`` is the deepest level shown (0: the direct
        members only; None: all), at most ``max_nodes`` nodes. ``expand`` and ``plain``
        are accepted for zarr-python's signature: the drawing is always plain text,
        fully expanded."""
        found = self._descendants(_checked_depth(level))
        truncated = None
        if len(found) > max_nodes:
            found = {k: found[k] for k in sorted(found)[:max_nodes]}
            truncated = max_nodes
        return TreeView(self.name if self._path else "/", found, truncated)

    @property
    def info(self) -> InfoTable:
        """Name, type, format, store and member counts."""
        children = self._children()
        arrays = sum(1 for m in children.values() if is_array(m))
        return InfoTable([
            ("Name", self.name),
            ("Type", "chunkstore.Group"),
            ("Zarr format", str(self.zarr_format)),
            ("Read-only", str(self.read_only)),
            ("Store type", type(self._store).__name__),
            ("Store", repr(self._store)),
            ("Consolidated", str(self._cons is not None)),
            ("No. members", str(len(children))),
            ("No. arrays", str(arrays)),
            ("No. groups", str(len(children) - arrays)),
        ])

    def info_complete(self) -> InfoTable:
        """``info`` with the member counts (zarr-python's spelling; ``info`` has them)."""
        return self.info


def _checked_depth(max_depth: int | None) -> int | None:
    """``max_depth`` if it is None or >= 0, else ValueError (as zarr-python)."""
    if max_depth is not None and max_depth < 0:
        raise ValueError(f"max_depth must be None or >= 0, got {max_depth}")
    return max_depth


def _reopen(store: Store, path: str, read_only: bool) -> Group:
    return Group(store, path, read_only=read_only)


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"{old} is deprecated (as in zarr-python 3): use {new} instead.",
                  DeprecationWarning, stacklevel=3)
