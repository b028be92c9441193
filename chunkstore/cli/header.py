"""``header``: every node of a hierarchy with its data type, dimensions, shape, chunks and
attributes, compact as ``ncdump -h`` prints a netCDF file.

The nodes come from one walk of the hierarchy (``Group.members(max_depth=None)``: no
request at all beyond the root's documents when the group has consolidated metadata, else
one batched read per level), and the attributes from the documents that walk read: never
a request per node.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from chunkstore.cli.args import add_level, add_node, add_store_options, storage_options
from chunkstore.cli.nodes import dimension_names, is_array, is_consolidated, layout_words
from chunkstore.cli.stores import open_node, reading
from chunkstore.nodes.info import dtype_name

#: longest attribute value shown (``chunkstore attrs`` prints them all)
MAX_VALUE = 200
#: indentation of one level of the hierarchy
INDENT = "  "
#: xarray's attribute naming the dimensions of a v2 array (shown as the dimensions)
DIMENSION_KEY = "_ARRAY_DIMENSIONS"


def _value_text(value: Any, path: str, node: str) -> str:
    text = json.dumps(value, ensure_ascii=False)
    if len(text) <= MAX_VALUE:
        return text
    where = f" --node {node}" if node else ""
    return f"{text[:MAX_VALUE]}... (all: chunkstore attrs {path}{where})"


def fill_text(value: Any) -> str:
    """A fill value as JSON writes numbers and strings (``0``, ``0.5``, ``NaN``, ``""``),
    bytes as Python does (``b''``), anything else (``NaT``, ``(1+2j)``) as NumPy prints it."""
    if getattr(getattr(value, "dtype", None), "kind", "?") in ("b", "i", "u", "f"):
        value = value.item()
    if isinstance(value, bool | int | float | str):
        return json.dumps(value, ensure_ascii=False)
    return repr(bytes(value)) if isinstance(value, bytes) else str(value)


def _dims_text(array: Any) -> str:
    """``y=20, x=30`` with dimension names, ``20, 30`` without."""
    names = dimension_names(array)
    shape = tuple(array.shape)
    if names and len(names) == len(shape):
        return ", ".join(f"{d}={n}" for d, n in zip(names, shape, strict=True))
    return ", ".join(str(n) for n in shape)


def node_lines(node: Any, label: str, depth: int, path: str, full: str) -> list[str]:
    """The lines of one node: its own line, then one line per attribute, indented below
    it. ``label``: the name shown; ``full``: its path in the store, for hints."""
    pad = INDENT * depth
    if is_array(node):
        lines = [f"{pad}{dtype_name(node.dtype)} {label}({_dims_text(node)})  "
                 f"{layout_words(node)}  fill_value={fill_text(node.fill_value)}"]
    else:
        lines = [f"{pad}group {label}"]
    attrs = dict(node.metadata.attributes)
    if is_array(node) and node.zarr_format == 2 and dimension_names(node):
        attrs.pop(DIMENSION_KEY, None)  # shown as the dimensions
    lines += [f"{pad}{INDENT}:{key} = {_value_text(value, path, full)}"
              for key, value in attrs.items()]
    return lines


def header_lines(group: Any, path: str, level: int | None = None) -> list[str]:
    """The header of the hierarchy below ``group`` (``level``: how many levels of members,
    None for all): the group's line with its format, then each member, depth first,
    indented by depth."""
    flags = [f"Zarr v{group.zarr_format}"]
    if is_consolidated(group):
        flags.append("consolidated")
    top = group.path
    lines = node_lines(group, f"{group.name} ({', '.join(flags)})", 0, path, top)
    members = group.members(max_depth=None if level is None else level - 1)
    for rel, member in sorted(members, key=lambda item: item[0].split("/")):
        parts = rel.split("/")
        full = f"{top}/{rel}" if top else rel
        lines += node_lines(member, parts[-1], len(parts), path, full)
    return lines


def cmd_header(args: argparse.Namespace) -> int:
    """Print the header of a hierarchy (of one array when the node is an array)."""
    node = open_node(args.path, storage_options(args.storage_option), args.node)
    with reading(args.path):
        if is_array(node):
            lines = node_lines(node, node.name, 0, args.path, node.path)
        else:
            lines = header_lines(node, args.path, args.level)
    print("\n".join(lines))
    return 0


def register(sub: Any) -> None:
    """Add ``header`` to the subcommands ``sub``."""
    p = sub.add_parser(
        "header", help="every array and group with data type, dimensions, chunks and "
        "attributes (like ncdump -h)",
        description="One line per node, indented by depth: 'DTYPE NAME(DIM=SIZE, ...)  "
        "chunks=(...)  fill_value=...' for an array (sizes alone when it has no dimension "
        "names), 'group NAME' for a group, each followed by its attributes as ':KEY = JSON'. "
        "Read from one walk of the hierarchy (no request per node; none beyond the root "
        "with consolidated metadata).",
        epilog="example: chunkstore header data.zarr --level 1")
    p.add_argument("path", help="the store: a directory, a .zip archive or a URL")
    add_node(p, "the group (or array)")
    add_level(p)
    add_store_options(p)
    p.set_defaults(func=cmd_header)
