"""The ``chunkstore`` command: the parser, the dispatch to the commands, and the one way
failures end (one line on stderr, exit status 2; a closed output pipe ends quietly)."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Sequence
from importlib import metadata

from chunkstore import __version__
from chunkstore.cli import clean, copy, demo, dump, header, nodes, rechunk, verify
from chunkstore.cli.args import Parser
from chunkstore.cli.errors import EXIT_ERROR, explain
from chunkstore.config import environ

DESCRIPTION = """\
Inspect, copy, rechunk and verify Zarr (v2 and v3) arrays and groups.

Paths accept every store kind: a directory, a .zip archive, or a URL such as
s3://bucket/data.zarr (S3 through obstore when installed, else s3fs; any other fsspec URL;
options with --storage-option KEY=VALUE; an S3 endpoint also comes from AWS_ENDPOINT_URL
or CHUNKSTORE_S3_ENDPOINT). copy/convert also read .npy and HDF5
files. Exit status: 0 success, 1 verify found bad chunks, 2 error (one line on stderr)."""

#: exit status after Ctrl-C, as shells report a SIGINT
EXIT_INTERRUPTED = 130


def version_text() -> str:
    """``chunkstore X (Python Y, numpy Z, ...)``: what a bug report needs."""
    def installed(name: str) -> str:
        try:
            return f"{name} {metadata.version(name)}"
        except metadata.PackageNotFoundError:
            return f"{name} not installed"

    # s3fs and obstore: the two S3 clients (obstore, when installed, serves s3:// URLs)
    libs = ", ".join(installed(n) for n in ("numpy", "numcodecs", "fsspec", "dask", "s3fs",
                                            "obstore"))
    return f"chunkstore {__version__} (Python {sys.version.split()[0]}, {libs})"


def build_parser() -> Parser:
    """The parser of every command."""
    parser = Parser(prog="chunkstore", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=version_text(),
                        help="print the versions of chunkstore and its main libraries, and exit")
    parser.add_argument("--traceback", action="store_true",
                        default=bool(environ("CHUNKSTORE_TRACEBACK")),
                        help="show the Python traceback of an error, for bug reports "
                        "(default: off, or on when CHUNKSTORE_TRACEBACK is set)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (nodes, header, dump, copy, rechunk, verify, clean, demo):
        module.register(sub)
    return parser


def _silence_stdout() -> None:
    """After a closed pipe, send the rest of stdout (and the final flush) nowhere."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass  # not a real file (captured output): nothing will be flushed to the pipe


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        status = args.func(args)
        sys.stdout.flush()
        return status
    except BrokenPipeError:  # e.g. `chunkstore dump ... | head`: the reader has enough
        _silence_stdout()
        return 0
    except KeyboardInterrupt:
        print(f"chunkstore {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as e:
        if args.traceback:  # the traceback for a bug report, then the same one line and status
            traceback.print_exc()
        message = explain(e, can_overwrite=hasattr(args, "overwrite"))
        print(f"chunkstore {args.command}: error: {message}", file=sys.stderr)
        return EXIT_ERROR
