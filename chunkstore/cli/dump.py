"""``dump``: the values of an array (or of a selection of it), after a header giving its
data type, shape, dimension names and attributes, as h5dump / ncdump print them."""

from __future__ import annotations

import argparse
import json
import math
import sys
from types import EllipsisType
from typing import Any

import numpy as np

from chunkstore.cli.args import add_node, add_store_options, count_arg, storage_options
from chunkstore.cli.errors import CLIError
from chunkstore.cli.nodes import dimension_names, layout_words
from chunkstore.cli.stores import open_node, reading
from chunkstore.nodes.info import dtype_name

#: at most this many values are printed unless --max-elements says otherwise
DEFAULT_MAX_ELEMENTS = 10_000

Selection = tuple[int | slice, ...]


def _parse_item(part: str, text: str) -> int | slice | EllipsisType:
    item = part.strip()
    if item == "...":
        return Ellipsis
    fields = item.split(":")
    try:
        if len(fields) == 1:
            return int(item)
        if len(fields) <= 3:
            return slice(*(int(f) if f.strip() else None for f in fields))
    except ValueError:
        pass
    raise CLIError(f"--selection {text!r}: {item!r} is not an index or a start:stop[:step] "
                   "slice")


def parse_selection(text: str, shape: tuple[int, ...]) -> Selection:
    """``"0:5, :3"`` -> ``(slice(0, 5, 1), slice(0, 3, 1))``, checked against ``shape``:
    integers (negative from the end), ``start:stop:step`` slices and one ``...``.

    >>> parse_selection("-1, ::2", (4, 6))
    (3, slice(0, 6, 2))
    """
    items = [_parse_item(p, text) for p in text.split(",")] if text.strip() else []
    if items.count(Ellipsis) > 1:
        raise CLIError(f"--selection {text!r}: at most one '...'")
    if Ellipsis in items:
        i = items.index(Ellipsis)
        items[i:i + 1] = [slice(None)] * (len(shape) - len(items) + 1)
    if len(items) > len(shape):
        raise CLIError(f"--selection {text!r}: {len(items)} indices for an array of "
                       f"{len(shape)} dimensions {shape}")
    items += [slice(None)] * (len(shape) - len(items))
    out: list[int | slice] = []
    for axis, (item, n) in enumerate(zip(items, shape, strict=True)):
        if isinstance(item, int):
            if not -n <= item < n:
                raise CLIError(f"--selection {text!r}: index {item} is out of bounds for axis "
                               f"{axis} of length {n}")
            out.append(item % n)
        else:
            if item.step is not None and item.step <= 0:
                raise CLIError(f"--selection {text!r}: slice steps must be positive")
            out.append(slice(*item.indices(n)))
    return tuple(out)


def selection_text(selection: Selection) -> str:
    """``(slice(0, 5, 1), 3)`` -> ``"[0:5, 3]"``."""
    def one(item: int | slice) -> str:
        if isinstance(item, int):
            return str(item)
        step = f":{item.step}" if item.step != 1 else ""
        return f"{item.start}:{item.stop}{step}"
    return "[" + ", ".join(one(i) for i in selection) + "]"


def selected_shape(selection: Selection) -> tuple[int, ...]:
    """The shape of the values a selection picks."""
    return tuple(len(range(i.start, i.stop, i.step)) for i in selection if isinstance(i, slice))


def header(array: Any) -> list[str]:
    """The lines describing the array before its values."""
    names = dimension_names(array)
    lines = [f"array {array.name} (Zarr v{array.zarr_format})",
             f"  data type        {dtype_name(array.dtype)}",
             f"  shape            {tuple(array.shape)}"]
    if names:
        lines.append(f"  dimension names  {', '.join(names)}")
    lines.append(f"  layout           {layout_words(array)}")
    lines.append(f"  fill value       {array.fill_value}")
    attrs = array.attrs.asdict()
    if attrs:
        lines.append(f"  attributes       {json.dumps(attrs, ensure_ascii=False)}")
    return lines


def cmd_dump(args: argparse.Namespace) -> int:
    """Print a header and the values of an array or of ``--selection``."""
    array = open_node(args.path, storage_options(args.storage_option), args.node, kind="array")
    shape = tuple(array.shape)
    selection = parse_selection(args.selection or "", shape)
    count = math.prod(selected_shape(selection))
    if count > args.max_elements:
        example = ", ".join("0:5" for _ in shape) or "..."
        what = "the selection picks" if args.selection else "the array has"
        raise CLIError(f"{args.path}: {what} {count:,} values, more than --max-elements "
                       f"{args.max_elements:,}: pass --selection (e.g. '{example}') or a larger "
                       "--max-elements")
    with reading(args.path):
        values = np.asarray(array[selection])
    lines = header(array)
    lines.append(f"  selection        {selection_text(selection)} -> shape {values.shape}")
    lines.append("data:")
    lines.append(np.array2string(values, threshold=sys.maxsize, max_line_width=100,
                                 separator=", ")
                 if values.ndim else repr(values.item()))
    print("\n".join(lines))
    return 0


def register(sub: Any) -> None:
    """Add ``dump`` to the subcommands ``sub``."""
    p = sub.add_parser("dump", help="print the values of an array (or of a selection)",
                       description="A header (data type, shape, dimension names, layout, "
                       "attributes) and the values, as h5dump / ncdump print them.",
                       epilog="example: chunkstore dump data.zarr --node x --selection "
                       "'0:5, :3'")
    p.add_argument("path", help="the store: a directory, a .zip archive or a URL")
    add_node(p, "the array")
    p.add_argument("--selection", "-s", default=None, metavar="SEL",
                   help="NumPy-style selection, comma-separated per axis: integers, "
                   "start:stop[:step] slices, '...' (default: the whole array)")
    p.add_argument("--max-elements", type=count_arg("--max-elements", 1),
                   default=DEFAULT_MAX_ELEMENTS, metavar="N",
                   help="refuse to print more values than this (default: %(default)s)")
    add_store_options(p)
    p.set_defaults(func=cmd_dump)
