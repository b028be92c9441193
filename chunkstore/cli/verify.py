"""``verify``: decode every stored chunk (every shard, with its inner chunks) of every array
at or below a path; list the bad keys and exit 1 if there are any."""

from __future__ import annotations

import argparse
from typing import Any

from chunkstore.api.verify import verify
from chunkstore.cli.args import add_node, add_store_options, storage_options
from chunkstore.cli.clean import report as report_sweep
from chunkstore.cli.clean import sweep
from chunkstore.cli.stores import open_node, reading
from chunkstore.progress import TerminalProgress


def cmd_verify(args: argparse.Namespace) -> int:
    """Verify, print the bad keys and a summary; exit 1 when something is bad."""
    node = open_node(args.path, storage_options(args.storage_option), args.node)
    progress = TerminalProgress("verify")
    with reading(args.path):
        report = verify(node, progress=progress.step("verify", "keys"))
    for key, reason in sorted(report.bad.items()):
        print(f"BAD {key}: {reason}")
    print(report.summary())
    if args.repair:
        removed, scratch = sweep(args.path, storage_options(args.storage_option), 3600.0)
        report_sweep(removed, scratch, "repair: ")
    return 0 if report.ok else 1


def register(sub: Any) -> None:
    """Add ``verify`` to the subcommands ``sub``."""
    p = sub.add_parser("verify", help="decode every stored chunk; exit 1 listing the bad keys",
                       description="Decodes every stored chunk (every shard and its inner "
                       "chunks) of every array at or below PATH. Exit status: 0 all good, "
                       "1 bad chunks found (listed as 'BAD key: reason'), 2 PATH is not a "
                       "readable Zarr store.")
    p.add_argument("path", help="the store: a directory, a .zip archive or a URL")
    add_node(p, "the array or group to check")
    p.add_argument("--repair", action="store_true",
                   help="also remove temporary files and rechunk intermediates left by "
                   "killed writers (see 'clean'; default: off)")
    add_store_options(p)
    p.set_defaults(func=cmd_verify)
