"""Nodes of other stores nested with a new node's directory on the file system.

A LocalStore's keys stop at its root, so the checks of ``placement`` see only the nodes
inside it. But ``cs.create_array("a.zarr/0")`` roots a store *inside* the array
``a.zarr``: the new array's chunk ``0`` (v2, "/" separator) would be the file of
``a.zarr``'s chunk (0, 0). And ``cs.create_array("p.zarr")`` over a directory that
already holds an array at ``p.zarr/0`` (made through a store rooted there) would write
its chunks over that array's. Both lose data without an error. This module looks
(read-only) at the directories above a LocalStore's root for an array, and at the
directory of a new array for a node below it where its chunk keys lead (``c/``, or a
numbered directory), so that ``place_node`` refuses either, as it refuses an array
inside an array within one store. Stores that are not local
directories are not looked at (a request per level and per creation on an object store).
"""

from __future__ import annotations

import json
import os
import re

from chunkstore.errors import ContainsArrayError, ContainsGroupError
from chunkstore.metadata.nodes import KIND_KEYS
from chunkstore.storage.base import Store
from chunkstore.storage.local.store import LocalStore
from chunkstore.storage.wrappers import unwrapped

#: directories above a store's root looked at, at most (the walk goes on past
#: directories that are no node: an array's chunk directories are none)
MAX_LEVELS = 32
#: directory entries looked at below a new array's directory, at most (one that already
#: holds that many is left as it is)
MAX_ENTRIES = 100_000
#: the first component of a chunk key: "c" (v3's default encoding) or digits joined by
#: "." (v2, and v3's "v2" encoding)
CHUNK_COMPONENT = re.compile(r"c|\d+(\.\d+)*")
#: a larger zarr.json above a store's root is not read (not taken for an array's)
MAX_DOC_BYTES = 64 * 1024 * 1024


def _is_array_directory(directory: str) -> bool:
    """Whether ``directory`` holds an array's document (v2 ``.zarray``, or a v3
    ``zarr.json`` whose node_type is "array"); unreadable documents count as none."""
    if os.path.isfile(os.path.join(directory, ".zarray")):
        return True
    try:
        with open(os.path.join(directory, "zarr.json"), "rb") as f:
            raw = f.read(MAX_DOC_BYTES + 1)
    except OSError:
        return False
    if len(raw) > MAX_DOC_BYTES:  # not taken for an array's document
        return False
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return False
    return isinstance(doc, dict) and doc.get("node_type") == "array"


def _local_root(store: Store) -> str | None:
    store = unwrapped(store)
    if not isinstance(store, LocalStore) or store.read_only:
        return None
    return os.path.realpath(store.root)


def enclosing_array(store: Store) -> str | None:
    """The nearest directory above a LocalStore's root that is an array, or None."""
    here = _local_root(store)
    if here is None:
        return None
    for _ in range(MAX_LEVELS):
        parent = os.path.dirname(here)
        if parent == here:
            break
        if _is_array_directory(parent):
            return parent
        here = parent
    return None


def node_below(store: Store, path: str) -> str | None:
    """The path (relative to the store's root) of a node in a directory below the one of
    ``path`` in a LocalStore where a new array's chunk keys could lead (a first component
    ``c``, or digits: ``CHUNK_COMPONENT``), or None (none found within ``MAX_ENTRIES``
    entries). Other members (a group's ``labels``) share no file with its chunks."""
    root = _local_root(store)
    if root is None:
        return None
    top = os.path.join(root, path) if path else root
    try:
        with os.scandir(top) as entries:
            stack = [e.path for e in entries
                     if CHUNK_COMPONENT.fullmatch(e.name) and e.is_dir(follow_symlinks=False)]
    except OSError:
        return None
    seen = 0
    while stack:
        directory = stack.pop()
        try:
            entries = os.scandir(directory)
        except OSError:
            continue
        with entries:
            for entry in entries:
                seen += 1
                if seen > MAX_ENTRIES:
                    return None
                if entry.name in KIND_KEYS:
                    return os.path.relpath(directory, root).replace(os.sep, "/")
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
    return None


def refuse_nested(store: Store, path: str, creating_array: bool) -> None:
    """ContainsArrayError when a directory above the store's root is an array; for a new
    array, ContainsArrayError / ContainsGroupError when a node lies below its directory."""
    outer = enclosing_array(store)
    if outer is not None:
        raise ContainsArrayError(
            f"cannot create {path or '/'!r} in {store!r}: the directory {outer!r} "
            "above the store's root is an array - only groups may have child nodes (its "
            "chunks share those directories)")
    if not creating_array:
        return
    inner = node_below(store, path)
    if inner is not None:
        root = _local_root(store) or ""
        kind = (ContainsArrayError if _is_array_directory(os.path.join(root, inner))
                else ContainsGroupError)
        raise kind(
            f"cannot create an array at {path or '/'!r} in {store!r}: {inner!r} below it "
            "already holds a node, whose files the new array's chunks would overwrite. "
            "Remove it first, or create the array elsewhere")
