"""Core write/read throughput: chunkstore vs zarr-python 3 vs tensorstore vs numpy.

    python -m benchmarks.bench_core            # issue sizes: 256 MiB arrays
    python -m benchmarks.bench_core --tiny     # seconds, for CI

All libraries run in this one process, one after the other, with their default thread
settings. Cases (issue 2):
  lz4 local         (8192, 8192) smooth float32, (512, 512) chunks (1 MiB), blosc-lz4+shuffle
  raw local         the same, uncompressed
  tiny-chunks local (2000, 2000) int32 with (20, 20) chunks: 10,000 chunks, blosc-lz4
  lz4 memory        case 1 on an in-memory store (chunkstore MemoryStore, zarr MemoryStore,
                    tensorstore memory kvstore; numpy: np.save/np.load on a BytesIO)
  lz4 local v2      case 1 in the Zarr v2 format
Each write goes to a fresh directory/store (creating it is timed, deleting the previous
run's files is not); each read opens the array again and reads all of it. Every read
result is compared with the source array (assert), so a wrong fast answer cannot pass.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np

from benchmarks.common import add_ratios, peak_rss_during, row
from benchmarks.measure import (
    LIBRARIES,
    MB,
    dir_bytes,
    fmt,
    release_memory,
    throughput_pivot,
    time_runs,
)

OUT = Path("bench-out")
#: the peers run by default: zarr-python also with the zarrs codec pipeline
DEFAULT_LIBRARIES = (*LIBRARIES[:2], "zarrs", *LIBRARIES[2:])


@dataclass(frozen=True)
class Case:
    """One benchmark case: array geometry, codec, store kind and Zarr format."""

    name: str
    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    dtype: str
    codec: str  # one of CODECS
    store: str  # "local" or "memory"
    zarr_format: int = 3
    with_numpy: bool = True
    data: str = "smooth"  # one of DATA_SETS


def cases(tiny: bool) -> list[Case]:
    """The five cases of issue 2, at full or CI size."""
    big, big_chunks = ((256, 256), (64, 64)) if tiny else ((8192, 8192), (512, 512))
    small = (200, 200) if tiny else (2000, 2000)
    return [
        Case("lz4 local", big, big_chunks, "float32", "lz4", "local"),
        Case("raw local", big, big_chunks, "float32", "raw", "local"),
        Case("tiny-chunks local", small, (20, 20), "int32", "lz4", "local"),
        Case("lz4 memory", big, big_chunks, "float32", "lz4", "memory"),
        Case("lz4 local v2", big, big_chunks, "float32", "lz4", "local", zarr_format=2,
             with_numpy=False),
    ]


#: codec name -> the numcodecs codec (None: uncompressed); zarr-python and tensorstore
#: get the same configuration through their own spellings below
CODECS = {
    "raw": None,
    "lz4": lambda: numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE),
    "blosc-zstd": lambda: numcodecs.Blosc(cname="zstd", clevel=5,
                                          shuffle=numcodecs.Blosc.SHUFFLE),
    "zstd": lambda: numcodecs.Zstd(level=3),
}
DATA_SETS = ("smooth", "noise", "ramp")


def make_data(case: Case) -> np.ndarray:
    """The case's data set; never all fill value (0) in a chunk.

    smooth: a smooth field (compressible); noise: uniform random (incompressible);
    ramp: integers counting up along rows.
    """
    i = np.arange(case.shape[0], dtype="f8")[:, None]
    j = np.arange(case.shape[1], dtype="f8")[None, :]
    if case.data == "noise":
        return (np.random.default_rng(0).random(case.shape) + 1.0).astype(case.dtype)
    if case.data == "ramp":
        return (i * case.shape[1] + j + 1).astype(case.dtype)
    if np.dtype(case.dtype).kind == "f":
        return (np.sin(i * 0.01) + np.cos(j * 0.013) + 3.0).astype(case.dtype)
    return ((i * 7 + j) % 1000 + 1).astype(case.dtype)


def numcodecs_codec(case: Case) -> numcodecs.abc.Codec | None:
    make = CODECS[case.codec]
    return make() if make else None


def zarr_codec(case: Case) -> Any:
    """zarr-python 3's spelling of the case's codec (numcodecs for Zarr v2)."""
    import zarr
    if case.codec == "raw":
        return None
    if case.zarr_format == 2:
        return numcodecs_codec(case)
    if case.codec == "zstd":
        return zarr.codecs.ZstdCodec(level=3)
    cname = "lz4" if case.codec == "lz4" else "zstd"
    return zarr.codecs.BloscCodec(cname=cname, clevel=5, shuffle="shuffle")


def tensorstore_codec(case: Case, itemsize: int) -> dict | None:
    """tensorstore's zarr3 codec entry for the case's codec."""
    if case.codec == "raw":
        return None
    if case.codec == "zstd":
        return {"name": "zstd", "configuration": {"level": 3, "checksum": False}}
    cname = "lz4" if case.codec == "lz4" else "zstd"
    return {"name": "blosc", "configuration": {"cname": cname, "clevel": 5,
                                               "shuffle": "shuffle", "typesize": itemsize,
                                               "blocksize": 0}}


# --- one adapter per library: new_target(case, where) -> target; write(case, target, data);
# --- read(case, target) -> ndarray. A target is a path or an in-memory store.

class ChunkstoreLib:
    name = "chunkstore"

    def new_target(self, case: Case, where: Path) -> Any:
        import chunkstore as cs
        return cs.MemoryStore() if case.store == "memory" else str(where) + ".zarr"

    def write(self, case: Case, target: Any, data: np.ndarray) -> None:
        import chunkstore as cs
        a = cs.create_array(target, shape=case.shape, dtype=case.dtype, chunks=case.chunks,
                            compressors=numcodecs_codec(case),
                            fill_value=0, zarr_format=case.zarr_format, overwrite=True)
        a[...] = data

    def read(self, case: Case, target: Any) -> np.ndarray:
        import chunkstore as cs
        return cs.open_array(target, mode="r")[...]


class ZarrLib:
    name = "zarr-python"

    def new_target(self, case: Case, where: Path) -> Any:
        import zarr
        return zarr.storage.MemoryStore() if case.store == "memory" else str(where) + ".zarr"

    def write(self, case: Case, target: Any, data: np.ndarray) -> None:
        import zarr
        z = zarr.create_array(store=target, shape=case.shape, dtype=case.dtype,
                              chunks=case.chunks, compressors=zarr_codec(case), fill_value=0,
                              zarr_format=case.zarr_format, overwrite=True)
        z[...] = data

    def read(self, case: Case, target: Any) -> np.ndarray:
        import zarr
        return zarr.open_array(target, mode="r")[...]


class ZarrsLib(ZarrLib):
    """zarr-python with the zarrs codec pipeline (Rust), as its users install it for speed:
    ``zarr.config.set({"codec_pipeline.path": "zarrs.ZarrsCodecPipeline"})``."""

    name = "zarrs"

    def write(self, case: Case, target: Any, data: np.ndarray) -> None:
        import zarr
        import zarrs  # noqa: F401
        with zarr.config.set({"codec_pipeline.path": "zarrs.ZarrsCodecPipeline"}):
            super().write(case, target, data)

    def read(self, case: Case, target: Any) -> np.ndarray:
        import zarr
        import zarrs  # noqa: F401
        with zarr.config.set({"codec_pipeline.path": "zarrs.ZarrsCodecPipeline"}):
            return super().read(case, target)


class TensorstoreLib:
    name = "tensorstore"

    def new_target(self, case: Case, where: Path) -> Any:
        import tensorstore as ts
        if case.store == "memory":  # the memory kvstore lives in a context: share one
            return {"driver": "memory"}, ts.Context()
        # tensorstore fsyncs every file by default; chunkstore, zarr-python and numpy do not
        return ({"driver": "file", "path": str(where) + ".zarr"},
                ts.Context({"file_io_sync": False}))

    def _metadata(self, case: Case) -> tuple[str, dict]:
        dt = np.dtype(case.dtype)
        if case.zarr_format == 2:
            codec = numcodecs_codec(case)
            comp = codec.get_config() if codec is not None else None
            return "zarr", {"shape": list(case.shape), "chunks": list(case.chunks),
                            "dtype": dt.newbyteorder("<").str, "compressor": comp,
                            "fill_value": 0, "order": "C"}
        codecs: list[dict] = [{"name": "bytes", "configuration": {"endian": "little"}}]
        compressor = tensorstore_codec(case, dt.itemsize)
        if compressor is not None:
            codecs.append(compressor)
        return "zarr3", {"shape": list(case.shape), "data_type": dt.name,
                         "chunk_grid": {"name": "regular",
                                        "configuration": {"chunk_shape": list(case.chunks)}},
                         "fill_value": 0, "codecs": codecs}

    def write(self, case: Case, target: Any, data: np.ndarray) -> None:
        import tensorstore as ts
        kv, ctx = target
        driver, metadata = self._metadata(case)
        t = ts.open({"driver": driver, "kvstore": kv, "metadata": metadata}, create=True,
                    delete_existing=True, context=ctx).result()
        t.write(data).result()

    def read(self, case: Case, target: Any) -> np.ndarray:
        import tensorstore as ts
        kv, ctx = target
        driver = "zarr" if case.zarr_format == 2 else "zarr3"
        t = ts.open({"driver": driver, "kvstore": kv}, open=True, read=True,
                    context=ctx).result()
        return t.read().result()


class NumpyLib:
    """The floor: one contiguous uncompressed .npy file (or buffer), no chunks."""

    name = "numpy"

    def new_target(self, case: Case, where: Path) -> Any:
        return io.BytesIO() if case.store == "memory" else str(where) + ".npy"

    def write(self, case: Case, target: Any, data: np.ndarray) -> None:
        np.save(target, data)

    def read(self, case: Case, target: Any) -> np.ndarray:
        if isinstance(target, io.BytesIO):
            target.seek(0)
        return np.load(target)


ADAPTERS = {lib.name: lib for lib in (ChunkstoreLib(), ZarrLib(), ZarrsLib(), TensorstoreLib(),
                                      NumpyLib())}


def check_equal(lib: str, case: Case, got: Any, data: np.ndarray) -> None:
    """The read result must be the source array, exactly (shape, dtype and values)."""
    got = np.asarray(got)
    assert got.shape == data.shape, f"{lib} / {case.name}: shape {got.shape} != {data.shape}"
    assert got.dtype == data.dtype, f"{lib} / {case.name}: dtype {got.dtype} != {data.dtype}"
    assert np.array_equal(got, data), f"{lib} / {case.name}: values read back differ"


def remove(target: Any) -> None:
    if isinstance(target, str):
        p = Path(target)
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
    elif isinstance(target, tuple) and target[0].get("driver") == "file":
        shutil.rmtree(target[0]["path"], ignore_errors=True)


def stored_bytes(target: Any) -> int | None:
    if isinstance(target, str):
        return dir_bytes(target)
    if isinstance(target, tuple) and target[0].get("driver") == "file":
        return dir_bytes(target[0]["path"])
    return None


def run_library(case: Case, lib: Any, data: np.ndarray, slot: Path, repeat: int) -> list[dict]:
    """Time ``repeat`` writes (each into a fresh target) then ``repeat`` full reads."""
    current: list[Any] = []
    results: list[np.ndarray] = []

    def fresh_target() -> Any:
        while current:  # the previous run's files: deleted outside the timing
            remove(current.pop())
        current.append(lib.new_target(case, slot))
        return current[-1]

    def last_target() -> Any:
        if results:  # check the previous read (untimed), then drop it
            check_equal(lib.name, case, results.pop(), data)
        return current[-1]

    def write_all() -> float:
        return time_runs(fresh_target, lambda target: lib.write(case, target, data), repeat)

    def read_all() -> float:
        return time_runs(last_target, lambda target: results.append(lib.read(case, target)),
                         repeat)

    try:
        release_memory()
        t_write, peak_w = peak_rss_during(write_all)
        stored = stored_bytes(current[-1])
        release_memory()
        t_read, peak_r = peak_rss_during(read_all)
        check_equal(lib.name, case, results.pop(), data)
    finally:
        for target in current:
            remove(target)
    extra = {"stored_mb": stored / MB} if stored is not None else {}
    nbytes = data.nbytes
    print(f"  {case.name:<18} {lib.name:<12} write {fmt(nbytes / MB / t_write):>6} MB/s  "
          f"read {fmt(nbytes / MB / t_read):>6} MB/s", flush=True)
    return [row(f"{case.name} write", lib.name, t_write, nbytes=nbytes, peak_mb=peak_w,
                op="write", **extra),
            row(f"{case.name} read", lib.name, t_read, nbytes=nbytes, peak_mb=peak_r,
                op="read", **extra)]


def run_case(case: Case, libraries: list[str], work: Path, repeat: int,
             data: np.ndarray | None = None) -> list[dict]:
    """Write then read ``case`` with every library; rows for both operations."""
    data = make_data(case) if data is None else data
    rows: list[dict] = []
    for name in libraries:
        if name == "numpy" and not case.with_numpy:
            continue
        slot = work / f"{case.name.replace(' ', '-')}-{name}"
        rows += run_library(case, ADAPTERS[name], data, slot, repeat)
    return rows


HEADER = """\
chunkstore core benchmark: best of {repeat} run(s) per operation, MB/s = decoded MB / s.
Local store = a directory under {workdir_fs}; no library fsyncs (tensorstore's default
file_io_sync is turned off to match), so writes land in the OS page cache and reads right
after the write are WARM-cache reads: no disk IO is measured, only CPU and syscalls.
Peak MB = RSS growth above the start of the operation (sampled every 10 ms; includes
the output array for reads). ratio chunkstore/peer = peer seconds / chunkstore seconds
(> 1: chunkstore faster). All libraries run in one process with default thread settings."""


def main(argv: list[str] | None = None) -> list[dict]:
    """Run the core benchmark; return one row per (case + operation, library)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="small arrays, one run (CI)")
    parser.add_argument("--repeat", type=int, default=None, help="runs per operation")
    parser.add_argument("--cases", default=None,
                        help="comma-separated case names (default: all), e.g. 'lz4 local'")
    parser.add_argument("--libraries", default=",".join(DEFAULT_LIBRARIES))
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args(argv)
    repeat = args.repeat or (1 if args.tiny else 3)
    libraries = [s.strip() for s in args.libraries.split(",") if s.strip()]
    unknown = set(libraries) - set(ADAPTERS)
    if unknown:
        parser.error(f"unknown libraries {sorted(unknown)}; choose from {sorted(ADAPTERS)}")
    selected = cases(args.tiny)
    if args.cases:
        wanted = {s.strip() for s in args.cases.split(",")}
        selected = [c for c in selected if c.name in wanted]
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-core-"))
    work.mkdir(parents=True, exist_ok=True)
    print(HEADER.format(repeat=repeat, workdir_fs=work), flush=True)
    rows: list[dict] = []
    try:
        for case in selected:
            rows += run_case(case, libraries, work, repeat)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    rows = add_ratios(rows)
    print()
    print(throughput_pivot(rows), flush=True)
    OUT.mkdir(exist_ok=True)
    (OUT / "bench_core.json").write_text(json.dumps(rows, indent=2))
    return rows


if __name__ == "__main__":
    main()
