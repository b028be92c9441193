"""Consolidated metadata in a store: written by :func:`consolidate`, read by
:func:`read_consolidated`, and kept current by :func:`guarded_change`.

A consolidated document (v3 inline in a group's ``zarr.json``, v2 ``.zmetadata``) is a
copy of its descendants' metadata. Any change to one node (resize, append, attributes, a
new or deleted member) must reach every copy above it, or a later consolidated open reads
the old shape: a silent wrong answer (zarr-python issue 2921). And a writer killed between
committing the node and refreshing the copies must not leave a copy that looks current.

:func:`guarded_change` therefore runs every change of a node's documents in three steps,
each a conditional read-modify-write (``io.rmw``) of the objects it touches:

1. *mark*: in every copy above the node, add a pending token for it (``hierarchy.pending``)
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
enclosing directories too (``hierarchy.enclosing``).
"""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ChunkstoreError
from ..io.rmw import UNCHANGED, WriteUnit, commit_units, update_object
from ..metadata import consolidated as cons
from ..metadata.json_io import dump_json, load_json
from ..metadata.nodes import (
    GroupMetadata,
    GroupMetadataV2,
    GroupMetadataV3,
    NodeMetadata,
    is_array,
    join_path,
    parse_node,
    where_prefix,
)
from ..storage.base import Store
from .copy_docs import CopyDoc
from .enclosing import StaleConsolidatedMetadataWarning, enclosing_copies
from .paths import ancestors, between, relative
from .pending import (
    PENDING_KEY,
    Pending,
    drops_subtree,
    new_token,
    parse_pending,
    purge,
    token_value,
)
from .pending import below_pending_subtree as _waits
from .reading import read_node, read_nodes, walk_descendants

V2_KEY = cons.V2_KEY
_VERIFY_ROUNDS = 8

__all__ = ["Consolidated", "StaleConsolidatedMetadataWarning", "consolidate", "guarded_change",
           "holds_consolidated", "read_consolidated", "refresh_consolidated"]

#: test hook: called with the name of each step of :func:`guarded_change` ("marked",
#: "committed", "settled"; ``hierarchy.documents`` adds "main-committed" between the two
#: documents of a v2 node), e.g. to ``os._exit`` there and check what a crash leaves
crash_hook: Callable[[str], None] | None = None


def crash_point(step: str) -> None:
    """Call :data:`crash_hook` (a no-op unless a test set it)."""
    if crash_hook is not None:
        crash_hook(step)


class Consolidated:
    """An in-memory snapshot of every node below the group at ``root`` (paths relative
    to it), shared by the Group objects reached from it; their own writes keep it current
    (the stored copy is kept current by :func:`guarded_change`)."""

    def __init__(self, root: str, entries: dict[str, NodeMetadata]) -> None:
        self.root, self.entries = root, entries

    def rel(self, path: str) -> str:
        """``path`` relative to the snapshot's group."""
        return relative(path, self.root)

    def lookup(self, path: str) -> NodeMetadata | None:
        """The snapshot's metadata of the node at ``path`` (None: not listed)."""
        return self.entries.get(self.rel(path))

    def below(self, path: str) -> dict[str, NodeMetadata]:
        """The entries below ``path``, keyed relative to it."""
        return cons.children_of(self.entries, self.rel(path))

    def put(self, path: str, node: NodeMetadata | None) -> None:
        """Record ``node`` at ``path`` (None: it and everything below it are gone)."""
        rel = self.rel(path)
        if not rel:
            return
        if node is None or is_array(node):
            self.entries = _without_below(self.entries, rel, keep_self=node is not None)
        if node is not None:
            self.entries[rel] = node


def _without_below(entries: dict[str, NodeMetadata], rel: str, keep_self: bool = False
                   ) -> dict[str, NodeMetadata]:
    """``entries`` without those below ``rel`` (and without ``rel`` itself unless kept)."""
    return {k: v for k, v in entries.items()
            if not k.startswith(rel + "/") and (keep_self or k != rel)}


def _depth(rel: str) -> int:
    return rel.count("/")


