"""Argument parsing shared by the commands: the parser class, and values such as chunk
shapes and storage options."""

from __future__ import annotations

import argparse
import json
import re
import textwrap
from typing import Any, NoReturn

from chunkstore.cli.errors import EXIT_ERROR, CLIError
from chunkstore.sizes import parse_bytes

#: values that start with a dash but are numbers or lists of them ("-1,16", "-5:, :3"),
#: so that ``--chunks -1,16`` works as the help says
_NEGATIVE_VALUE = re.compile(r"^-\d[\d,:.\s-]*$|^-\.\d+$")

#: what ``--chunks`` / ``--shards`` say about whole axes
WHOLE_AXIS = ("-1", "None", "none", "")


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (and exit status 2), and which takes
    values that look like negative numbers, such as ``-1,16``, as values."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        if kwargs.get("description"):  # paragraphs wrapped here; epilog examples kept as is
            kwargs["description"] = "\n\n".join(
                textwrap.fill(" ".join(p.split()), 88) for p in kwargs["description"].split("\n\n"))
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = _NEGATIVE_VALUE

    def error(self, message: str) -> NoReturn:
        """Print ``<prog>: error: <message>`` on one line and exit with status 2."""
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def shape_arg(text: str) -> tuple[int | None, ...]:
    """``"500,-1"`` -> ``(500, None)``: positive integers, ``-1`` for a whole axis.

    >>> shape_arg("64, -1")
    (64, None)
    """
    out: list[int | None] = []
    for part in text.split(","):
        item = part.strip()
        if item in WHOLE_AXIS:
            out.append(None)
            continue
        try:
            value = int(item)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{item!r} in {text!r} is not a whole number (give one per axis, "
                "-1 for a whole axis)") from None
        if value < 1:
            raise argparse.ArgumentTypeError(
                f"{value} in {text!r} must be positive (or -1 for a whole axis)")
        out.append(value)
    return tuple(out)


def count_arg(flag: str, minimum: int) -> Any:
    """An argparse type for ``flag``: a whole number >= ``minimum`` (argparse names the
    flag in its message).

    >>> count_arg("--level", 1)("3")
    3
    """
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value
    parse.__name__ = "count"  # argparse names the type in some messages
    return parse


def bytes_arg(text: str) -> int:
    """``"512MB"`` -> ``512000000``: a byte count with an optional unit.

    >>> bytes_arg("2GiB")
    2147483648
    """
    try:
        return parse_bytes(text)
    except (ValueError, TypeError):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a byte size (e.g. 512MB, 2GiB or 1000000)") from None


def storage_options(items: list[str] | None) -> dict[str, Any] | None:
    """``["anon=true", "endpoint_url=http://..."]`` -> ``{"anon": True, ...}``; values
    are JSON when they parse as JSON, else strings. A malformed item is a CLIError (one
    line, exit status 2)."""
    opts: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CLIError(f"--storage-option {item!r}: expected KEY=VALUE")
        try:
            opts[key] = json.loads(value)
        except ValueError:
            opts[key] = value
    return opts or None


def add_store_options(parser: argparse.ArgumentParser) -> None:
    """``--storage-option KEY=VALUE`` (repeatable), for URL stores."""
    parser.add_argument("--storage-option", action="append", metavar="KEY=VALUE", default=[],
                        help="option of URL stores (fsspec's; s3fs's spelling for S3), "
                        "repeatable, e.g. anon=true or endpoint_url=http://localhost:9000; "
                        "backend=fsspec or backend=obstore picks the S3 client (default: "
                        "obstore when installed, see the README; S3 endpoints also come from "
                        "AWS_ENDPOINT_URL / CHUNKSTORE_S3_ENDPOINT)")


def add_node(parser: argparse.ArgumentParser, what: str = "the node") -> None:
    """``--node PATH``: a path inside the store."""
    parser.add_argument("--node", default=None, metavar="PATH",
                        help=f"path of {what} inside the store, e.g. group/array "
                        "(default: the root of the store)")



def add_level(parser: argparse.ArgumentParser) -> None:
    """``--level N``: how many levels of members a hierarchy view shows (``tree``,
    ``header``)."""
    parser.add_argument("--level", type=count_arg("--level", 1), default=None, metavar="N",
                        help="how many levels of members to show, 1 for the direct members "
                        "(default: all)")
