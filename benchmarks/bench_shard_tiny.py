"""Tiny inner chunks in shards (issue 35): whole-array write and read, chunkstore vs
tensorstore vs zarr-python with the zarrs codec pipeline vs plain zarr-python.

    python -m benchmarks.bench_shard_tiny            # (2000, 2000) int32: 10,000 inner chunks
    python -m benchmarks.bench_shard_tiny --tiny     # seconds, for CI

Cases: a (2000, 2000) int32 array of (20, 20) inner chunks (10,000 of them, 1.6 KB each
decoded), blosc lz4 + shuffle (clevel 5, the same codec for every library), in shards of
100 inner chunks ((200, 200): 100 shards) and of 1,000 inner chunks ((400, 1000): 10
shards), on a local directory. Every library runs in this one process, interleaved
(each repeat writes with every library in turn, then reads likewise); rows hold medians
and the highest peak RSS (see ``bench_core``). Every read is compared with the source
array, and what chunkstore wrote is read by tensorstore (and the other way round) and
compared too: a fast wrong answer cannot pass (``cross_read`` in the rows).

``numcodecs-alone`` is no library but the floor of one in Python over numcodecs: the
same blosc call on each inner chunk and nothing else (``CodecAlone``); chunkstore's ratio
to it is the share of its time that numcodecs' calls take.

The unsharded case (10,000 chunk files) is ``bench_core``'s ``tiny-chunks local``.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.bench_core import Slot, interleave, run_options, run_parser
from benchmarks.core_adapters import (
    Case,
    ChunkstoreLib,
    TensorstoreLib,
    ZarrLib,
    ZarrsLib,
    check_equal,
    make_data,
    numcodecs_codec,
    tensorstore_codec,
    zarr_codec,
)
from benchmarks.measure import release_memory, report

LIBRARIES = ("chunkstore", "tensorstore", "zarrs", "zarr-python", "numcodecs-alone")


@dataclasses.dataclass(frozen=True)
class ShardCase(Case):
    """A ``Case`` whose chunks are inner chunks of shards of ``shards``."""

    shards: tuple[int, ...] = ()


def cases(tiny: bool) -> list[ShardCase]:
    """Shards of 100 and of 1,000 (20, 20) inner chunks."""
    shape = (400, 1000) if tiny else (2000, 2000)
    return [ShardCase(f"tiny-in-shards-{n} local", shape, (20, 20), "int32", "lz4", "local",
                      with_numpy=False, shards=shards)
            for n, shards in ((100, (200, 200)), (1000, (400, 1000)))]


class ShardedChunkstore(ChunkstoreLib):
    def write(self, case: Any, target: Any, data: np.ndarray) -> None:
        import chunkstore as cs
        a = cs.create_array(target, shape=case.shape, dtype=case.dtype, chunks=case.chunks,
                            shards=case.shards, compressors=numcodecs_codec(case),
                            fill_value=0, overwrite=True)
        a[...] = data


class ShardedZarr(ZarrLib):
    def write(self, case: Any, target: Any, data: np.ndarray) -> None:
        import zarr
        z = zarr.create_array(store=target, shape=case.shape, dtype=case.dtype,
                              chunks=case.chunks, shards=case.shards,
                              compressors=zarr_codec(case), fill_value=0, overwrite=True)
        z[...] = data


class ShardedZarrs(ZarrsLib, ShardedZarr):
    """zarrs' pipeline around ``ShardedZarr.write`` (``ZarrsLib.write`` calls super())."""


class ShardedTensorstore(TensorstoreLib):
    def _metadata(self, case: Any) -> tuple[str, dict]:
        dt = np.dtype(case.dtype)
        inner = [{"name": "bytes", "configuration": {"endian": "little"}},
                 tensorstore_codec(case, dt.itemsize)]
        sharding = {"name": "sharding_indexed", "configuration": {
            "chunk_shape": list(case.chunks), "codecs": inner,
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                             {"name": "crc32c"}],
            "index_location": "end"}}
        return "zarr3", {"shape": list(case.shape), "data_type": dt.name,
                         "chunk_grid": {"name": "regular",
                                        "configuration": {"chunk_shape": list(case.shards)}},
                         "fill_value": 0, "codecs": [sharding]}


