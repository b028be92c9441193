"""``clean``: remove what killed writers left in a store, without touching anything else:
temporary files of a local store or beside a zip archive (``.chunkstore-tmp-*``, never
listed as keys) and the
intermediate arrays of rechunks whose process is dead (``__chunkstore_tmp__/*``, never
members: ``group.scratch``)."""

from __future__ import annotations

import argparse
from typing import Any

from chunkstore.cli.args import add_store_options, storage_options
from chunkstore.cli.errors import CLIError
from chunkstore.cli.stores import check_location, check_store_root
from chunkstore.group.scratch import ScratchSweep, sweep_scratch
from chunkstore.nodes.paths import SCRATCH_DIR
from chunkstore.storage import LocalStore, ZipStore
from chunkstore.storage.resolve import resolve_store


def sweep(path: str, options: dict[str, Any] | None, older_than: float
          ) -> tuple[int, ScratchSweep]:
    """How many leftover temporary files were removed from the store at ``path`` (local
    directories have them, and zip archives: a writer's whole new archive beside it;
    other stores replace objects in one request), and what became of the rechunk
    intermediates there (a zip archive has none: its writer commits the whole archive,
    or nothing). A path that is not a Zarr store (nor a ``temp_store``
    holding intermediates) is refused (nothing below it is touched)."""
    check_location(path)
    store = resolve_store(path, storage_options=options)
    try:
        check_store_root(path, store)
    except CLIError:
        if not any(True for _ in store.list_dir(SCRATCH_DIR)):
            raise
    if isinstance(store, ZipStore):
        return store.sweep_temp(older_than=older_than), ScratchSweep()
    scratch = sweep_scratch(store, older_than)
    if not isinstance(store, LocalStore):
        return 0, scratch
    return store.sweep_temp("", older_than=older_than), scratch


def report(removed: int, scratch: ScratchSweep, prefix: str = "") -> None:
    """Print what a sweep did (the intermediates only when there were some)."""
    print(f"{prefix}removed {removed} leftover temporary file(s)")
    if scratch.removed:
        print(f"{prefix}removed {len(scratch.removed)} rechunk intermediate(s) of dead "
              f"writers: {', '.join(scratch.removed)}")
    if scratch.live:
        print(f"{prefix}kept {len(scratch.live)} rechunk intermediate(s) in use: "
              f"{', '.join(scratch.live)}")
    if scratch.unowned:
        print(f"{prefix}kept {len(scratch.unowned)} unknown entr(ies) without an owner "
              f"record: {', '.join(scratch.unowned)}")


def cmd_clean(args: argparse.Namespace) -> int:
    """Sweep and say how many files went."""
    if args.older_than < 0:
        raise CLIError(f"--older-than must be >= 0 seconds, got {args.older_than}")
    removed, scratch = sweep(args.path, storage_options(args.storage_option), args.older_than)
    report(removed, scratch, f"{args.path}: ")
    return 0


def register(sub: Any) -> None:
    """Add ``clean`` to the subcommands ``sub``."""
    p = sub.add_parser("clean", help="remove temporary files and rechunk intermediates "
                       "left by killed writers",
                       description="Removes the temporary files (.chunkstore-tmp-*) that "
                       "writers killed mid-write left in a local store: those of dead "
                       "processes of this host, and those older than --older-than seconds; "
                       "and the intermediate arrays (__chunkstore_tmp__/*) of rechunks whose "
                       "process is dead: on this host, or on another host when it has not "
                       "shown a sign of life for --older-than seconds (at least 300). "
                       "Stored keys are never touched.")
    p.add_argument("path", help="the store: a directory or a URL")
    p.add_argument("--older-than", type=float, default=3600.0, metavar="SECONDS",
                   help="also remove temporary files of live or remote writers older than "
                   "this, and intermediates of remote rechunks silent for this long "
                   "(default: %(default)s)")
    add_store_options(p)
    p.set_defaults(func=cmd_clean)
