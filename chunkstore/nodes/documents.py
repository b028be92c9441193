"""Node documents in a store: the one place that reads and writes ``zarr.json``,
``.zarray``, ``.zgroup`` and ``.zattrs``.

* :func:`read_node` / :func:`try_read_node` / :func:`read_nodes` / :func:`probe_nodes`:
  format-aware batched reads (see ``nodes.reading``).
* :func:`write_node`: store a node's documents whole (a new node), and list it in the
  consolidated copies above it.
* :func:`update_node`: a read-modify-write of a node's documents through the conditional
  commit of ``io.rmw``: ``change(current) -> new`` is applied to the *stored* document at
  each attempt, so concurrent writers (appends, attributes) never lose an update; the
  consolidated copies above it follow.
* :func:`delete_node`: remove a node and its subtree, and drop it from consolidated copies.

Each of them runs inside ``consolidated.guarded_change``: the node is marked pending in
every consolidated copy above it before its documents are committed and settled after,
so a writer killed at any point never leaves a copy that shows a stale entry as current.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from chunkstore.errors import (
    ContainsArrayError,
    ContainsGroupError,
    MetadataError,
    NodeNotFoundError,
)
from chunkstore.io.cache import chunk_cache
from chunkstore.io.rmw import UNCHANGED, update_object
from chunkstore.metadata.json_io import dump_json, load_json
from chunkstore.metadata.nodes import (
    V2_KIND_KEY,
    NodeMetadata,
    is_array,
    join_path,
    node_keys,
    parse_node,
    where_prefix,
)
from chunkstore.nodes.consolidated import guarded_change, refresh_consolidated
from chunkstore.nodes.reading import probe_nodes, read_node, read_nodes, try_read_node
from chunkstore.storage.base import ABSENT, Store

Change = Callable[[NodeMetadata], NodeMetadata]
_MISSING = object()

__all__ = ["delete_node", "probe_nodes", "read_node", "read_nodes", "refresh_consolidated",
           "try_read_node", "update_node", "write_detached", "write_node", "write_nodes"]


def _documents(store: Store, path: str, meta: NodeMetadata) -> dict[str, bytes]:
    where = f"{where_prefix(store, path)}/{node_keys(meta)[0]}"
    return {join_path(path, k): v for k, v in meta.documents(where).items()}


def write_nodes(store: Store, nodes: Mapping[str, NodeMetadata], *, synchronizer: Any = None,
                consolidating: Sequence[str] | None = None, created: str | None = None
                ) -> None:
    """Store the documents of several nodes (path -> metadata, e.g. a new node and the
    groups created above it) with one batched write, each document replaced atomically;
    then bring the consolidated copies above them up to date. ``consolidating``: the
    groups holding such copies when the caller knows them (it has just read them; ``[]``
    skips the refresh), else they are found by reading the store.

    ``created``: the path of a node being created where the caller found none (and the
    groups above it it found missing are the other ``nodes``): each node's metadata
    document is committed only if still absent, so of two writers creating one node at
    once the later raises ContainsArrayError / ContainsGroupError instead of replacing
    the other's (on stores with conditional commits), and a group above it that another
    writer created meanwhile is kept as that writer made it."""
    per_node = {path: _documents(store, path, meta) for path, meta in nodes.items()}
    leaves = [p for p in nodes if not any(q.startswith(p + "/") or (not p and q)
                                          for q in nodes if q != p)]
    if not leaves:
        return
    formats = {nodes[p].zarr_format for p in leaves}
    fmt = formats.pop() if len(formats) == 1 else None
    docs = {k: v for d in per_node.values() for k, v in d.items()}
    act = ((lambda: _create_nodes(store, nodes, per_node, created)) if created is not None
           else (lambda: store.set_many(docs) if docs else None))
    # the leaves' entries add the unlisted groups between, too
    guarded_change(store, [(p, "self") for p in leaves], fmt, act,
                   synchronizer=synchronizer, groups=consolidating)


def _create_nodes(store: Store, nodes: Mapping[str, NodeMetadata],
                  per_node: Mapping[str, Mapping[str, bytes]], created: str) -> None:
    """Commit each node's metadata document only where none is stored, then the rest of
    the documents of the nodes so created (see ``write_nodes``)."""
    firsts = {p: join_path(p, node_keys(meta)[0]) for p, meta in nodes.items()}
    done = store.commit_many([(firsts[p], per_node[p][firsts[p]], ABSENT) for p in nodes])
    rest: dict[str, bytes] = {}
    for path, applied in zip(nodes, done, strict=True):
        if applied:
            rest.update((k, v) for k, v in per_node[path].items() if k != firsts[path])
        elif path == created:
            raise _taken(store, path)
    if created in nodes and nodes[created].zarr_format == 2:
        # a v2 array and group have different documents: one made by another writer
        # meanwhile means neither of us may stay (both hear of it: no silent loss)
        mine = firsts[created]
        other = mine[: -len(".zarray")] + (".zgroup" if mine.endswith(".zarray") else ".zarray")
        if store.get(other) is not None:
            store.delete(mine)
            raise _taken(store, created)
    if rest:
        store.set_many(rest)


def _taken(store: Store, path: str) -> Exception:
    """The error for a node another writer created at ``path`` since the caller looked."""
    names = ("zarr.json", ".zarray", ".zgroup")
    values = store.get_many([join_path(path, n) for n in names])
    array = values[1] is not None
    if values[0] is not None:
        with contextlib.suppress(ValueError, AttributeError):
            array = json.loads(values[0]).get("node_type") == "array"
    kind, what = ((ContainsArrayError, "an array") if array else
                  (ContainsGroupError, "a group"))
    return kind(f"{what} was created at path {path or '/'!r} in {store!r} by another writer "
                "since this one looked (pass overwrite=True to replace it)")


def write_node(store: Store, path: str, meta: NodeMetadata, *, synchronizer: Any = None,
               consolidating: Sequence[str] | None = None) -> None:
    """Store a node's documents whole (a new node, or one replaced on purpose), then
    bring the consolidated copies above it up to date (see :func:`write_nodes`)."""
    write_nodes(store, {path: meta}, synchronizer=synchronizer, consolidating=consolidating)


def write_detached(store: Store, path: str, meta: NodeMetadata) -> None:
    """Store the documents of a node that is in no hierarchy (scratch arrays: see
    ``group.scratch``): no group is created above it and no consolidated copy lists
    it, so no listing of a group ever shows it."""
    store.set_many(_documents(store, path, meta))


def delete_node(store: Store, path: str, *, zarr_format: int | None = None,
                synchronizer: Any = None, consolidating: Sequence[str] | None = None) -> None:
    """Remove the node at ``path`` and everything below it, and its entries in the
    consolidated copies above it (``consolidating``: as for :func:`write_nodes`)."""
    try:
        guarded_change(store, [(path, "subtree")], zarr_format,
                       lambda: store.delete_prefix(path), synchronizer=synchronizer,
                       groups=consolidating)
    finally:  # decoded chunks of what was there must not outlive it
        chunk_cache.forget_prefix(store, path)


def _locate(store: Store, path: str, zarr_format: int | None, kind: str | None
            ) -> tuple[int, str]:
    """(format, kind) of the node at ``path``, probing the store only when the caller
    did not say (v3 needs no kind: one document holds everything)."""
    if zarr_format == 3 or (zarr_format == 2 and kind is not None):
        return zarr_format, kind or "node"
    node = probe_nodes(store, [path])[path]
    if node is None or (zarr_format is not None and node.zarr_format != zarr_format):
        raise NodeNotFoundError(f"no array or group at path {path or '/'!r} in {store!r}")
    return node.zarr_format, "array" if is_array(node) else "group"


def _checked(new: Any, current: NodeMetadata, where: str) -> NodeMetadata:
    if type(new) is not type(current):
        raise MetadataError(f"{where}: an update must keep the node's kind and format "
                            f"({type(current).__name__}), got {type(new).__name__}")
    return new


def update_node(store: Store, path: str, change: Change, *, synchronizer: Any = None,
                zarr_format: int | None = None, kind: str | None = None) -> NodeMetadata:
    """Read-modify-write the documents of the node at ``path``; returns the committed
    metadata.

    ``change(current) -> new`` gets the metadata as stored at the time of each attempt and
    returns the new metadata (the same object to change nothing). It runs once per
    attempt, and the attempt that commits is the last one it ran for: a side effect of
    ``change`` (e.g. noting the old shape of an append) describes what was committed. The
    document commits only if unchanged since it was read (``io.rmw``), else it is re-read
    and ``change`` applied again: concurrent updates of one node never lose one another.

    v2 keeps attributes in ``.zattrs``, the rest in ``.zarray``/``.zgroup``: ``change``
    runs in the read-modify-write of the latter (``.zattrs`` read fresh alongside); a
    change of attributes is then applied to the stored ``.zattrs`` key by key (each
    added, replaced or removed key, so concurrent writers of other keys keep theirs).
    The consolidated copies above the node follow (marked pending before the commit,
    settled after: ``consolidated.guarded_change``). ``zarr_format`` /
    ``kind`` ("array", "group"), when the caller knows them, save a probe of the store;
    ``synchronizer`` adds a lock per document. NodeNotFoundError when there is no node.
    """
    fmt, kind = _locate(store, path, zarr_format, kind)
    prefix = where_prefix(store, path)
    main = "zarr.json" if fmt == 3 else V2_KIND_KEY[kind]
    where = f"{prefix}/{main}"
    attempt: dict[str, NodeMetadata] = {}

    def build(old: bytes | None) -> Any:
        docs: dict[str, bytes | None] = {main: old}
        if fmt == 2:
            docs[".zattrs"] = store.get(join_path(path, ".zattrs"))
        current = parse_node(docs, prefix, fmt)
        if current is None:
            raise NodeNotFoundError(f"no array or group at path {path or '/'!r} in {store!r}")
        new = _checked(change(current), current, where)
        attempt["current"], attempt["new"] = current, new
        if new is current:
            return UNCHANGED
        raw = new.documents(where)[main]
        return UNCHANGED if raw == current.documents(where)[main] else raw

    def act() -> NodeMetadata:
        update_object(store, join_path(path, main), build, synchronizer=synchronizer,
                      label=where)
        current, result = attempt["current"], attempt["new"]
        if fmt == 2 and result.attributes != current.attributes:
            attrs = _merge_attributes(store, path, current.attributes, result.attributes,
                                      synchronizer)
            result = result.replace(attributes=attrs)
        return result

    # the node's entry leaves the copies while it changes, unless members of it are
    # listed (zarr-python cannot open a copy listing members of a group it does not list)
    return guarded_change(store, [(path, "self")], fmt, act, synchronizer=synchronizer)


def _merge_attributes(store: Store, path: str, before: dict[str, Any], after: dict[str, Any],
                      synchronizer: Any) -> dict[str, Any]:
    """Apply the difference ``before`` -> ``after`` to the stored ``.zattrs`` with a
    read-modify-write; returns the committed attributes."""
    key = join_path(path, ".zattrs")
    where = f"{where_prefix(store, path)}/.zattrs"
    committed: dict[str, Any] = {}

    def build(old: bytes | None) -> Any:
        stored = load_json(old, where) if old is not None else {}
        merged = dict(stored)
        for name in set(before) | set(after):
            if name not in after:
                merged.pop(name, None)
            elif before.get(name, _MISSING) != after[name]:
                merged[name] = after[name]
        committed.clear()
        committed.update(merged)
        return UNCHANGED if merged == stored and old is not None else dump_json(merged, where)

    update_object(store, key, build, synchronizer=synchronizer, label=where)
    return dict(committed)
