"""``copy`` of a whole group: every group and array below it into a new hierarchy (e.g. a
Zarr v2 store migrated to v3 in one command), array by array and block by block (bounded
memory), with one progress line over all the arrays' blocks.

What each array keeps is what ``chunkstore.copy`` keeps: attributes, chunks (and shards
between v3 arrays), fill value, dimension names (v2's ``_ARRAY_DIMENSIONS`` attribute
becomes v3's ``dimension_names`` and back); ``--compressor`` applies to every array. A
source opened from consolidated metadata gives a consolidated copy.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

from chunkstore.api.consolidation import consolidate_metadata
from chunkstore.api.creation import jsonable_attrs, like_array_kwargs
from chunkstore.api.opening import open_group
from chunkstore.array.grids import grid_arguments
from chunkstore.cli.args import storage_options
from chunkstore.cli.errors import CLIError
from chunkstore.cli.nodes import is_array, is_consolidated
from chunkstore.cli.stores import reading, volatile_warning, where
from chunkstore.group.like_args import regular_chunks
from chunkstore.io.copy import block_parts
from chunkstore.io.overlap import refuse_onto_itself
from chunkstore.nodes.paths import normalize_path
from chunkstore.progress import TerminalProgress
from chunkstore.sizes import format_bytes
from chunkstore.storage.resolve import resolve_store

#: decoded bytes copied per block (whole chunks or shards), as an array copy does
BLOCK_BYTES = 64 * 2**20


def _refuse_array_options(args: argparse.Namespace) -> None:
    if args.dst.lower().endswith(".npy"):
        raise CLIError(f"{where(args.src, args.node)}: is a group, and a .npy file holds one "
                       f"array (pick one with --node; 'chunkstore ls -r {args.src}' lists them)")
    for flag, value in (("--chunks", args.chunks), ("--shards", args.shards)):
        if value is not None:
            raise CLIError(f"{where(args.src, args.node)}: is a group; {flag} is for one array "
                           f"(copy one with --node ARRAY, or leave {flag} out to keep each "
                           "array's own)")


def _array_kwargs(array: Any, zarr_format: int, compressors: Any) -> dict[str, Any]:
    kwargs = like_array_kwargs(array, {"zarr_format": zarr_format})
    chunks = regular_chunks(array)
    if zarr_format == 3 and (array.layout.shards is not None or array.layout.edges is not None):
        chunks, shards = grid_arguments(array.metadata)  # the same grid (of shards)
        if shards is not None:
            kwargs["shards"] = shards
    return {"shape": tuple(array.shape), "dtype": array.dtype,
            "chunks": chunks, "compressors": compressors,
            "attributes": jsonable_attrs(array, f"array {array.name!r}"), **kwargs}


def _create_hierarchy(args: argparse.Namespace, group: Any, compressors: Any
                      ) -> tuple[Any, list[tuple[Any, Any]], int]:
    """The target group with every member created (no data yet): ``(root, [(source array,
    target array)], number of groups below the root)``."""
    options = storage_options(args.storage_option)
    store = resolve_store(args.dst, storage_options=options)
    zarr_format = args.zarr_format or group.zarr_format
    # the walk reads the documents themselves (one batched read per level), not a
    # consolidated snapshot that could miss a node added since (e.g. by another library)
    walk = open_group(group.store, mode="r", path=group.path, zarr_format=group.zarr_format,
                      use_consolidated=False)
    with reading(args.src):
        members = sorted(walk.members(max_depth=None), key=lambda m: m[0].split("/"))
    root = open_group(store, "w" if args.overwrite else "w-", normalize_path(args.dst_node),
                      zarr_format=zarr_format,
                      attributes=jsonable_attrs(group, f"group {group.name!r}"))
    pairs, ngroups = [], 0
    for rel, member in members:
        if is_array(member):
            pairs.append((member, root.create_array(
                rel, **_array_kwargs(member, zarr_format, compressors))))
        else:
            root.create_group(rel, attributes=jsonable_attrs(member, f"group {member.name!r}"))
            ngroups += 1
    return root, pairs, ngroups


def copy_group(args: argparse.Namespace, group: Any, compressors: Any,
               progress: TerminalProgress) -> int:
    """Copy the group ``group`` (SRC, or its --node) and everything below it to DST
    (--dst-node), showing one progress line over all blocks and a summary."""
    _refuse_array_options(args)
    options = storage_options(args.storage_option)
    # never over its own source (before anything is created or deleted)
    refuse_onto_itself(group, resolve_store(args.dst, storage_options=options),
                       normalize_path(args.dst_node), "copy")
    warning = volatile_warning(args.dst)
    if warning:
        print(f"chunkstore {args.command}: warning: {warning}", file=sys.stderr)
    root, pairs, ngroups = _create_hierarchy(args, group, compressors)
    work = [(source, target, block) for source, target in pairs
            for block, _ in block_parts(target.layout, tuple(slice(0, n) for n in target.shape),
                                        target.dtype.itemsize, BLOCK_BYTES)]
    bar = progress.step("copy", "blocks")
    done = 0
    with reading(args.src):
        for i, (source, target, block) in enumerate(work, 1):
            data = np.asarray(source[block])
            target[block] = data
            done += data.nbytes
            bar(i, len(work), done)
    consolidated = is_consolidated(group)
    if consolidated:
        consolidate_metadata(root.store, root.path)
    arrays = f"{len(pairs)} array{'' if len(pairs) == 1 else 's'}"
    groups = f"{ngroups} group{'' if ngroups == 1 else 's'}"
    progress.summary(f"copied {where(args.src, args.node)} -> {args.dst} (group {root.name}: "
                     f"{arrays} and {groups} below it, {format_bytes(done)}, Zarr "
                     f"v{root.zarr_format}{', consolidated' if consolidated else ''})")
    return 0
