"""``copy`` / ``convert``: an array from a store, a ``.npy`` file or an HDF5 dataset into a
store or a ``.npy`` file, block by block (bounded memory), with new chunks, shards,
compressor or Zarr format; a whole Zarr group with ``copy_group``; a whole HDF5/netCDF
file or group into a group."""

from __future__ import annotations

import argparse
import itertools
import math
import os
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

from chunkstore.api import hdf5
from chunkstore.api.consolidation import consolidate_metadata
from chunkstore.api.creation import create_array
from chunkstore.array.array import Array
from chunkstore.cli.args import add_store_options, shape_arg, storage_options
from chunkstore.cli.copy_group import copy_group
from chunkstore.cli.errors import CLIError
from chunkstore.cli.nodes import is_array
from chunkstore.cli.sources import HDF5_SUFFIXES, Source, TreeSource, open_source
from chunkstore.cli.stores import check_target, open_node, volatile_warning
from chunkstore.io.overlap import refuse_onto_itself
from chunkstore.nodes.creation import DEFAULT_FILL
from chunkstore.nodes.paths import normalize_path
from chunkstore.progress import TerminalProgress
from chunkstore.storage.resolve import resolve_store

#: bytes copied per block (whole chunk or shard rows when they fit)
BLOCK_BYTES = 64 * 2**20
COMPRESSORS = ("blosc-lz4", "blosc-zstd", "zstd", "gzip", "none")


def compressors_arg(name: str | None) -> Any:
    """The ``compressors=`` value for a ``--compressor`` name (None: the default)."""
    if name is None:
        return "auto"
    if name == "none":
        return None
    import numcodecs
    table = {"blosc-lz4": lambda: numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE),
             "blosc-zstd": lambda: numcodecs.Blosc("zstd", 5, numcodecs.Blosc.SHUFFLE),
             "zstd": lambda: numcodecs.Zstd(level=3), "gzip": lambda: numcodecs.GZip(5)}
    return table[name]()


