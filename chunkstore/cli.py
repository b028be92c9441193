"""The ``chunkstore`` command: ``info``, ``demo`` (more commands arrive with later issues)."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence

import numpy as np

from .errors import ChunkstoreError


def _cmd_info(args: argparse.Namespace) -> int:
    from .api import open as open_node
    node = open_node(args.path, mode="r", path=args.node)
    print(node.info)
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    """Create an array on a local directory store, write it, read it back, print info."""
    from .api import create_array, open_array
    root = args.dir or tempfile.mkdtemp(prefix="chunkstore-demo-")
    side = 2048 if args.small else 8192
    shape, chunks = (side, side), (512, 512)
    print(f"chunkstore demo in {root}: a {shape} float32 array, chunks {chunks}")
    a = create_array(f"{root}/demo.zarr", shape=shape, chunks=chunks, dtype="f4", overwrite=True,
                     dimension_names=["y", "x"], attributes={"description": "smooth field"})
    y, x = np.ogrid[:side, :side]
    data = (np.sin(y / 97.0) * np.cos(x / 53.0)).astype("f4")
    t0 = time.perf_counter()
    a[:] = data
    t_write = time.perf_counter() - t0
    b = open_array(f"{root}/demo.zarr", mode="r")
    t0 = time.perf_counter()
    back = b[:]
    t_read = time.perf_counter() - t0
    if not np.array_equal(back, data):
        print("demo: read-back mismatch", file=sys.stderr)
        return 1
    mb = data.nbytes / 1e6
    print(b.info)
    print(f"\nwrote {mb:.0f} MB in {t_write:.2f} s ({mb / t_write:.0f} MB/s), "
          f"read back in {t_read:.2f} s ({mb / t_read:.0f} MB/s): identical")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="chunkstore", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("info", help="print the info table of an array or group")
    p.add_argument("path", help="store: directory, .zip or URL")
    p.add_argument("--node", default=None, help="path of the node inside the store")
    p.set_defaults(func=_cmd_info)
    p = sub.add_parser("demo", help="write and read back an array on a local store")
    p.add_argument("--small", action="store_true", help="a small run (CI)")
    p.add_argument("--dir", default=None, help="directory to use (default: a temp dir)")
    p.set_defaults(func=_cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; errors are one clear line and exit status 2."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ChunkstoreError, OSError, ValueError, TypeError, KeyError) as e:
        print(f"chunkstore {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
