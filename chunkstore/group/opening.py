"""What opening a group needs besides the Group class: the modes of ``open_group``, the
group's own metadata document, and the consolidated snapshot its members are read from."""

from __future__ import annotations

from chunkstore.errors import MetadataError, NodeTypeError
from chunkstore.metadata.nodes import GroupMetadata, is_array
from chunkstore.nodes.consolidated import Consolidated, read_consolidated
from chunkstore.nodes.reading import read_node
from chunkstore.storage.base import Store

MODES = ("r", "r+", "a", "w", "w-")


def check_mode(mode: str) -> None:
    """ValueError unless ``mode`` is one of "r", "r+", "a", "w", "w-"."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")


def load_group(store: Store, path: str) -> GroupMetadata:
    """The metadata of the group at ``path`` (NodeTypeError for an array)."""
    node = read_node(store, path, kind="group")
    if is_array(node):
        raise NodeTypeError(f"path {path or '/'!r} in {store!r} is an array, not a group")
    return node  # type: ignore[return-value]


def consolidated_of(store: Store, path: str, node: GroupMetadata, v2_document: bytes | None,
                    use_consolidated: bool | None) -> Consolidated | None:
    """The consolidated snapshot of the group ``node`` at ``path`` (``v2_document``: its
    ``.zmetadata`` as read, if any), or None when it has none or ``use_consolidated`` is
    False; MetadataError when ``use_consolidated`` is True and it has none."""
    if use_consolidated is False:
        return None
    entries = read_consolidated(store, path, node, v2_document)
    if entries is None and use_consolidated:
        raise MetadataError(f"Consolidated metadata requested with use_consolidated=True, "
                            f"but group {path or '/'!r} in {store!r} has none")
    return Consolidated(path, entries) if entries is not None else None
