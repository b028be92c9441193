"""Object references: the one name of a stored object, whatever root a handle on it was
opened from.

A handle on a group (root ``memory://d/g``, key ``x/c/0``) and a handle on the array
itself (root ``memory://d/g/x``, key ``c/0``) write the same object. An
:class:`ObjectRef` names it as (namespace, absolute path components): the store's
canonical root (``Store.location()``: the real path of a local directory, bucket and
normalised prefix plus endpoint for object stores, the dict of a memory store) joined
with the key. Synchronizer lock names (``ObjectRef.name``), the decoded-chunk cache
(``io.cache_place``) and the same-place checks of copies and writes (``io.overlap``) all
derive from it, so two handles on one object agree.

Namespaces:

* ``("file",)``: the local file system, components of the real path. A ZipStore (and
  an fsspec ``zip::file://`` archive) is the archive's real path followed by
  :data:`ARCHIVE` (never a path component: it holds a NUL) and the keys inside, so a
  directory that holds the archive contains its arrays.
* ``(scheme, endpoint, ...)``: a remote or fsspec filesystem (``location.py`` makes its
  spellings one); components of its root path. fsspec's ``memory://`` filesystem keeps
  one dict per process (a class attribute), so its path names an object within the
  process, which is all a process-local lock or cache needs.
* anything else: the store's ``location()`` as a whole (a MemoryStore's dict, an unknown
  store's repr), with the key's components.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

#: the component that enters an archive (a zip file's entries lie below it)
ARCHIVE = "\x00zip"
FILE: tuple[str, ...] = ("file",)
_LOCAL_SCHEMES = ("file", "local")


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """Where a stored object (or a node: an array's or group's prefix) lives: a hashable,
    immutable pair of a namespace and absolute path components. Two references are equal
    exactly when they name the same object."""

    namespace: tuple[Any, ...]
    parts: tuple[str, ...]

    @property
    def path(self) -> str:
        """The components joined by ``/`` (no leading or trailing slash)."""
        return "/".join(self.parts)

    @property
    def name(self) -> str:
        """The canonical text of the reference: the lock name of a synchronizer. It is the
        same in every process for local files and object stores (for in-memory stores,
        whose objects are process-local anyway, it names the dict by its id)."""
        ns = self.namespace
        text = ns[0] if len(ns) == 1 and isinstance(ns[0], str) else repr(ns)
        return f"{text}:/{self.path}"

    def __str__(self) -> str:
        return self.name

    def child(self, key: str) -> ObjectRef:
        """The reference of ``key`` below this one (``key`` relative, ``/``-separated)."""
        more = tuple(p for p in key.split("/") if p)
        return ObjectRef(self.namespace, self.parts + more) if more else self

    def contains(self, other: ObjectRef) -> bool:
        """Whether ``other`` is this place or lies below it."""
        n = len(self.parts)
        return (self.namespace == other.namespace and len(other.parts) >= n
                and other.parts[:n] == self.parts)

    def overlaps(self, other: ObjectRef) -> bool:
        """Whether one place is the other's or lies below it (writing one would destroy
        or change the other)."""
        return self.contains(other) or other.contains(self)

    def resolved(self, node: bool = False) -> ObjectRef:
        """The reference with symlinked directories below the root resolved too (a local
        file outside an archive; anything else is returned as is). An object's last
        component is kept (its file is replaced by a rename, which replaces a symlink
        there rather than its target); a ``node``'s (a directory: its keys lie below the
        symlink's target) is resolved. One ``realpath``: for locks and same-place
        checks, not for per-chunk work."""
        if self.namespace != FILE or not self.parts or ARCHIVE in self.parts:
            return self
        if node:
            return ObjectRef(FILE, _local_parts(os.path.realpath("/" + self.path)))
        head = os.path.realpath("/" + "/".join(self.parts[:-1]))
        return ObjectRef(FILE, _local_parts(head) + self.parts[-1:])


def _local_parts(real: str) -> tuple[str, ...]:
    return tuple(p for p in real.replace(os.sep, "/").split("/") if p)


def _path_parts(path: str) -> tuple[str, ...]:
    """Components of a remote root path: leading and trailing slashes dropped, inner empty
    components kept (``s3://b/x//y`` holds other objects than ``s3://b/x/y``)."""
    path = path.strip("/")
    return tuple(path.split("/")) if path else ()


def _archive_root(chain: str, url: str, rest: tuple[Any, ...]) -> ObjectRef:
    """The root of a chained fsspec URL (``zip://inner::file:///a.zip``): the archive's
    own place, then the path inside it; a local zip archive is the ZipStore's place."""
    first, _, outer = url.partition("::")
    inner = first.partition("://")[2] if "://" in first else ""
    schemes = chain.split("::")
    if schemes[0] == "zip" and len(schemes) == 2 and schemes[1] in _LOCAL_SCHEMES:
        archive = outer.partition("://")[2] if "://" in outer else outer
        real = os.path.realpath(os.path.expanduser(archive))
        return ObjectRef(FILE, _local_parts(real) + (ARCHIVE,) + _path_parts(inner))
    return ObjectRef((chain, outer, *rest), _path_parts(inner))


def store_ref(store: Any) -> ObjectRef:
    """The reference of ``store``'s root, from its ``location()`` (see the module
    docstring)."""
    loc = store.location()
    if not isinstance(loc, tuple):
        return ObjectRef((loc,), ())
    if len(loc) >= 2 and isinstance(loc[1], str):
        kind, root, rest = loc[0], loc[1], loc[2:]
        if kind == "file" and not rest:
            return ObjectRef(FILE, _local_parts(root))
        if kind == "zip" and not rest:  # a ZipStore: the archive's real path
            return ObjectRef(FILE, _local_parts(root) + (ARCHIVE,))
        if isinstance(kind, str) and "::" in kind:
            return _archive_root(kind, root, rest)
        return ObjectRef((kind, *rest), _path_parts(root))
    return ObjectRef(loc, ())


def object_ref(store: Any, key: str = "", *, resolve: bool = False) -> ObjectRef:
    """The reference of the object ``key`` (relative to ``store``'s root). ``resolve``:
    also resolve symlinked local directories on the way (:meth:`ObjectRef.resolved`)."""
    ref = store_ref(store).child(key)
    return ref.resolved() if resolve else ref


def node_ref(store: Any, path: str) -> ObjectRef:
    """The reference of the node (array or group) at ``path`` of ``store``, symlinked
    local directories resolved: what same-place checks compare."""
    return store_ref(store).child(path).resolved(node=True)


def same_or_within(store_a: Any, path_a: str, store_b: Any, path_b: str) -> bool:
    """Whether the node ``path_a`` of ``store_a`` is the node ``path_b`` of ``store_b``,
    or one lies below the other."""
    return node_ref(store_a, path_a).overlaps(node_ref(store_b, path_b))