# -- entries from the store ---------------------------------------------------------------
def _apply(entries: dict[str, Any], store: Store, group: str, path: str,
           zarr_format: int) -> dict[str, Any]:
    """``entries`` of the group at ``group`` with the entry of ``path`` (and of the groups
    between that are not listed yet) set from the store's current documents; a node that
    is gone drops out with everything below it."""
    chain = between(group, path)
    need = [p for p in chain[:-1] if relative(p, group) not in entries] + chain[-1:]
    nodes = read_nodes(store, need, zarr_format)
    for p in chain:
        if p not in nodes:
            continue
        rel, node = relative(p, group), nodes[p]
        if node is None:
            return _without_below(entries, rel)
        if is_array(node):
            entries = _without_below(entries, rel, keep_self=True)
        entries[rel] = node
    return entries


def _restore(entries: dict[str, NodeMetadata], store: Store, group: str, zarr_format: int,
             paths: Sequence[str], subtrees: set[str], pending: Pending
             ) -> dict[str, NodeMetadata]:
    """``entries`` with the entries of ``paths`` (relative to the group) written back from
    the store; those in ``subtrees`` (their subtree was taken out) are walked again whole.
    A path below a node whose subtree is still pending waits for that node's writer."""
    walked: list[str] = []
    for rel in sorted(paths, key=_depth):
        if _waits(rel, pending) or any(rel.startswith(w + "/") for w in walked):
            continue
        entries = _apply(entries, store, group, join_path(group, rel), zarr_format)
        node = entries.get(rel)
        if rel in subtrees and node is not None and not is_array(node):
            below = walk_descendants(store, join_path(group, rel), zarr_format)
            entries = _without_below(entries, rel, keep_self=True)
            entries.update({f"{rel}/{k}": v for k, v in below.items()})
            walked.append(rel)
    return entries


def read_consolidated(store: Store, path: str, root: GroupMetadata,
                      v2_doc: bytes | None) -> dict[str, NodeMetadata] | None:
    """The consolidated entries of the group at ``path`` (``root`` is its metadata,
    ``v2_doc`` its ``.zmetadata``), or None when it has none. The entries of nodes with a
    pending mark (a writer is changing them now, or was killed while doing so) are read
    from the nodes' own documents: a consolidated open never shows a stale entry."""
    if isinstance(root, GroupMetadataV3):
        if root.consolidated_metadata is None:
            return None
        where = f"{where_prefix(store, path)}/zarr.json"
        entries = cons.parse_v3_inline(root.consolidated_metadata, where)
        pending = parse_pending(root.consolidated_metadata.get(PENDING_KEY), where)
        fmt = 3
    else:
        if v2_doc is None:
            return None
        where = f"{where_prefix(store, path)}/{V2_KEY}"
        entries = cons.parse_v2_document(v2_doc, where)
        pending = _v2_pending(v2_doc, where)
        fmt = 2
    if pending:
        subtrees = {rel for rel, tokens in pending.items() if drops_subtree(tokens)}
        entries = _restore(entries, store, path, fmt, list(pending), subtrees, {})
    return entries


def _v2_pending(raw: bytes, where: str) -> Pending:
    if f'"{PENDING_KEY}"'.encode() not in raw:
        return {}
    return parse_pending(load_json(raw, where).get(PENDING_KEY), where)


# -- where the copies are -----------------------------------------------------------------
@dataclass(frozen=True)
class Copy:
    """A consolidated copy: the group at ``group`` of ``home`` in format ``fmt``. ``home``
    is the store of the node being changed, or (``enclosing``) the store of a group's
    directory above that store's root, where the node at ``p`` is at ``prefix/p``."""

    home: Store
    group: str
    fmt: int
    prefix: str = ""
    enclosing: bool = False

    def at(self, path: str) -> str:
        """Where the node at ``path`` of the changed store is in ``home``."""
        if not self.prefix:
            return path
        return join_path(self.prefix, path) if path else self.prefix

    def rel(self, path: str) -> str | None:
        """``path`` relative to the copy's group; None unless strictly below it (``""``
        is never returned: a v2 group's own ``.zmetadata`` holds no entry for itself)."""
        at = self.at(path)
        if at == self.group or (self.group and not at.startswith(self.group + "/")):
            return None
        return relative(at, self.group)


