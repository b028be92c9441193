"""Groups: the hierarchy of arrays and groups, its members, attributes and tree."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from .array import Array
from .attributes import Attributes
from .consolidation import refresh_ancestors, write_consolidated
from .copying import copy_into
from .creation import normalize_path, prepare_node, write_metadata
from .errors import ContainsArrayError, NodeTypeError, ReadOnlyError
from .info import InfoTable
from .metadata import (
    GroupMetadata,
    GroupMetadataV2,
    GroupMetadataV3,
    NodeMetadata,
    is_array,
    join_path,
    load_node,
    load_nodes,
    try_load_node,
)
from .metadata import consolidated as cons
from .storage.base import Store
from .tree import TreeView

_META_NAMES = frozenset({"zarr.json", ".zarray", ".zgroup", ".zattrs", cons.V2_KEY})


class Consolidated:
    """A snapshot of every node below the group at ``root`` (paths relative to it),
    shared by the Group objects reached from it and kept current by their own writes."""

    def __init__(self, root: str, entries: dict[str, NodeMetadata]) -> None:
        self.root, self.entries = root, entries

    def rel(self, path: str) -> str:
        return path[len(self.root):].lstrip("/") if self.root else path

    def lookup(self, path: str) -> NodeMetadata | None:
        return self.entries.get(self.rel(path))

    def below(self, path: str) -> dict[str, NodeMetadata]:
        return cons.children_of(self.entries, self.rel(path))


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
        self._meta = metadata if metadata is not None else _load_group(store, path)
        self._cons = consolidated
        self._synchronizer = synchronizer

    # -- properties ---------------------------------------------------------------------------
    store = property(lambda self: self._store, doc="The Store holding the group.")
    path = property(lambda self: self._path, doc="Path of the group within the store.")
    read_only = property(lambda self: self._read_only, doc="True when writes are refused.")
    metadata = property(lambda self: self._meta, doc="The parsed group metadata.")
    zarr_format = property(lambda self: self._meta.zarr_format)
    name = property(lambda self: "/" + self._path)
    basename = property(lambda self: self._path.rsplit("/", 1)[-1])

    @property
    def attrs(self) -> Attributes:
        """User attributes; assignments persist at once."""
        def put(attrs: dict[str, Any]) -> None:
            self._check_writable()
            self._meta = self._meta.replace(attributes=attrs)
            write_metadata(self._store, self._path, self._meta)
            if self._cons is None:
                refresh_ancestors(self._store, self._path, self._meta)
            self._patch_consolidated({self._path: self._meta})
        return Attributes(lambda: self._meta.attributes, put, f"group {self.name!r}")

    def __repr__(self) -> str:
        return f"<chunkstore.Group {self.name!r} zarr_format={self.zarr_format}>"

    def __reduce__(self):
        return (_reopen, (self._store, self._path, self._read_only))

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Group) and other._store == self._store
                and other._path == self._path)

    __hash__ = None  # type: ignore[assignment]

    # -- member access ------------------------------------------------------------------------
    def _full(self, name: str) -> str:
        rel = normalize_path(name)
        if not rel:
            raise KeyError(f"empty member name in group {self.name!r}")
        return join_path(self._path, rel)

    def _node(self, path: str) -> NodeMetadata | None:
        if self._cons is not None:
            return self._cons.lookup(path)
        return try_load_node(self._store, path, self.zarr_format)

    def _wrap(self, path: str, node: NodeMetadata) -> Array | Group:
        if is_array(node):
            arr = Array(self._store, path, node, read_only=self._read_only,  # type: ignore[arg-type]
                        synchronizer=self._synchronizer)
            if self._cons is not None:  # the array's own changes keep the snapshot current
                snap = self._cons
                arr._on_metadata_change = lambda meta: snap.entries.__setitem__(snap.rel(path),
                                                                                  meta)
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
        nodes = load_nodes(self._store, [join_path(self._path, n) for n in names],
                           self.zarr_format)
        return {n: nodes[join_path(self._path, n)] for n in names
                if nodes[join_path(self._path, n)] is not None}  # type: ignore[misc]

    def _descendants(self, max_depth: int | None) -> dict[str, NodeMetadata]:
        """Every node below, relative path -> metadata, breadth first, one batched read per
        level (``max_depth`` None = unlimited, 0 = children only)."""
        if self._cons is not None:
            below = self._cons.below(self._path)
            return {k: v for k, v in below.items()
                    if max_depth is None or k.count("/") <= max_depth}
        found: dict[str, NodeMetadata] = {}
        level, depth = [""], 0
        while level and (max_depth is None or depth <= max_depth):
            candidates = [join_path(rel, n) for rel in level
                          for n in self._store.list_dir(join_path(self._path, rel))
                          if n not in _META_NAMES]
            nodes = load_nodes(self._store, [join_path(self._path, c) for c in candidates],
                               self.zarr_format)
            level = []
            for rel in candidates:
                node = nodes[join_path(self._path, rel)]
                if node is not None:
                    found[rel] = node
                    if not is_array(node):
                        level.append(rel)
            depth += 1
        return found

    def members(self, max_depth: int | None = 0) -> tuple[tuple[str, Array | Group], ...]:
        """``(name, member)`` pairs sorted by name; ``max_depth=None`` walks the whole subtree
        (names are then relative paths)."""
        found = self._descendants(max_depth)
        return tuple((rel, self._wrap(join_path(self._path, rel), found[rel]))
                     for rel in sorted(found))

    def keys(self) -> list[str]:
        """Names of the direct members, sorted."""
        return sorted(self._children())

    def array_keys(self) -> list[str]:
        return sorted(n for n, m in self._children().items() if is_array(m))

    def group_keys(self) -> list[str]:
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
    def nmembers(self) -> int:
        return len(self)

    # -- creating and deleting ------------------------------------------------------------------
    def _check_writable(self) -> None:
        if self._read_only:
            raise ReadOnlyError(f"group {self.name!r} in {self._store!r} is read-only")

    def create_group(self, name: str, *, overwrite: bool = False,
                     attributes: dict | None = None) -> Group:
        """A new group ``name`` (nested paths create the groups between; this group is
        known to exist, so only the new path and the groups between are read)."""
        self._check_writable()
        path = self._full(name)
        meta: GroupMetadata = (GroupMetadataV3(attributes=dict(attributes or {}))
                               if self.zarr_format == 3 else
                               GroupMetadataV2(attributes=dict(attributes or {})))
        parents = _missing_parents(self, path)
        prepare_node(self._store, path, self.zarr_format, overwrite, within=self._path)
        write_metadata(self._store, path, meta)
        self._patch_consolidated({**parents, path: meta}, removed=path if overwrite else None)
        return Group(self._store, path, meta, read_only=self._read_only,
                     consolidated=self._cons, synchronizer=self._synchronizer)

    def require_group(self, name: str, *, overwrite: bool = False) -> Group:
        """The group ``name``, created if missing; an array there raises ContainsArrayError."""
        node = self._node(self._full(name))
        if node is None or overwrite:
            return self.create_group(name, overwrite=overwrite)
        if is_array(node):
            raise ContainsArrayError(f"{self._full(name)!r} in {self._store!r} is an array, "
                                     "not a group")
        return self._wrap(self._full(name), node)  # type: ignore[return-value]

    def create_array(self, name: str, *, shape: Any = None, dtype: Any = None, data: Any = None,
                     **kwargs: Any) -> Array:
        """A new array ``name`` in this group (arguments as ``chunkstore.create_array``,
        ``data=`` included).

        A direct child costs one batched existence check of its path and one write."""
        from .api import new_array, shape_and_dtype
        self._check_writable()
        data, shape, dtype = shape_and_dtype(data, shape, dtype, f"create_array({name!r})")
        kwargs.setdefault("zarr_format", self.zarr_format)
        kwargs.setdefault("synchronizer", self._synchronizer)
        path = self._full(name)
        parents = _missing_parents(self, path)
        arr = new_array(self._store, path, shape=shape, dtype=dtype, within=self._path, **kwargs)
        self._patch_consolidated({**parents, path: arr.metadata},
                                 removed=path if kwargs.get("overwrite") else None)
        if data is not None:
            copy_into(data, arr)
        return arr

    def require_array(self, name: str, *, shape: Any, dtype: Any = None, exact: bool = False,
                      **kwargs: Any) -> Array:
        """The array ``name`` if it exists with this shape (and a dtype it can hold), else a
        new one; a mismatch raises TypeError naming the array."""
        node = self._node(self._full(name))
        if node is None:
            if dtype is not None:
                kwargs["dtype"] = dtype
            return self.create_array(name, shape=shape, **kwargs)
        if not is_array(node):
            raise NodeTypeError(f"{self._full(name)!r} in {self._store!r} is a group, "
                                "not an array")
        arr: Array = self._wrap(self._full(name), node)  # type: ignore[assignment]
        want_shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
        if arr.shape != want_shape:
            raise TypeError(f"array {arr.name!r} has shape {arr.shape}, not {want_shape}")
        if dtype is not None:
            want = np.dtype(dtype)
            ok = arr.dtype == want if exact else np.can_cast(want, arr.dtype)
            if not ok:
                raise TypeError(f"array {arr.name!r} has dtype {arr.dtype}, incompatible "
                                f"with {want}")
        return arr

    require_dataset = require_array  # the h5py / zarr-python 2 spelling

    def require_groups(self, *names: str) -> tuple[Group, ...]:
        """``require_group`` for each name."""
        return tuple(self.require_group(name) for name in names)

    def create_dataset(self, name: str, *, data: Any = None, shape: Any = None,
                       dtype: Any = None, **kwargs: Any) -> Array:
        """Seed/h5py spelling of ``create_array``: from ``data`` or ``shape``/``dtype``."""
        return self.create_array(name, data=data, shape=shape, dtype=dtype, **kwargs)

    def __setitem__(self, name: str, data: Any) -> None:
        """``g[name] = ndarray`` stores ``data`` as the array ``name`` (replacing it)."""
        self.create_array(name, data=data, overwrite=True)

    def update_attributes(self, new: dict[str, Any]) -> Group:
        """Merge ``new`` into the attributes (one write); returns the group."""
        self.attrs.update(new)
        return self

    def zeros(self, name: str, *, shape: Any, **kwargs: Any) -> Array:
        return self.create_array(name, shape=shape, fill_value=0, **kwargs)

    def ones(self, name: str, *, shape: Any, **kwargs: Any) -> Array:
        return self.create_array(name, shape=shape, fill_value=1, **kwargs)

    def full(self, name: str, *, shape: Any, fill_value: Any, **kwargs: Any) -> Array:
        return self.create_array(name, shape=shape, fill_value=fill_value, **kwargs)

    def empty(self, name: str, *, shape: Any, **kwargs: Any) -> Array:
        return self.create_array(name, shape=shape, **kwargs)

    def __delitem__(self, name: str) -> None:
        """Remove the member and everything below it from the store."""
        self._check_writable()
        path = self._full(name)
        if self._node(path) is None:
            raise KeyError(f"no member {name!r} in group {self.name!r} of {self._store!r}")
        self._store.delete_prefix(path)
        self._patch_consolidated({}, removed=path)

    def _patch_consolidated(self, added: dict[str, NodeMetadata], removed: str | None = None
                            ) -> None:
        """Keep a consolidated snapshot (and the document holding it) in step with a change
        made through this group, so a later consolidated open sees it."""
        snap = self._cons
        if snap is None:
            return
        if removed is not None:
            rel = snap.rel(removed)
            snap.entries = {k: v for k, v in snap.entries.items()
                            if k != rel and not k.startswith(rel + "/")}
        for path, node in added.items():
            if path == snap.root:
                continue
            snap.entries[snap.rel(path)] = node
        root = load_node(self._store, snap.root, self.zarr_format, kind="group")
        write_consolidated(self._store, snap.root, root, snap.entries)  # type: ignore[arg-type]

    # -- display --------------------------------------------------------------------------------
    def tree(self, level: int | None = None) -> TreeView:
        """The hierarchy below this group, drawn with box characters (HTML in notebooks)."""
        found = self._descendants(None if level is None else max(level - 1, 0))
        return TreeView(self.name if self._path else "/", found)

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


def _missing_parents(group: Group, path: str) -> dict[str, NodeMetadata]:
    """The groups that creating ``path`` will add (for the consolidated snapshot)."""
    if group._cons is None:
        return {}
    parts = path.split("/")[:-1]
    out: dict[str, NodeMetadata] = {}
    for i in range(1, len(parts) + 1):
        parent = "/".join(parts[:i])
        if parent and group._cons.lookup(parent) is None and parent != group._cons.root:
            out[parent] = (GroupMetadataV3() if group.zarr_format == 3 else GroupMetadataV2())
    return out


def _load_group(store: Store, path: str) -> GroupMetadata:
    node = load_node(store, path, kind="group")
    if is_array(node):
        raise NodeTypeError(f"path {path or '/'!r} in {store!r} is an array, not a group")
    return node  # type: ignore[return-value]


def _reopen(store: Store, path: str, read_only: bool) -> Group:
    return Group(store, path, read_only=read_only)
