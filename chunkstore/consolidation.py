"""Reading, writing and refreshing consolidated metadata in a store.

A consolidated document (v3 inline in a group's ``zarr.json``, v2 ``.zmetadata``) is a
copy of its descendants' metadata. A change made to one node (resize, append, new
attributes) must reach every such copy above it, or a later consolidated open reads the
old shape: a silent wrong answer (zarr-python issue 2921). :func:`refresh_ancestors`
does that with one batched read of the ancestors' documents.
"""

from __future__ import annotations

from .creation import write_metadata
from .metadata import GroupMetadata, GroupMetadataV3, NodeMetadata, join_path, load_node
from .metadata import consolidated as cons
from .metadata.nodes import describe, parse_node
from .storage.base import Store


def write_consolidated(store: Store, path: str, root: GroupMetadata,
                       entries: dict[str, NodeMetadata]) -> GroupMetadata:
    """Store ``entries`` as the consolidated metadata of the group at ``path``."""
    if isinstance(root, GroupMetadataV3):
        root = root.replace(consolidated_metadata=cons.v3_inline(entries))
        write_metadata(store, path, root)
    else:
        where = f"{store!r}/{join_path(path, cons.V2_KEY)}"
        store.set(join_path(path, cons.V2_KEY), cons.v2_document(root, entries, where))
    return root


def read_consolidated(store: Store, path: str, root: GroupMetadata,
                      v2_doc: bytes | None) -> dict[str, NodeMetadata] | None:
    """The consolidated entries of the group at ``path``, or None when it has none."""
    where = f"{store!r}/{join_path(path, 'zarr.json' if root.zarr_format == 3 else cons.V2_KEY)}"
    if isinstance(root, GroupMetadataV3):
        if root.consolidated_metadata is None:
            return None
        return cons.parse_v3_inline(root.consolidated_metadata, where)
    return None if v2_doc is None else cons.parse_v2_document(v2_doc, where)


def ancestors(path: str) -> list[str]:
    """The group paths above ``path``, root first: ``"a/b/c"`` -> ``["", "a", "a/b"]``."""
    if not path:
        return []
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(len(parts))]


def refresh_ancestors(store: Store, path: str, node: NodeMetadata) -> None:
    """Replace the entry of ``path`` with ``node`` in every consolidated document above it
    that lists it (one batched read; ancestors without such a document are untouched)."""
    above = ancestors(path)
    if not above:
        return
    doc = "zarr.json" if node.zarr_format == 3 else cons.V2_KEY
    raw = store.get_many([join_path(p, doc) for p in above])
    for group_path, blob in zip(above, raw, strict=True):
        if blob is None:
            continue
        if node.zarr_format == 3:  # the group document itself holds the copy
            root = parse_node({"zarr.json": blob}, describe(store, group_path, "")[:-1], 3)
            if not isinstance(root, GroupMetadataV3) or root.consolidated_metadata is None:
                continue
        else:
            root = load_node(store, group_path, 2, kind="group")
        entries = read_consolidated(store, group_path, root, blob)  # type: ignore[arg-type]
        rel = path[len(group_path):].lstrip("/") if group_path else path
        if entries is None or rel not in entries:
            continue
        entries[rel] = node
        write_consolidated(store, group_path, root, entries)  # type: ignore[arg-type]