class CodecAlone:
    """The floor of an engine in Python over numcodecs: numcodecs' blosc call on each
    inner chunk, as cheaply as Python makes it, and nothing else (no shard, no index, no
    file: the frames stay in a list); a read decompresses each frame into its place.
    chunkstore's ratio to it is the share of its time spent in the codec calls."""

    name = "numcodecs-alone"

    def new_target(self, case: Any, where: Path) -> list:
        return []

    @staticmethod
    def _blocks(case: Any, data: np.ndarray) -> np.ndarray:
        """``data`` viewed as (n0, c0, n1, c1, ...) -> (n0, n1, ..., c0, c1, ...)."""
        grid = [n // c for n, c in zip(case.shape, case.chunks, strict=True)]
        split = [d for pair in zip(grid, case.chunks, strict=True) for d in pair]
        nd = len(grid)
        return data.reshape(split).transpose([*range(0, 2 * nd, 2), *range(1, 2 * nd, 2)])

    def write(self, case: Any, target: list, data: np.ndarray) -> None:
        from numcodecs import blosc
        codec = numcodecs_codec(case)
        cname, level, shuffle = codec.cname.encode(), codec.clevel, codec.shuffle
        size = data.dtype.itemsize
        blocks = np.ascontiguousarray(self._blocks(case, data))
        target[:] = [blosc.compress(b, cname, level, shuffle, 0, size)
                     for b in blocks.reshape(-1, *case.chunks)]

    def read(self, case: Any, target: list) -> np.ndarray:
        from numcodecs import blosc
        grid = [n // c for n, c in zip(case.shape, case.chunks, strict=True)]
        # each frame to new bytes, joined: cheaper per call than numcodecs checking a
        # destination (as chunkstore decodes small inner chunks)
        decompress = blosc.decompress
        joined = b"".join([decompress(frame) for frame in target])
        blocks = np.frombuffer(joined, case.dtype).reshape(*grid, *case.chunks)
        out = np.empty(case.shape, case.dtype)
        self._blocks(case, out)[...] = blocks
        return out


ADAPTERS = {lib.name: lib for lib in (ShardedChunkstore(), ShardedTensorstore(),
                                      ShardedZarrs(), ShardedZarr(), CodecAlone())}


def cross_read(case: ShardCase, slots: dict[str, Slot], data: np.ndarray) -> bool:
    """What chunkstore wrote, tensorstore reads equal, and the other way round."""
    import tensorstore as ts

    import chunkstore as cs
    ours, theirs = slots.get("chunkstore"), slots.get("tensorstore")
    if ours is None or theirs is None or not ours.current or not theirs.current:
        return False
    t = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": ours.current[-1]}},
                open=True, read=True).result()
    check_equal("tensorstore reading chunkstore", case, t.read().result(), data)
    path = theirs.current[-1][0]["path"]
    check_equal("chunkstore reading tensorstore", case, cs.open_array(path, mode="r")[...], data)
    return True


def run_case(case: ShardCase, libraries: list[str], work: Path, repeat: int) -> list[dict]:
    """Write then read ``case`` with every library, interleaved (``bench_core.run_case``)."""
    data = make_data(case)
    slots = {name: Slot(case, ADAPTERS[name], work / f"{case.name.split()[0]}-{name}")
             for name in libraries}
    try:
        interleave(slots.values(), data, repeat)
        crossed = cross_read(case, slots, data)
    finally:
        for slot in slots.values():
            slot.close()
        release_memory()
    rows = [r for slot in slots.values() for r in slot.rows(data.nbytes)]
    for r in rows:
        r.update(inner_chunks=int(np.prod(case.shape)) // int(np.prod(case.chunks)),
                 chunks_per_shard=int(np.prod(case.shards)) // int(np.prod(case.chunks)),
                 cross_read=crossed, correct=True)  # check_equal raised otherwise
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    """Run the benchmark; return one row per (case + operation, library)."""
    parser = run_parser(__doc__.splitlines()[0], LIBRARIES)
    parser.add_argument("--cases", default=None, help="comma-separated numbers of inner "
                        "chunks per shard (default: 100,1000)")
    args = parser.parse_args(argv)
    repeat, libraries = run_options(parser, args, ADAPTERS)
    selected = cases(args.tiny)
    if args.cases:
        wanted = {f"tiny-in-shards-{s.strip()} local" for s in args.cases.split(",")}
        selected = [c for c in selected if c.name in wanted]
    work = Path(tempfile.mkdtemp(prefix="bench-shard-tiny-"))
    print(f"tiny inner chunks in shards: median of {repeat} interleaved run(s), "
          "MB/s = decoded MB / s; ratio = peer s / chunkstore s (> 1: chunkstore faster)",
          flush=True)
    rows: list[dict] = []
    try:
        for case in selected:
            rows += run_case(case, libraries, work, repeat)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report(rows, "bench_shard_tiny")


if __name__ == "__main__":
    main()
