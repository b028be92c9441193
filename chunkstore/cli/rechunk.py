"""``rechunk``: copy an array into new chunks within a memory bound, with Dask's threads or
on a ``distributed`` cluster; the same progress lines and summary either way."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any

from chunkstore.cli.args import add_store_options, bytes_arg, shape_arg, storage_options
from chunkstore.cli.errors import CLIError
from chunkstore.cli.stores import check_target, open_node, volatile_warning
from chunkstore.config import environ
from chunkstore.progress import TaskProgress, TerminalProgress, local_dask_progress

#: the task keys of a rechunk plan's copies: ``rechunk-copy-<stage>-<token>``
_STAGE_KEY = re.compile(r"rechunk-copy-(\d+)-")


def stage_classifier(nstages: int | None, prefix: str = "") -> Callable[[Hashable], str | None]:
    """Task key -> ``"<prefix>stage i/n copy"`` for the copy tasks of a rechunk plan
    (``"stage i copy"`` when the number of stages is not known)."""
    def classify(key: Hashable) -> str | None:
        name = key[0] if isinstance(key, tuple) else key
        match = _STAGE_KEY.match(str(name))
        if match is None:
            return None
        stage = int(match[1]) + 1
        return f"{prefix}stage {stage}/{nstages} copy" if nstages else f"{prefix}stage {stage} copy"
    return classify


@contextmanager
def task_progress(tasks: TaskProgress, client: Any = None) -> Iterator[None]:
    """Feed ``tasks`` from ``client``'s cluster, or from the local scheduler without one."""
    if client is None:
        with local_dask_progress(tasks):
            yield
        return
    from chunkstore.cli.cluster import distributed_progress
    with distributed_progress(client, tasks):
        yield


def run_plan(plan: Any, progress: TerminalProgress, client: Any = None, prefix: str = "") -> Any:
    """Print ``plan`` and execute it, with one progress line per stage, labelled
    ``<prefix>stage i/n copy``."""
    print(plan, file=progress.stream)
    tasks = TaskProgress(progress, stage_classifier(len(plan.stages), prefix),
                         prefix.strip() or "rechunk")
    with task_progress(tasks, client):
        return plan.execute()


def cmd_rechunk(args: argparse.Namespace) -> int:
    """Plan, run and summarize a rechunk."""
    from chunkstore.dask import rechunk

    progress = TerminalProgress("rechunk")
    options = storage_options(args.storage_option)
    source = open_node(args.src, options, args.node, kind="array")
    check_target(args.dst)
    if len(args.chunks) != source.ndim:
        raise CLIError(f"--chunks has {len(args.chunks)} values for an array of {source.ndim} "
                       f"dimensions {tuple(source.shape)}")
    warning = volatile_warning(args.dst)
    if warning:
        print(f"chunkstore rechunk: warning: {warning}", file=progress.stream)
    client = None
    if args.scheduler:
        from chunkstore.cli.cluster import connect, dashboard_line
        client = connect(args.scheduler)
        print(dashboard_line(client), file=progress.stream)
    try:
        extra = {"storage_options": options} if options else {}
        plan = rechunk(source, args.chunks, store=args.dst, path=args.dst_node,
                       max_mem=args.max_mem, overwrite=args.overwrite, **extra)
        target = run_plan(plan, progress, client)
    finally:
        if client is not None:
            client.close()
    where = f" on {args.scheduler}" if args.scheduler else ""
    progress.summary(f"rechunked {args.src} -> {args.dst} (chunks {tuple(target.chunks)}){where}")
    return 0


def register(sub: Any) -> None:
    """Add ``rechunk`` to the subcommands ``sub``."""
    p = sub.add_parser("rechunk", help="rechunk an array within a memory bound (Dask)",
                       description="Copies an array into new chunks; no task holds more than "
                       "--max-mem. Runs on Dask's threads, or on a distributed cluster.",
                       epilog="example: chunkstore rechunk a.zarr b.zarr --chunks -1,16 "
                       "--max-mem 512MB --scheduler tcp://localhost:8786")
    p.add_argument("src", help="the source store: a directory, a .zip archive or a URL")
    p.add_argument("dst", help="the new store: a directory, a .zip archive or a URL")
    p.add_argument("--chunks", type=shape_arg, required=True, metavar="C1,C2,...",
                   help="target chunk shape, -1 for a whole axis, e.g. -1,16 (required)")
    p.add_argument("--max-mem", type=bytes_arg, default="1GiB", metavar="BYTES",
                   help="memory bound per task, e.g. 512MB or 2GiB (default: %(default)s)")
    address = environ("DASK_SCHEDULER_ADDRESS")
    p.add_argument("--scheduler", default=address, metavar="ADDRESS",
                   help="address of a dask.distributed scheduler, e.g. tcp://localhost:8786 "
                   f"(default: {address or 'none, run on local threads'}; from "
                   "DASK_SCHEDULER_ADDRESS)")
    p.add_argument("--node", default=None, metavar="PATH",
                   help="the array inside SRC (default: the root of SRC)")
    p.add_argument("--dst-node", default=None, metavar="PATH",
                   help="where to put the array inside DST (default: the root of DST)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace what exists at DST (default: refuse)")
    add_store_options(p)
    p.set_defaults(func=cmd_rechunk)

