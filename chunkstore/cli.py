"""The ``chunkstore`` command (also ``python -m chunkstore``).

Commands: info, tree, ls, copy/convert, rechunk, verify, demo. Paths accept every
store kind: a directory, a ``.zip`` file, an fsspec URL (``s3://bucket/x.zarr``; pass
options as ``--storage-option key=value``), or a ``.npy`` file for copy/convert.
Errors print one line and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from .errors import ChunkstoreError
from .progress import ProgressBar


def _options(args: argparse.Namespace) -> dict[str, Any] | None:
    opts = {}
    for item in getattr(args, "storage_option", None) or []:
        key, _, value = item.partition("=")
        try:
            opts[key] = json.loads(value)
        except ValueError:
            opts[key] = value
    return opts or None


def _open(path: str, args: argparse.Namespace, mode: str = "r", node: str | None = None) -> Any:
    from .api import open as open_node
    return open_node(path, mode=mode, path=node, storage_options=_options(args))


def _store(path: str, args: argparse.Namespace, mode: str = "r") -> Any:
    from .storage.resolve import resolve_store
    return resolve_store(path, mode=mode, storage_options=_options(args))


def cmd_info(args: argparse.Namespace) -> int:
    print(_open(args.path, args, node=args.node).info)
    return 0


def cmd_tree(args: argparse.Namespace) -> int:
    node = _open(args.path, args, node=args.node)
    if hasattr(node, "tree"):
        print(node.tree(level=args.level) if args.level is not None else node.tree())
    else:
        print(f"{node.name} {node.shape} {node.dtype}")
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    from .metadata import is_array
    from .verify import walk_nodes
    store = _store(args.path, args)
    base = (args.node or "").strip("/")
    for path, meta in walk_nodes(store, base):
        if path == base and not is_array(meta):
            continue
        rel = path[len(base):].lstrip("/") if base else path
        if not args.recursive and "/" in rel:
            continue
        if is_array(meta):
            print(f"{rel:<30} array  {tuple(meta.shape)} {np.dtype(meta.dtype)} "
                  f"chunks={tuple(meta.chunk_shape)} v{meta.zarr_format}")
        else:
            print(f"{rel:<30} group  v{meta.zarr_format}")
    return 0


def _parse_chunks(text: str | None) -> tuple[int | None, ...] | None:
    if not text:
        return None
    return tuple(None if c.strip() in ("", "-1", "None") else int(c) for c in text.split(","))


def _compressors(name: str | None) -> Any:
    if name is None:
        return "auto"
    if name == "none":
        return None
    import numcodecs
    table = {"blosc-lz4": lambda: numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE),
             "blosc-zstd": lambda: numcodecs.Blosc("zstd", 5, numcodecs.Blosc.SHUFFLE),
             "zstd": lambda: numcodecs.Zstd(level=3), "gzip": lambda: numcodecs.GZip(5)}
    if name not in table:
        raise ValueError(f"unknown --compressor {name!r}; choose one of {sorted(table)} or none")
    return table[name]()


def cmd_copy(args: argparse.Namespace) -> int:
    """Copy an array: .npy <-> store, store -> store (v2 <-> v3, new chunks or codec)."""
    from .api import create_array
    from .copying import block_regions
    src_is_npy, dst_is_npy = args.src.endswith(".npy"), args.dst.endswith(".npy")
    if src_is_npy:
        source: Any = np.load(args.src, mmap_mode="r")
    else:
        source = _open(args.src, args, node=args.node)
        if not hasattr(source, "shape"):
            raise ValueError(f"{args.src}: copy works on arrays; {source.name!r} is a group "
                             "(use --node to pick an array)")
    if dst_is_npy:
        target: Any = np.lib.format.open_memmap(args.dst, mode="w+", dtype=source.dtype,
                                                shape=source.shape)
        chunks = getattr(source, "chunks", source.shape)
    else:
        kwargs: dict[str, Any] = {"compressors": _compressors(args.compressor)}
        if args.zarr_format:
            kwargs["zarr_format"] = args.zarr_format
        elif not src_is_npy:
            kwargs["zarr_format"] = source.zarr_format
        if not src_is_npy:
            kwargs["fill_value"] = source.fill_value
            if source.attrs:
                kwargs["attributes"] = dict(source.attrs)
        target = create_array(args.dst, args.dst_node, shape=source.shape, dtype=source.dtype,
                              chunks=_parse_chunks(args.chunks) or getattr(source, "chunks", None),
                              overwrite=args.overwrite, storage_options=_options(args), **kwargs)
        chunks = target.chunks
    regions = list(block_regions(tuple(source.shape), tuple(chunks), source.dtype.itemsize))
    bar = ProgressBar("copy", unit="blocks")
    done_bytes = 0
    for i, region in enumerate(regions, 1):
        block = source[region]
        target[region] = block
        done_bytes += block.nbytes
        bar(i, len(regions), done_bytes)
    if dst_is_npy:
        target.flush()
    return 0


def cmd_rechunk(args: argparse.Namespace) -> int:
    from .dask import rechunk
    source = _open(args.src, args, node=args.node)
    chunks = _parse_chunks(args.chunks)
    client = None
    if args.scheduler:
        from distributed import Client
        client = Client(args.scheduler)
    try:
        plan = rechunk(source, chunks, args.dst, args.dst_node, max_mem=args.max_mem,
                       progress=True, overwrite=args.overwrite)
        print(plan, file=sys.stderr)
        plan.execute()
    finally:
        if client is not None:
            client.close()
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from .verify import verify
    report = verify(_store(args.path, args), (args.node or "").strip("/"),
                    progress=ProgressBar("verify"))
    for key, reason in sorted(report.bad.items()):
        print(f"BAD {key}: {reason}")
    print(f"{report.chunks} chunks in {report.arrays} arrays checked, {len(report.bad)} bad")
    return 0 if report.ok else 1


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo
    return run_demo(args.dir, small=args.small, workers=args.workers, max_mem=args.max_mem)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="chunkstore", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, func: Any, help: str, aliases: tuple[str, ...] = ()) -> Any:
        p = sub.add_parser(name, help=help, description=help, aliases=list(aliases))
        p.set_defaults(func=func)
        p.add_argument("--storage-option", action="append", metavar="KEY=VALUE",
                       help="fsspec storage option (repeatable), e.g. endpoint_url=...")
        return p

    p = add("info", cmd_info, "print the info table of an array or group")
    p.add_argument("path")
    p.add_argument("--node", help="path of the node inside the store")
    p = add("tree", cmd_tree, "print the hierarchy")
    p.add_argument("path")
    p.add_argument("--node")
    p.add_argument("--level", type=int, default=None, help="depth limit")
    p = add("ls", cmd_ls, "list the arrays and groups below a path")
    p.add_argument("path")
    p.add_argument("--node")
    p.add_argument("-r", "--recursive", action="store_true")
    p = add("copy", cmd_copy, "copy/convert an array: .npy <-> store, v2 <-> v3, new chunks "
            "or compressor", aliases=("convert",))
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("--node", help="array path inside SRC")
    p.add_argument("--dst-node", default=None, help="array path inside DST")
    p.add_argument("--zarr-format", type=int, choices=(2, 3))
    p.add_argument("--chunks", help="e.g. 1000,1000 (-1 = whole axis)")
    p.add_argument("--compressor", help="blosc-lz4 (default), blosc-zstd, zstd, gzip or none")
    p.add_argument("--overwrite", action="store_true")
    p = add("rechunk", cmd_rechunk, "rechunk an array within a memory bound (Dask)")
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("--chunks", required=True, help="target chunks, e.g. 1,4096")
    p.add_argument("--max-mem", default="1GiB")
    p.add_argument("--scheduler", help="address of a dask.distributed scheduler")
    p.add_argument("--node")
    p.add_argument("--dst-node", default=None)
    p.add_argument("--overwrite", action="store_true")
    p = add("verify", cmd_verify, "decode every chunk; exit 1 listing the bad keys")
    p.add_argument("path")
    p.add_argument("--node")
    p = add("demo", cmd_demo, "the main job: write, transpose, rechunk and verify a large "
            "array on a local store and a local Dask cluster")
    p.add_argument("--small", action="store_true", help="a small run (CI, < 1 minute)")
    p.add_argument("--dir", default=None, help="directory to use (default: a temp dir)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--max-mem", default="256MiB")
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