def holds_consolidated(raw: bytes | None, zarr_format: int) -> bool:
    """Whether a group's raw ``zarr.json`` (v3) or ``.zmetadata`` (v2) is a consolidated
    copy (a cheap test: the v3 document is parsed only when the copy is updated)."""
    if raw is None:
        return False
    return zarr_format == 2 or b'"consolidated_metadata"' in raw


def _candidates(paths: Sequence[str], zarr_format: int | None) -> list[tuple[str, int]]:
    """Where copies above ``paths`` may be: their ancestors, and (v2) the nodes' own
    ``.zmetadata``, which copies a v2 group's attributes."""
    out: list[tuple[str, int]] = []
    for path in paths:
        above = ancestors(path)
        if zarr_format in (None, 3):
            out += [(p, 3) for p in above]
        if zarr_format in (None, 2):
            out += [(p, 2) for p in [*above, path]]
    return list(dict.fromkeys(out))


def find_copies(store: Store, paths: Sequence[str], zarr_format: int | None, *,
                groups: Sequence[str] | None = None, skip: Sequence[Copy] = (),
                enclosing: bool = True) -> list[Copy]:
    """The consolidated copies above the nodes at ``paths``: one batched read of the
    candidates' documents (those in ``skip`` excepted), unless the caller lists the
    groups holding copies in ``groups``; then those of enclosing directories."""
    known = {(c.group, c.fmt) for c in skip if not c.enclosing}
    candidates = [c for c in _candidates(paths, zarr_format) if c not in known]
    if groups is not None:
        wanted = set(groups)
        found = [c for c in candidates if c[0] in wanted]
    else:
        keys = [join_path(p, "zarr.json" if fmt == 3 else V2_KEY) for p, fmt in candidates]
        raw = store.get_many(keys) if keys else []
        found = [c for c, blob in zip(candidates, raw, strict=True)
                 if holds_consolidated(blob, c[1])]
    copies = [Copy(store, g, fmt) for g, fmt in found]
    if enclosing:
        formats = (zarr_format,) if zarr_format is not None else (3, 2)
        for fmt in formats:
            copies += [Copy(home, "", fmt, prefix=rel, enclosing=True)
                       for home, rel in enclosing_copies(store, fmt)]
    return copies


# -- updating a copy ------------------------------------------------------------------------
#: an update of a copy's entries (NodeMetadata, or entries as stored) and marks
Edit = Callable[[dict[str, Any], Pending], tuple[dict[str, Any], Pending]]


