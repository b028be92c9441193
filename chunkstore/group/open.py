"""Opening and creating groups by mode: ``Group.open``, ``Group.from_store`` and the
machinery under ``chunkstore.open_group``. A mixin of
:class:`chunkstore.group.group.Group`, whose constructor its class methods call."""

from __future__ import annotations

from typing import Any, Self

from chunkstore.errors import GroupNotFoundError, MetadataError, NodeTypeError
from chunkstore.metadata import consolidated as cons
from chunkstore.metadata.json_io import check_json_value
from chunkstore.metadata.nodes import (
    GroupMetadata,
    GroupMetadataV2,
    GroupMetadataV3,
    is_array,
    parse_node,
    where_prefix,
)
from chunkstore.nodes.consolidated import Consolidated, read_consolidated
from chunkstore.nodes.paths import normalize_path
from chunkstore.nodes.placement import place_node
from chunkstore.nodes.reading import read_documents, read_node
from chunkstore.storage.base import Store
from chunkstore.storage.resolve import resolve_store

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


class GroupOpening:
    """Class methods that open or create a group (see the module docstring)."""

    @classmethod
    def open(cls, store: Any, zarr_format: int | None = None, *, path: str | None = None,
             mode: str = "r+", use_consolidated: bool | None = None,
             storage_options: dict | None = None, synchronizer: Any = None) -> Self:
        """Open the existing group at ``path`` of ``store`` (zarr-python's
        ``Group.open``; ``zarr_format`` None reads either format)."""
        check_mode(mode)
        st = resolve_store(store, mode=mode, storage_options=storage_options)
        return cls._open_at(st, mode, normalize_path(path), zarr_format=zarr_format,
                            use_consolidated=use_consolidated, synchronizer=synchronizer)

    @classmethod
    def from_store(cls, store: Any, *, attributes: dict | None = None, zarr_format: int = 3,
                   overwrite: bool = False, path: str | None = None,
                   storage_options: dict | None = None) -> Self:
        """Create a new group at ``path`` of ``store`` (zarr-python's ``Group.from_store``);
        an existing node there raises ContainsGroupError/ContainsArrayError unless
        ``overwrite``."""
        st = resolve_store(store, mode="w" if overwrite else "a", storage_options=storage_options)
        return cls._create(st, normalize_path(path), zarr_format, attributes, overwrite, None)

    @classmethod
    def _create(cls, store: Store, path: str, zarr_format: int, attributes: dict | None,
                overwrite: bool, synchronizer: Any, checked: bool = False) -> Self:
        if zarr_format not in (2, 3):
            raise ValueError(f"{where_prefix(store, path)}: zarr_format must be 2 or 3, got "
                             f"{zarr_format!r}")
        attrs = check_json_value(dict(attributes or {}),
                                 f"{where_prefix(store, path)}: attributes")
        meta: GroupMetadata = (GroupMetadataV3(attributes=attrs) if zarr_format == 3
                               else GroupMetadataV2(attributes=attrs))
        place_node(store, path, meta, overwrite=overwrite, checked=checked,
                   synchronizer=synchronizer)
        return cls(store, path, meta, synchronizer=synchronizer)  # type: ignore[call-arg]

    @classmethod
    def _open_at(cls, st: Store, mode: str, path: str, *, zarr_format: int | None = None,
                 attributes: dict | None = None, use_consolidated: bool | None = None,
                 synchronizer: Any = None) -> Self:
        """``open_group`` on a resolved store and a normalized path: one read of the
        group's documents (``.zmetadata`` with the v2 ones), then by ``mode``."""
        docs: dict[str, bytes | None] = {}
        if mode not in ("w", "w-"):
            extra = () if use_consolidated is False else (cons.V2_KEY,)
            docs = read_documents(st, [path], zarr_format, "group", extra)[path]
        return cls._from_documents(st, mode, path, docs, zarr_format=zarr_format,
                                   attributes=attributes, use_consolidated=use_consolidated,
                                   synchronizer=synchronizer)

    @classmethod
    def _from_documents(cls, st: Store, mode: str, path: str, docs: dict[str, bytes | None], *,
                        zarr_format: int | None = None, attributes: dict | None = None,
                        use_consolidated: bool | None = None, synchronizer: Any = None
                        ) -> Self:
        """Open (or by ``mode`` create) the group at ``path`` once its documents are read
        (in ``zarr_format``, with ``.zmetadata`` for a v2 group; ignored in "w"/"w-")."""
        if mode in ("w", "w-"):
            return cls._create(st, path, zarr_format or 3, attributes, mode == "w",
                               synchronizer)
        node = parse_node(docs, where_prefix(st, path), zarr_format)
        if node is None:
            if mode in ("r", "r+"):
                raise GroupNotFoundError(f"no group at path {path or '/'!r} in {st!r}")
            return cls._create(st, path, zarr_format or 3, attributes, False, synchronizer,
                               checked=zarr_format is None)
        if is_array(node):
            raise NodeTypeError(f"path {path or '/'!r} in {st!r} is an array, not a group")
        entries = None
        if use_consolidated is not False:
            entries = read_consolidated(st, path, node, docs.get(cons.V2_KEY))  # type: ignore[arg-type]
            if entries is None and use_consolidated:
                raise MetadataError(f"Consolidated metadata requested with "
                                    f"use_consolidated=True, but group {path or '/'!r} in "
                                    f"{st!r} has none")
        snapshot = Consolidated(path, entries) if entries is not None else None
        return cls(st, path, node, read_only=mode == "r",  # type: ignore[call-arg]
                   consolidated=snapshot, synchronizer=synchronizer)
