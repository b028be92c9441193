"""``info``, ``tree``, ``ls`` and ``attrs``: what is in a store, as h5ls / ncdump -h show it."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from chunkstore.api.verify import chunks_in, stored_units, unit_grid
from chunkstore.array.array import Array
from chunkstore.array.grids import chunks_label, shards_label
from chunkstore.cli.args import add_level, add_node, add_store_options, storage_options
from chunkstore.cli.stores import open_node, reading
from chunkstore.nodes.info import InfoTable, array_codec_chain, dtype_name, human_bytes

#: longest attributes value shown in the ``info`` table (``attrs`` prints them all)
MAX_ATTRS_SHOWN = 300
#: member names listed in a group's ``info`` table (``ls`` lists them all)
MAX_MEMBERS_SHOWN = 20


def layout_words(array: Any) -> str:
    """``chunks=(8, 8)``, or ``shards=(8, 10) chunks=(4, 5)`` for a sharded array."""
    meta = array.metadata
    chunks = f"chunks={chunks_label(meta)}"
    return f"shards={shards_label(meta)} {chunks}" if array.layout.shards is not None else chunks


def is_array(node: Any) -> bool:
    """Whether ``node`` is an array (else a group)."""
    return isinstance(node, Array)


def is_consolidated(group: Any) -> bool:
    """Whether ``group`` was opened from consolidated metadata (v3 inline or v2
    ``.zmetadata``): its members come without a request per node."""
    return group.info["Consolidated"] == "True"


def dimension_names(array: Any) -> tuple[str, ...] | None:
    """The v3 ``dimension_names``, or xarray's ``_ARRAY_DIMENSIONS`` attribute (v2)."""
    names = array.dimension_names or array.attrs.get("_ARRAY_DIMENSIONS")
    return tuple(str(n) for n in names) if names else None


def _attrs_text(node: Any, path: str) -> str:
    text = json.dumps(node.attrs.asdict(), ensure_ascii=False)
    if len(text) > MAX_ATTRS_SHOWN:
        return f"{text[:MAX_ATTRS_SHOWN]}... (all: chunkstore attrs {path})"
    return text


def array_table(array: Any, path: str) -> InfoTable:
    """The rows ``info`` prints for an array."""
    stored = stored_units(array)
    nbytes, nstored = array.nbytes, array.nbytes_stored
    names = dimension_names(array)
    rows = [("Name", array.name), ("Type", f"array (Zarr v{array.zarr_format})"),
            ("Data type", dtype_name(array.dtype)), ("Shape", str(tuple(array.shape))),
            ("Dimension names", ", ".join(names) if names else "-")]
    layout = array.layout
    if layout.shards is not None and layout.edges is None:
        per_shard = " x ".join(str(s // c) for s, c in zip(layout.shards, layout.chunks,
                                                          strict=True))
        rows += [("Shard shape", str(tuple(layout.shards))),
                 ("Chunk shape", f"{tuple(layout.chunks)} ({per_shard} chunks per shard)")]
    elif layout.shards is not None:
        rows += [("Shard shape", shards_label(array.metadata)),
                 ("Chunk shape", str(tuple(layout.chunks)))]
    else:
        rows.append(("Chunk shape", chunks_label(array.metadata)))
    rows += [("Order", str(array.order)), ("Fill value", str(array.fill_value)),
             ("Codecs", array_codec_chain(array.metadata.to_json())),
             ("Attributes", _attrs_text(array, path)), ("Store", repr(array.store)),
             ("No. bytes", f"{nbytes} ({human_bytes(nbytes)})"),
             ("No. bytes stored", f"{nstored} ({human_bytes(nstored)})"),
             ("Storage ratio", f"{nbytes / nstored:.1f}" if nstored else "-")]
    chunks_stored = sum(chunks_in(array, coords) for coords, _ in stored)
    if layout.shards is not None:
        rows.append(("Shards initialized", f"{len(stored)}/{math.prod(unit_grid(array))}"))
    rows.append(("Chunks initialized", f"{chunks_stored}/{array.nchunks}"))
    return InfoTable(rows)


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def group_table(group: Any, path: str) -> InfoTable:
    """The rows ``info`` prints for a group."""
    members = group.members()
    arrays = sum(1 for _, m in members if is_array(m))
    names = [name if is_array(m) else f"{name}/" for name, m in members]
    shown = ", ".join(names[:MAX_MEMBERS_SHOWN])
    if len(names) > MAX_MEMBERS_SHOWN:
        shown += f", ... ({len(names) - MAX_MEMBERS_SHOWN} more: chunkstore ls {path})"
    consolidated = ("yes (members read from the consolidated metadata)"
                    if is_consolidated(group) else
                    f"no (chunkstore header {path} reads one document per node)")
    return InfoTable([("Name", group.name), ("Type", f"group (Zarr v{group.zarr_format})"),
                      ("Members", f"{_count(arrays, 'array')}, "
                                  f"{_count(len(members) - arrays, 'group')}"
                                  + (f": {shown}" if names else "")),
                      ("Consolidated", consolidated),
                      ("Attributes", _attrs_text(group, path)), ("Store", repr(group.store))])


