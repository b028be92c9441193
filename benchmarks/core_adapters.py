"""The cases and library adapters of the core benchmarks (``bench_core``, ``bench_matrix``).

An adapter has ``new_target(case, where) -> target``, ``write(case, target, data)`` and
``read(case, target) -> ndarray``; a target is a path or an in-memory store.
"""

from __future__ import annotations

import io
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np

from benchmarks.measure import dir_bytes


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


class FileLimitLib:
    """The machine's limit, not a library: the chunks' bytes (C-order pieces of the data
    of one chunk's size, as many as the case has chunks) written as new files by one
    thread per core x 2, no fsync, no rename; read back into one buffer likewise.
    Only for uncompressed local cases: it bounds what any Zarr writer can reach."""

    name = "file-limit"
    threads = 2 * (os.cpu_count() or 1)

    def new_target(self, case: Case, where: Path) -> Any:
        return str(where) + ".files"

    @staticmethod
    def _pieces(case: Case, nbytes: int) -> list[tuple[int, int]]:
        size = int(np.prod(case.chunks)) * np.dtype(case.dtype).itemsize
        return [(start, min(size, nbytes - start)) for start in range(0, nbytes, size)]

    def write(self, case: Case, target: Any, data: np.ndarray) -> None:
        os.makedirs(target)
        whole = memoryview(np.ascontiguousarray(data)).cast("B")

        def one(item: tuple[int, tuple[int, int]]) -> None:
            n, (start, size) = item
            fd = os.open(os.path.join(target, str(n)), os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            try:
                os.write(fd, whole[start:start + size])
            finally:
                os.close(fd)

        with ThreadPoolExecutor(self.threads) as pool:
            list(pool.map(one, enumerate(self._pieces(case, whole.nbytes))))

    def read(self, case: Case, target: Any) -> np.ndarray:
        out = np.empty(case.shape, case.dtype)
        whole = memoryview(out).cast("B")

        def one(item: tuple[int, tuple[int, int]]) -> None:
            n, (start, size) = item
            fd = os.open(os.path.join(target, str(n)), os.O_RDONLY)
            try:
                os.readv(fd, [whole[start:start + size]])
            finally:
                os.close(fd)

        with ThreadPoolExecutor(self.threads) as pool:
            list(pool.map(one, enumerate(self._pieces(case, whole.nbytes))))
        return out


ADAPTERS = {lib.name: lib for lib in (ChunkstoreLib(), ZarrLib(), ZarrsLib(), TensorstoreLib(),
                                      NumpyLib(), FileLimitLib())}


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
