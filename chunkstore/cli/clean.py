"""``clean``: remove the temporary files that killed writers left in a local store
(``.chunkstore-tmp-*``, never listed as keys), without touching anything else."""

from __future__ import annotations

import argparse
from typing import Any

from ..storage import LocalStore
from ..storage.resolve import resolve_store
from .args import add_store_options, storage_options
from .errors import CLIError
from .stores import check_location, check_store_root


def sweep(path: str, options: dict[str, Any] | None, older_than: float) -> int:
    """How many leftover temporary files were removed from the store at ``path`` (only
    local directories have them: other stores replace objects in one request). A path
    that is not a Zarr store is refused (nothing below it is touched)."""
    check_location(path)
    store = resolve_store(path, storage_options=options)
    check_store_root(path, store)
    if not isinstance(store, LocalStore):
        return 0
    return store.sweep_temp("", older_than=older_than)


def cmd_clean(args: argparse.Namespace) -> int:
    """Sweep and say how many files went."""
    if args.older_than < 0:
        raise CLIError(f"--older-than must be >= 0 seconds, got {args.older_than}")
    removed = sweep(args.path, storage_options(args.storage_option), args.older_than)
    print(f"{args.path}: removed {removed} leftover temporary file(s)")
    return 0


def register(sub: Any) -> None:
    """Add ``clean`` to the subcommands ``sub``."""
    p = sub.add_parser("clean", help="remove temporary files left by killed writers",
                       description="Removes the temporary files (.chunkstore-tmp-*) that "
                       "writers killed mid-write left in a local store: those of dead "
                       "processes of this host, and those older than --older-than seconds. "
                       "Stored keys are never touched.")
    p.add_argument("path", help="the store: a directory")
    p.add_argument("--older-than", type=float, default=3600.0, metavar="SECONDS",
                   help="also remove temporary files of live or remote writers older than "
                   "this (default: %(default)s)")
    add_store_options(p)
    p.set_defaults(func=cmd_clean)