def cmd_info(args: argparse.Namespace) -> int:
    """Print the info table of an array or group."""
    node = open_node(args.path, storage_options(args.storage_option), args.node)
    with reading(args.path):
        table = array_table(node, args.path) if is_array(node) else group_table(node, args.path)
    print(table)
    return 0


def cmd_tree(args: argparse.Namespace) -> int:
    """Print the hierarchy below a group (one line for an array)."""
    node = open_node(args.path, storage_options(args.storage_option), args.node)
    if is_array(node):
        print(f"{node.name} {tuple(node.shape)} {dtype_name(node.dtype)}")
        return 0
    with reading(args.path):  # --level N shows N levels: Group.tree counts from 0
        print(node.tree(level=None if args.level is None else args.level - 1))
    return 0


def _ls_row(name: str, node: Any) -> list[str]:
    if is_array(node):
        return [name, "array", str(tuple(node.shape)), dtype_name(node.dtype), layout_words(node),
                f"v{node.zarr_format}"]
    return [name, "group", "", "", "", f"v{node.zarr_format}"]


def cmd_ls(args: argparse.Namespace) -> int:
    """List the arrays and groups below a path (the array itself for an array)."""
    node = open_node(args.path, storage_options(args.storage_option), args.node)
    if is_array(node):
        rows = [_ls_row(node.name if args.node else "/", node)]
    else:
        with reading(args.path):
            members = node.members(max_depth=None if args.recursive else 0)
            rows = [_ls_row(name, member) for name, member in members]
    widths = [max((len(r[i]) for r in rows), default=0) for i in range(6)]
    for row in rows:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    return 0


def cmd_attrs(args: argparse.Namespace) -> int:
    """Print the attributes of an array or group as JSON."""
    node = open_node(args.path, storage_options(args.storage_option), args.node)
    print(json.dumps(node.attrs.asdict(), indent=2, ensure_ascii=False))
    return 0


def register(sub: Any) -> None:
    """Add ``info``, ``tree``, ``ls`` and ``attrs`` to the subcommands ``sub``."""
    p = sub.add_parser("info", help="print the info table of an array or group",
                       description="Type, shape, dimension names, shard and chunk shapes, "
                       "codecs, attributes and storage of an array; members of a group and whether it is "
                       "consolidated ('chunkstore header' shows every node of a hierarchy).")
    p.add_argument("path", help="the store: a directory, a .zip archive or a URL")
    add_node(p)
    add_store_options(p)
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("tree", help="print the hierarchy below a group")
    p.add_argument("path", help="the store: a directory, a .zip archive or a URL")
    add_node(p, "the group")
    add_level(p)
    add_store_options(p)
    p.set_defaults(func=cmd_tree)

    p = sub.add_parser("ls", help="list the arrays and groups below a path",
                       description="One line per node: name, kind, shape, data type, "
                       "shards and chunks, Zarr format. The root array of a store is '/'.")
    p.add_argument("path", help="the store: a directory, a .zip archive or a URL")
    add_node(p, "the group to list")
    p.add_argument("-r", "--recursive", action="store_true",
                   help="list the whole subtree (default: direct members only)")
    add_store_options(p)
    p.set_defaults(func=cmd_ls)

    p = sub.add_parser("attrs", help="print the attributes of an array or group as JSON")
    p.add_argument("path", help="the store: a directory, a .zip archive or a URL")
    add_node(p)
    add_store_options(p)
    p.set_defaults(func=cmd_attrs)
