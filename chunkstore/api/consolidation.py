"""``consolidate_metadata``: every node's metadata below a group, in one document."""

from __future__ import annotations

from typing import Any

from chunkstore.api.opening import open_group
from chunkstore.group.group import Group
from chunkstore.nodes.consolidated import Consolidated, consolidate
from chunkstore.nodes.paths import normalize_path
from chunkstore.storage.resolve import resolve_store


def consolidate_metadata(store: Any, path: str | None = None, zarr_format: int | None = None,
                         *, storage_options: dict | None = None) -> Group:
    """Gather the metadata of every node below the group at ``path`` into one document
    (v3: inside its ``zarr.json``; v2: ``.zmetadata``), as zarr-python does, and return the
    group opened from it. ``zarr_format``: the group's format (None: whichever is there;
    a group of the other format raises, as in zarr-python).

    Later changes to any node below (from any handle) keep the copy current."""
    st = resolve_store(store, mode="r+", storage_options=storage_options)
    path = normalize_path(path)
    g = open_group(st, "r+", path, zarr_format=zarr_format, use_consolidated=False)
    root, entries = consolidate(st, path, g._meta)
    return Group(st, path, root, consolidated=Consolidated(path, entries))