def _unit(copy: Copy, make_edit: Callable[[Copy], Edit], root_too: bool) -> WriteUnit:
    """A read-modify-write of ``copy``: its entries and marks through ``make_edit(copy)``
    (on the stored document parsed only as far as that needs: ``hierarchy.copy_docs``);
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


def _v2_bytes(root: GroupMetadataV2, entries: dict[str, NodeMetadata], pending: Pending,
              where: str) -> bytes:
    raw = cons.v2_document(root, entries, where)
    if not pending:
        return raw
    doc = load_json(raw, where)
    doc[PENDING_KEY] = pending
    return dump_json(doc, where)


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
                    entries = _without_below(entries, rel)
                elif drop == "self" and not any(k.startswith(rel + "/") for k in entries):
                    entries.pop(rel, None)  # never a group's entry while members are listed
            entries = _restore(entries, copy.home, copy.group, copy.fmt, sorted(freed),
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
            entries = _restore(entries, copy.home, copy.group, copy.fmt, sorted(freed),
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
            commit_units(group[0].home, units, synchronizer=synchronizer, cpu_bound=False)
            done += group
            continue
        for c, unit in zip(group, units, strict=True):
            try:
                commit_units(c.home, [unit], synchronizer=synchronizer, cpu_bound=False)
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
    drop)``: see ``hierarchy.pending``), so that no consolidated copy above them ever
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
        crash_point("marked")
    try:
        result = act()
    except BaseException:
        if marked:  # nothing (or not all) committed: take the marks back, keep the error
            with contextlib.suppress(Exception):
                _commit(marked, _settle(paths, token), synchronizer, paths)
        raise
    crash_point("committed")
    later: list[Copy] = []
    if groups is None:  # a copy made meanwhile (consolidate_metadata) lists the old node
        later = find_copies(store, paths, zarr_format, skip=copies, enclosing=False)
    unmarked = [c for c in copies if c not in marked and not c.enclosing]
    _commit([*marked, *unmarked, *later], _settle(paths, token), synchronizer, paths)
    crash_point("settled")
    return result


def refresh_consolidated(store: Store, path: str, *, zarr_format: int | None = None,
                         synchronizer: Any = None, groups: Sequence[str] | None = None) -> None:
    """Bring the entry of the node at ``path`` up to date in every consolidated copy above
    it (v2: its own ``.zmetadata`` too, which copies its attributes), without marking:
    for callers that changed nothing themselves (:func:`guarded_change` does both)."""
    copies = find_copies(store, [path], zarr_format, groups=groups)
    _commit(copies, _settle([path], None), synchronizer, [path])


# -- consolidating ----------------------------------------------------------------------
def _fingerprint(entries: dict[str, NodeMetadata]) -> str:
    """A comparable form of consolidated entries (NaN fill values compare equal here)."""
    return json.dumps({k: [v.to_json(), v.attributes] for k, v in entries.items()},
                      sort_keys=True, default=str)


def _stored(entries: dict[str, NodeMetadata], pending: Pending) -> dict[str, NodeMetadata]:
    """The entries to store while ``pending`` marks stand (those their writers took out)."""
    out = dict(entries)
    for rel in sorted(pending, key=_depth):
        drops = {v[3] for v in pending[rel].values()}
        if "subtree" in drops:
            out = _without_below(out, rel)
        elif "self" in drops and not any(k.startswith(rel + "/") for k in out):
            out.pop(rel, None)
    return out


def consolidate(store: Store, path: str, group: GroupMetadata, *, synchronizer: Any = None
                ) -> tuple[GroupMetadata, dict[str, NodeMetadata]]:
    """Write the consolidated metadata of the group at ``path`` (``group``: its metadata,
    which gives the format) from the real tree, and return the group's metadata and the
    entries.

    The tree is walked inside the conditional commit, then walked again: a member that
    changed before the copy existed (so its own refresh found nothing to update) is
    caught by the second walk and the copy rewritten, until both agree. Pending marks of
    writers still at work are kept (with their entries out of the stored copy); those of
    dead writers are dropped."""
    fmt = group.zarr_format
    where = where_prefix(store, path)
    state: dict[str, Any] = {}

    def build_v3(old: bytes | None) -> Any:
        node = parse_node({"zarr.json": old}, where, 3) if old is not None else group
        if not isinstance(node, GroupMetadataV3):
            node = group
        field = getattr(node, "consolidated_metadata", None) or {}
        pending, _, _ = purge(parse_pending(field.get(PENDING_KEY), f"{where}/zarr.json"))
        entries = walk_descendants(store, path, 3)
        new_field = cons.v3_inline(_stored(entries, pending))
        if pending:
            new_field[PENDING_KEY] = pending
        state["entries"], state["root"] = entries, node.replace(consolidated_metadata=new_field)
        return state["root"].documents(f"{where}/zarr.json")["zarr.json"]

    def build_v2(old: bytes | None) -> Any:
        at = f"{where}/{V2_KEY}"
        pending = purge(_v2_pending(old, at))[0] if old is not None else {}
        root = read_node(store, path, 2, kind="group")
        entries = walk_descendants(store, path, 2)
        state["entries"], state["root"] = entries, root
        return _v2_bytes(root, _stored(entries, pending), pending, at)  # type: ignore[arg-type]

    key = join_path(path, "zarr.json" if fmt == 3 else V2_KEY)
    for _ in range(_VERIFY_ROUNDS):
        update_object(store, key, build_v3 if fmt == 3 else build_v2, synchronizer=synchronizer,
                      label=f"consolidated metadata of {where}")
        if _fingerprint(walk_descendants(store, path, fmt)) == _fingerprint(state["entries"]):
            break
    return state["root"], state["entries"]