def blocks(shape: tuple[int, ...], unit: tuple[int, ...], itemsize: int,
           max_bytes: int = BLOCK_BYTES) -> Iterator[tuple[slice, ...]]:
    """Regions made of whole write units (chunks or shards) covering ``shape``: bands of
    unit rows along the first axis of at most ``max_bytes``, or single units."""
    if not shape:
        yield ()
        return
    row_bytes = math.prod(shape[1:]) * itemsize * unit[0]
    if row_bytes <= max_bytes:
        step = unit[0] * max(1, max_bytes // max(1, row_bytes))
        for start in range(0, shape[0], step):
            yield (slice(start, min(shape[0], start + step)),) + tuple(slice(0, n)
                                                                       for n in shape[1:])
        return
    for starts in itertools.product(*(range(0, n, u) for n, u in zip(shape, unit, strict=True))):
        yield tuple(slice(s, min(n, s + u)) for s, n, u in zip(starts, shape, unit, strict=True))


def _whole(spec: tuple[int | None, ...] | None, shape: tuple[int, ...], flag: str
           ) -> tuple[int | None, ...] | None:
    if spec is not None and len(spec) != len(shape):
        raise CLIError(f"{flag} has {len(spec)} values for an array of {len(shape)} dimensions "
                       f"{shape}")
    return spec


def _create_target(args: argparse.Namespace, source: Source) -> Any:
    options = storage_options(args.storage_option)
    if isinstance(source.data, Array):  # never over its own source (before any delete)
        refuse_onto_itself(source.data, resolve_store(args.dst, storage_options=options),
                           normalize_path(args.dst_node), "copy")
    shape = tuple(source.shape)
    chunks = _whole(args.chunks, shape, "--chunks") or getattr(source, "chunks", None)
    shards = _whole(args.shards, shape, "--shards")
    if shards is not None:
        shards = tuple(n if s is None else s for s, n in zip(shards, shape, strict=True))
    kwargs: dict[str, Any] = {"compressors": compressors_arg(args.compressor),
                              "attributes": source.attributes or None,
                              "dimension_names": source.dimension_names}
    if args.zarr_format or source.zarr_format:
        kwargs["zarr_format"] = args.zarr_format or source.zarr_format
    if source.fill_value is not DEFAULT_FILL:
        kwargs["fill_value"] = source.fill_value
    target = create_array(args.dst, args.dst_node, shape=shape, dtype=source.dtype,
                          chunks=chunks, shards=shards, overwrite=args.overwrite,
                          storage_options=options, **kwargs)
    if source.late_attributes:  # NaN or infinities, written as zarr-python writes them
        hdf5.add_late_attributes(target.store, target.path, source.late_attributes,
                                 target.zarr_format, "array")
    return target


def _create_npy(args: argparse.Namespace, source: Source) -> Any:
    if os.path.exists(args.dst) and os.path.exists(args.src) and os.path.samefile(args.src,
                                                                                 args.dst):
        raise CLIError(f"{args.dst}: is the source itself; copy to a new file")
    if os.path.exists(args.dst) and not args.overwrite:
        raise CLIError(f"{args.dst}: already exists (pass --overwrite to replace it)")
    return np.lib.format.open_memmap(args.dst, mode="w+", dtype=source.dtype,
                                     shape=tuple(source.shape))


def _group_source(args: argparse.Namespace) -> Any:
    """The group SRC (or its --node) names when it is a Zarr group; None for an array or a
    .npy / HDF5 file."""
    if os.path.splitext(args.src)[1].lower() in (".npy", *HDF5_SUFFIXES):
        return None
    node = open_node(args.src, storage_options(args.storage_option), args.node)
    return None if is_array(node) else node


def cmd_copy(args: argparse.Namespace) -> int:
    """Copy one array, a whole Zarr group, or an HDF5 file or group (as a group), block by
    block, showing progress, notes on what was left out, and a summary."""
    progress = TerminalProgress(args.command)
    check_target(args.dst)
    group = _group_source(args)
    if group is not None:
        return copy_group(args, group, compressors_arg(args.compressor), progress)
    source = open_source(args.src, args.node, storage_options(args.storage_option),
                         zarr_format=args.zarr_format, allow_external=args.allow_external)
    if isinstance(source, TreeSource):
        return _copy_tree(args, source, progress)
    to_npy = args.dst.lower().endswith(".npy")
    warning = None if to_npy else volatile_warning(args.dst)
    if warning:
        print(f"chunkstore {args.command}: warning: {warning}", file=sys.stderr)
    target = _create_npy(args, source) if to_npy else _create_target(args, source)
    unit = tuple(target.shape) if to_npy else tuple(target.layout.write_shape)
    regions = list(blocks(tuple(source.shape), unit, source.dtype.itemsize))
    bar = progress.step("copy", "blocks")
    done = 0
    for i, region in enumerate(regions, 1):
        block = np.asarray(source[region])
        target[region] = block
        done += block.nbytes
        bar(i, len(regions), done)
    if to_npy:
        target.flush()
    _notes(args, source.notices)
    progress.summary(f"copied {args.src} -> {args.dst} ({tuple(source.shape)} {source.dtype})")
    return 0


def _notes(args: argparse.Namespace, notices: list[str]) -> None:
    for notice in notices:
        print(f"chunkstore {args.command}: note: {notice}", file=sys.stderr)


def _copy_tree(args: argparse.Namespace, source: TreeSource, progress: TerminalProgress) -> int:
    """A whole HDF5 file or group copied as a group, array by array."""
    n = source.narrays
    if args.dst.lower().endswith(".npy"):
        raise CLIError(f"{args.src}: a group of {n} arrays, and a .npy file holds one: pick "
                       "a dataset with --node")
    for flag, value in (("--chunks", args.chunks), ("--shards", args.shards)):
        if value is not None:
            raise CLIError(f"{flag} sets the layout of one array, and {args.src} is copied "
                           f"as a group of {n} arrays: pick a dataset with --node")
    fmt = args.zarr_format or 3
    st = resolve_store(args.dst, mode="w" if args.overwrite else "a",
                       storage_options=storage_options(args.storage_option))
    bar = progress.step("copy", "arrays")
    hdf5.write_plan(source.plan, st, normalize_path(args.dst_node), zarr_format=fmt,
                    overwrite=args.overwrite,
                    create_kwargs={"compressors": compressors_arg(args.compressor)},
                    on_array=bar)
    # xarray opens a consolidated group in one read, and warns when it finds none
    consolidate_metadata(st, normalize_path(args.dst_node) or None)
    _notes(args, source.notices)
    arrays = "1 array" if n == 1 else f"{n} arrays"
    progress.summary(f"copied {args.src} -> {args.dst} (a group of {arrays}, consolidated)")
    return 0


def register(sub: Any) -> None:
    """Add ``copy`` and ``convert`` (the same command, each with its own name in its help)
    to the subcommands ``sub``."""
    for name in ("copy", "convert"):
        _register(sub, name)


def _register(sub: Any, name: str) -> None:
    p = sub.add_parser(name,
                       help="the same as copy" if name == "convert" else
                       "copy/convert an array or a whole group: .npy / HDF5 / store -> "
                       "store / .npy, v2 <-> v3, new chunks, shards or compressor",
                       epilog="examples:\n  chunkstore convert x.npy x.zarr --chunks 1000,-1\n"
                       "  chunkstore convert in.h5 out.zarr --node grp/data --zarr-format 2\n"
                       "  chunkstore copy v2.zarr v3.zarr --zarr-format 3   # a whole group")
    p.add_argument("src", help="a store (directory, .zip, URL), a .npy file or an HDF5 file "
                   "(.h5, .hdf5, .nc; needs h5py)")
    p.add_argument("dst", help="a store (directory, .zip, URL) or a .npy file")
    p.add_argument("--node", default=None, metavar="PATH",
                   help="the array or group (or HDF5 dataset or group) inside SRC; a group "
                   "is copied with everything below it (default: the root; for an HDF5 file "
                   "its only dataset, else the whole file as a group, always for netCDF)")
    p.add_argument("--dst-node", default=None, metavar="PATH",
                   help="where to put the array (or group) inside DST (default: the root of DST)")
    p.add_argument("--zarr-format", type=int, choices=(2, 3), default=None,
                   help="Zarr format of the copy (default: that of SRC, or 3)")
    p.add_argument("--chunks", type=shape_arg, default=None, metavar="C1,C2,...",
                   help="chunk shape, -1 for a whole axis, e.g. 1000,-1 (default: the chunks "
                   "of SRC, or about 1 MiB)")
    p.add_argument("--shards", type=shape_arg, default=None, metavar="S1,S2,...",
                   help="shard shape (Zarr v3), a multiple of the chunks, -1 for a whole "
                   "axis (default: not sharded)")
    p.add_argument("--compressor", choices=COMPRESSORS, default=None,
                   help="compressor of the copy (default: blosc-lz4, byte shuffle)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace what exists at DST (default: refuse)")
    p.add_argument("--allow-external", action="append", default=None, metavar="DIR",
                   help="HDF5: read the external storage, external links and virtual "
                   "datasets of SRC from files under DIR (repeatable; default: refuse any "
                   "file other than SRC)")
    add_store_options(p)
    p.set_defaults(func=cmd_copy)
