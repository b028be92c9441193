"""Opening and creating groups, and consolidating their metadata."""

from __future__ import annotations

from typing import Any

from .consolidation import read_consolidated, write_consolidated
from .creation import normalize_path, prepare_node, write_metadata
from .errors import MetadataError, NodeNotFoundError, NodeTypeError
from .group import Consolidated, Group
from .metadata import (
    GroupMetadata,
    GroupMetadataV2,
    GroupMetadataV3,
    is_array,
    parse_node,
)
from .metadata import consolidated as cons
from .metadata.json_io import check_json_value
from .metadata.nodes import describe, read_documents, where_prefix
from .storage.base import Store
from .storage.resolve import resolve_store

_MODES = ("r", "r+", "a", "w", "w-")


def _create_group(store: Store, path: str, zarr_format: int, attributes: dict | None,
                  overwrite: bool, synchronizer: Any, checked: bool = False) -> Group:
    where = describe(store, path, "zarr.json" if zarr_format == 3 else ".zattrs")
    attrs = check_json_value(dict(attributes or {}), f"{where}: attributes")
    if zarr_format not in (2, 3):
        raise ValueError(f"{where}: zarr_format must be 2 or 3, got {zarr_format!r}")
    meta: GroupMetadata = (GroupMetadataV3(attributes=attrs) if zarr_format == 3
                           else GroupMetadataV2(attributes=attrs))
    prepare_node(store, path, zarr_format, overwrite, checked=checked)
    write_metadata(store, path, meta)
    return Group(store, path, meta, synchronizer=synchronizer)


def open_group(store: Any = None, mode: str = "a", path: str | None = None, *,
               zarr_format: int | None = None, attributes: dict | None = None,
               storage_options: dict | None = None, use_consolidated: bool | None = None,
               synchronizer: Any = None) -> Group:
    """Open (or, by ``mode``, create) the group at ``path``.

    A v3 group costs one read (``zarr.json``); the v2 documents (``.zgroup``, ``.zattrs``
    and ``.zmetadata``, in one batch) are read only when ``zarr.json`` is missing or
    ``zarr_format=2``. When the group has consolidated metadata its members come from
    it with no further requests (``use_consolidated=False`` ignores it, ``True``
    requires it).
    """
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")
    st = resolve_store(store, mode=mode, storage_options=storage_options)
    path = normalize_path(path)
    docs: dict[str, bytes | None] = {}
    if mode not in ("w", "w-"):
        extra = () if use_consolidated is False else (cons.V2_KEY,)
        docs = read_documents(st, [path], zarr_format, "group", extra)[path]
    return group_from_documents(st, mode, path, docs, zarr_format=zarr_format,
                                attributes=attributes, use_consolidated=use_consolidated,
                                synchronizer=synchronizer)


def group_from_documents(st: Store, mode: str, path: str, docs: dict[str, bytes | None], *,
                         zarr_format: int | None = None, attributes: dict | None = None,
                         use_consolidated: bool | None = None, synchronizer: Any = None
                         ) -> Group:
    """open_group once the documents at ``path`` are read (by ``read_documents`` in
    ``zarr_format``, with ``.zmetadata`` for a v2 group; ignored in modes "w"/"w-")."""
    if mode in ("w", "w-"):
        return _create_group(st, path, zarr_format or 3, attributes, mode == "w", synchronizer)
    node = parse_node(docs, where_prefix(st, path), zarr_format)
    if node is None:
        if mode in ("r", "r+"):
            raise NodeNotFoundError(f"no group at path {path or '/'!r} in {st!r}")
        return _create_group(st, path, zarr_format or 3, attributes, False, synchronizer,
                             checked=zarr_format is None)
    if is_array(node):
        raise NodeTypeError(f"path {path or '/'!r} in {st!r} is an array, not a group")
    entries = None
    if use_consolidated is not False:
        entries = read_consolidated(st, path, node, docs.get(cons.V2_KEY))  # type: ignore[arg-type]
        if entries is None and use_consolidated:
            raise MetadataError(f"group {path or '/'!r} in {st!r} has no consolidated metadata")
    snapshot = Consolidated(path, entries) if entries is not None else None
    return Group(st, path, node, read_only=mode == "r",  # type: ignore[arg-type]
                 consolidated=snapshot, synchronizer=synchronizer)


def group(store: Any = None, overwrite: bool = False, *, path: str | None = None,
          zarr_format: int | None = None, attributes: dict | None = None,
          storage_options: dict | None = None, synchronizer: Any = None) -> Group:
    """The group at ``path`` of ``store`` (memory when None), created if missing
    (``overwrite=True`` replaces whatever is there).

    >>> g = group()
    >>> g.create_group("bar").name
    '/bar'
    """
    return open_group(store, "w" if overwrite else "a", path, zarr_format=zarr_format,
                      attributes=attributes, storage_options=storage_options,
                      synchronizer=synchronizer)


def consolidate_metadata(store: Any, path: str | None = None, *,
                         storage_options: dict | None = None) -> Group:
    """Gather the metadata of every node below the group at ``path`` into one document
    (v3: inside its ``zarr.json``; v2: ``.zmetadata``), as zarr-python does, and return the
    group opened from it."""
    st = resolve_store(store, mode="r+", storage_options=storage_options)
    path = normalize_path(path)
    g = open_group(st, "r+", path, use_consolidated=False)
    entries = g._descendants(None)  # a group's members are nodes of its own format
    root = write_consolidated(st, path, g.metadata, entries)
    return Group(st, path, root, consolidated=Consolidated(path, entries))
