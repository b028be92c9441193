"""Consolidated metadata in a store: written by :func:`consolidate`, read by
:func:`read_consolidated`, and kept current by :func:`guarded_change`.

A consolidated document (v3 inline in a group's ``zarr.json``, v2 ``.zmetadata``) is a
copy of its descendants' metadata. Any change to one node (resize, append, attributes, a
new or deleted member) must reach every copy above it, or a later consolidated open reads
the old shape: a silent wrong answer (zarr-python issue 2921). And a writer killed between
committing the node and refreshing the copies must not leave a copy that looks current.

:func:`guarded_change` therefore runs every change of a node's documents in three steps,
each a conditional read-modify-write (``io.rmw``) of the objects it touches:

1. *mark*: in every copy above the node, add a pending token for it (``nodes.pending``)
   and take an array's entry out of the copy;
2. *commit* the node's documents;
3. *settle*: remove the token; when no other writer's token is left for the node, write
   its entry back from the store's current documents, read *after* the copy's generation
   (a writer that commits the node later must first mark the copy, which makes this
   commit fail and retry: a stale entry never wins).

A crash after step 1 leaves a token: chunkstore's consolidated open reads the node's own
documents for every pending path (:func:`read_consolidated`), so it never serves a wrong
shape; zarr-python ignores the tokens and sees the array missing from the copy (a
``KeyError``), never its old shape. Tokens of dead writers are dropped by the next writer
of the copy, which writes the entry back (``pending.expired``). When no copy exists above
the node (the common case) the change costs one batched read of the candidate documents
before the commit and one after it (which catches a copy made meanwhile by
:func:`consolidate`), as before.

The copies are found by reading the store, whatever way the node was opened, and, for a
LocalStore rooted inside a group's directory (a member opened by its own path), in the
enclosing directories too (``nodes.enclosing``).

The pieces: ``consolidated_entries`` (the snapshot, reading a copy, restoring entries),
``consolidated_copies`` (finding the copies), ``consolidated_build`` (:func:`consolidate`);
this module runs the changes.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from chunkstore.errors import ChunkstoreError, StaleConsolidatedMetadataWarning
from chunkstore.io.rmw import UNCHANGED, WriteUnit, commit_units
from chunkstore.metadata import consolidated as cons
from chunkstore.metadata.nodes import GroupMetadataV2, join_path, where_prefix
from chunkstore.nodes.consolidated_build import consolidate
from chunkstore.nodes.consolidated_copies import Copy, find_copies, holds_consolidated
from chunkstore.nodes.consolidated_entries import (
    Consolidated,
    read_consolidated,
    restore_entries,
    without_below,
)
from chunkstore.nodes.copy_docs import CopyDoc
from chunkstore.nodes.pending import Pending, drops_subtree, new_token, purge, token_value
from chunkstore.nodes.reading import read_node
from chunkstore.storage.base import Store

V2_KEY = cons.V2_KEY

__all__ = ["Consolidated", "StaleConsolidatedMetadataWarning", "consolidate", "guarded_change",
           "holds_consolidated", "read_consolidated", "refresh_consolidated"]

# -- updating a copy ------------------------------------------------------------------------
#: an update of a copy's entries (NodeMetadata, or entries as stored) and marks
Edit = Callable[[dict[str, Any], Pending], tuple[dict[str, Any], Pending]]


def _unit(copy: Copy, make_edit: Callable[[Copy], Edit], root_too: bool) -> WriteUnit:
    """A read-modify-write of ``copy``: its entries and marks through ``make_edit(copy)``
    (on the stored document parsed only as far as that needs: ``nodes.copy_docs``);
    ``root_too``: a v2 copy's head (the group's own ``.zgroup``/``.zattrs``) is read
    again from the group (it is the node that changed), else kept."""
    edit = make_edit(copy)
    home, group = copy.home, copy.group
    where = where_prefix(home, group)
    if copy.fmt == 3:
        key, at = join_path(group, "zarr.json"), f"{where}/zarr.json"
    else:
        key, at = join_path(group, V2_KEY), f"{where}/{V2_KEY}"

    def build(old: bytes | None) -> Any:
        if old is None:
            return UNCHANGED
        doc = CopyDoc.v3(old, at) if copy.fmt == 3 else CopyDoc.v2(old, at)
        if doc is None:
            return UNCHANGED
        doc.entries, doc.pending = edit(doc.entries, doc.pending)
        root = None
        if copy.fmt == 2 and (root_too or not doc.has_root()):
            root = read_node(home, group, 2, kind="group")
            if not isinstance(root, GroupMetadataV2):
                return UNCHANGED
        raw = doc.dump(root)
        return UNCHANGED if raw == old else raw
    return WriteUnit(key, build, label=f"consolidated metadata of {at}")


def _mark(targets: Sequence[tuple[str, str]], token: str) -> Callable[[Copy], Edit]:
    """Step 1: a token for each target ``(path, drop)`` below the copy's group, and the
    entries it says taken out (``pending``). Expired tokens are dropped on the way."""
    def make(copy: Copy) -> Edit:
        def edit(entries: dict[str, Any], pending: Pending
                 ) -> tuple[dict[str, Any], Pending]:
            pending, freed, subtrees = purge(pending)
            for path, drop in targets:
                rel = copy.rel(path)
                if rel is None:
                    continue
                if rel in freed and rel in subtrees:  # a dead writer's duty passes to us
                    drop = "subtree"
                pending.setdefault(rel, {})[token] = token_value(drop)
                freed.discard(rel)
                if drop == "subtree":
                    entries = without_below(entries, rel)
                elif drop == "self" and not any(k.startswith(rel + "/") for k in entries):
                    entries.pop(rel, None)  # never a group's entry while members are listed
            entries = restore_entries(entries, copy.home, copy.group, copy.fmt, sorted(freed),
                               subtrees, pending)
            return entries, pending
        return edit
    return make


def _settle(paths: Sequence[str], token: str | None) -> Callable[[Copy], Edit]:
    """Step 3 (and a plain refresh when ``token`` is None): remove the token of each of
    ``paths``; the entry of a path left without any token is written back from the store."""
    def make(copy: Copy) -> Edit:
        def edit(entries: dict[str, Any], pending: Pending
                 ) -> tuple[dict[str, Any], Pending]:
            pending, freed, subtrees = purge(pending)
            for path in paths:
                rel = copy.rel(path)
                if rel is None:
                    continue
                tokens = pending.get(rel)
                mine = tokens.pop(token, None) if tokens is not None and token else None
                if tokens:  # another writer's change of this node is under way
                    if mine is not None and mine[3] == "subtree" and not drops_subtree(tokens):
                        tokens[min(tokens)][3] = "subtree"
                    continue
                pending.pop(rel, None)
                freed.add(rel)
                if mine is not None and mine[3] == "subtree":
                    subtrees.add(rel)
            entries = restore_entries(entries, copy.home, copy.group, copy.fmt, sorted(freed),
                               subtrees, pending)
            return entries, pending
        return edit
    return make


def _commit(copies: Sequence[Copy], make_edit: Callable[[Copy], Edit],
            synchronizer: Any, changed: Sequence[str] = ()) -> list[Copy]:
    """Read-modify-write ``copies`` (one batch per store); returns those updated
    (``changed``: the nodes whose change this is, when it is committed: a v2 group among
    them has its own ``.zmetadata`` head rewritten). A copy of an enclosing directory
    that cannot be written is skipped with a warning (it is not this store's: its
    failure must not fail the change)."""
    done: list[Copy] = []
    by_home: dict[int, list[Copy]] = {}
    for c in copies:
        by_home.setdefault(id(c.home), []).append(c)
    for group in by_home.values():
        units = [_unit(c, make_edit, any(c.rel(p) is None for p in changed)) for c in group]
        if not group[0].enclosing:
            commit_units(group[0].home, units, synchronizer=synchronizer, cpu_bound=False,
                         unchecked_ok=True)  # metadata: see rmw.update_object
            done += group
            continue
        for c, unit in zip(group, units, strict=True):
            try:
                commit_units(c.home, [unit], synchronizer=synchronizer, cpu_bound=False,
                             unchecked_ok=True)
            except (OSError, ChunkstoreError) as e:
                _warn_stale(c, e)
                continue
            done.append(c)
    return done


def _warn_stale(copy: Copy, error: BaseException) -> None:
    where = getattr(copy.home, "root", copy.home)
    warnings.warn(StaleConsolidatedMetadataWarning(
        f"the consolidated metadata of group {str(where)!r} lists {copy.prefix!r}, which "
        f"changed, but it could not be updated ({type(error).__name__}: {error}); a "
        f"consolidated open of that group shows the previous metadata until "
        f"chunkstore.consolidate_metadata({str(where)!r}) is run"), stacklevel=5)


def guarded_change(store: Store, targets: Sequence[tuple[str, str]], zarr_format: int | None,
                   act: Callable[[], Any], *, synchronizer: Any = None,
                   groups: Sequence[str] | None = None) -> Any:
    """Run ``act()``, which commits the documents of the nodes ``targets`` (``(path,
    drop)``: see ``nodes.pending``), so that no consolidated copy above them ever
    lists a stale entry as current, even if the process dies at any point (module
    docstring); returns what ``act`` returned. ``groups``: the groups of ``store``
    holding copies, when the caller has just read them (they are then not read again)."""
    paths = [p for p, _ in targets]
    copies = find_copies(store, paths, zarr_format, groups=groups)
    marked: list[Copy] = []
    token = None
    if any(c.rel(p) is not None for c in copies for p in paths):
        token = new_token()
        marked = _commit([c for c in copies if any(c.rel(p) is not None for p in paths)],
                         _mark(targets, token), synchronizer)
    try:
        result = act()
    except BaseException:
        if marked:  # nothing (or not all) committed: take the marks back, keep the error
            with contextlib.suppress(Exception):
                _commit(marked, _settle(paths, token), synchronizer, paths)
        raise
    later: list[Copy] = []
    if groups is None:  # a copy made meanwhile (consolidate_metadata) lists the old node
        later = find_copies(store, paths, zarr_format, skip=copies, enclosing=False)
    unmarked = [c for c in copies if c not in marked and not c.enclosing]
    _commit([*marked, *unmarked, *later], _settle(paths, token), synchronizer, paths)
    return result


def refresh_consolidated(store: Store, path: str, *, zarr_format: int | None = None,
                         synchronizer: Any = None, groups: Sequence[str] | None = None) -> None:
    """Bring the entry of the node at ``path`` up to date in every consolidated copy above
    it (v2: its own ``.zmetadata`` too, which copies its attributes), without marking:
    for callers that changed nothing themselves (:func:`guarded_change` does both)."""
    copies = find_copies(store, [path], zarr_format, groups=groups)
    _commit(copies, _settle([path], None), synchronizer, [path])
