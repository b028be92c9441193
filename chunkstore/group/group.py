"""Groups: the hierarchy of arrays and groups, member access and listing, attributes,
tree and info. Creating members is ``group_create``'s job, opening ``group_open``'s."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from chunkstore.array.array import Array
from chunkstore.errors import (
    ArrayNotFoundError,
    ContainsArrayError,
    ContainsGroupError,
    GroupNotFoundError,
    ReadOnlyError,
)
from chunkstore.group.create import GroupCreation
from chunkstore.group.open import GroupOpening, load_group
from chunkstore.group.tree import TreeView
from chunkstore.metadata import consolidated as cons
from chunkstore.metadata.nodes import GroupMetadata, NodeMetadata, is_array, join_path
from chunkstore.nodes.attributes import Attributes
from chunkstore.nodes.consolidated import Consolidated
from chunkstore.nodes.consolidated_view import consolidated_field
from chunkstore.nodes.documents import try_read_node, update_node
from chunkstore.nodes.info import InfoTable
from chunkstore.nodes.paths import normalize_path
from chunkstore.nodes.reading import META_NAMES as _META_NAMES
from chunkstore.nodes.reading import read_nodes, walk_descendants
from chunkstore.storage.base import Store
from chunkstore.storage.reference import ObjectRef, store_ref


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


class Group(GroupCreation, GroupOpening):
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
        if meta.zarr_format != 3:
            return meta
        below = self._cons.below(self._path) if self._cons is not None else None
        field = consolidated_field(meta, below)
        if field is meta.consolidated_metadata:  # type: ignore[union-attr]
            return meta
        return meta.replace(consolidated_metadata=field)  # type: ignore[union-attr]

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
