"""Consolidated copies held by groups that *enclose* a store's root.

``cs.open_array("g.zarr/arr")`` roots a LocalStore at the member's own directory: the
group ``g.zarr`` and its consolidated copy are outside the store, whose keys are confined
to its root, so the copies found inside the store are not all of them. This module looks
(read-only) at the directories above a LocalStore's root, as long as each is a group of
the node's format (the store's root is then a member of their hierarchy, as a
non-consolidated open of them would list it), and returns those that hold a consolidated
copy. The hierarchy layer keeps each such copy current through a LocalStore rooted at
*that group's* directory (its keys confined to it): the same read-modify-write with
pending marks as for copies inside the store, never a key that leaves a store's root. A
copy that cannot be written (permissions, a read-only file system) is reported by a
:class:`chunkstore.errors.StaleConsolidatedMetadataWarning`. Nothing outside the store is
written when its root is not inside a group (one ``open`` of a missing file per change).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from chunkstore.errors import StaleConsolidatedMetadataWarning  # noqa: F401  (its old home)
from chunkstore.metadata.consolidated import V2_KEY
from chunkstore.runtime import current
from chunkstore.runtime.part import Part
from chunkstore.storage.base import Store
from chunkstore.storage.local.store import LocalStore
from chunkstore.storage.wrappers import unwrapped

#: directories above a store's root looked at, at most
MAX_LEVELS = 16
#: a larger document in an enclosing directory is not looked at (not taken for a group)
_MAX_DOC_BYTES = 256 * 1024 * 1024


#: enclosing groups' stores kept
GROUP_STORES = 64


class GroupStores(Part):
    """The LocalStores of enclosing groups' directories made recently, by directory
    (a part of the process's Runtime), the most recently used kept."""

    def __init__(self) -> None:
        self._stores: OrderedDict[str, LocalStore] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, directory: str) -> LocalStore:
        """The store of ``directory`` (made if not kept)."""
        with self._lock:
            store = self._stores.get(directory)
            if store is not None:
                self._stores.move_to_end(directory)
                return store
        store = LocalStore(directory)
        with self._lock:
            store = self._stores.setdefault(directory, store)
            while len(self._stores) > GROUP_STORES:
                self._stores.popitem(last=False)
        return store


def group_store(directory: str) -> LocalStore:
    """A (kept) LocalStore rooted at an enclosing group's directory."""
    return current().part(GroupStores).get(directory)


def _load(raw: bytes | None) -> dict[str, Any] | None:
    if raw is None or len(raw) > _MAX_DOC_BYTES:
        return None
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return doc if isinstance(doc, dict) else None


def _read(path: Path) -> bytes | None:
    """A document of an enclosing directory, read-only (one ``open``; None if absent or
    unreadable: the look never fails a change of our own store)."""
    try:
        with open(path, "rb") as f:
            return f.read(_MAX_DOC_BYTES + 1)
    except OSError:
        return None


def _look(directory: Path, fmt: int) -> tuple[bool, bool]:
    """(is a group of ``fmt``, holds a consolidated copy) for ``directory``."""
    if fmt == 3:
        doc = _load(_read(directory / "zarr.json"))
        if doc is None or doc.get("node_type") != "group" or doc.get("zarr_format") != 3:
            return False, False
        return True, isinstance(doc.get("consolidated_metadata"), dict)
    zgroup = _load(_read(directory / ".zgroup"))
    if zgroup is None or zgroup.get("zarr_format") != 2:
        return False, False
    return True, _read(directory / V2_KEY) is not None


def enclosing_copies(store: Store, zarr_format: int) -> list[tuple[LocalStore, str]]:
    """``(store of the group's directory, path of our store's root relative to it)`` for
    each group above a LocalStore's root that holds a consolidated copy (of
    ``zarr_format``); nearest first. The walk stops at the first directory that is not a
    group of that format. A wrapper (``WrapperStore``) shows its inner store's data: the
    copies above a wrapped LocalStore are those above it."""
    store = unwrapped(store)
    if not isinstance(store, LocalStore) or store.read_only:
        return []
    found: list[tuple[LocalStore, str]] = []
    here, rel = store.root, ""
    for _ in range(MAX_LEVELS):
        parent = here.parent
        if parent == here:
            break
        rel = f"{here.name}/{rel}" if rel else here.name
        is_group, holds = _look(parent, zarr_format)
        if not is_group:
            break
        if holds:
            found.append((group_store(str(parent)), rel))
        here = parent
    return found
