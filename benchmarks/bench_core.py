"""Core write/read throughput: chunkstore vs zarr-python 3 vs tensorstore vs numpy.

    python -m benchmarks.bench_core            # issue sizes: 256 MiB arrays
    python -m benchmarks.bench_core --tiny     # seconds, for CI

All libraries run in this one process with their default thread settings, interleaved
(each repeat runs every library in turn; medians of wall and CPU time are reported).
``file-limit`` is the machine's limit for the uncompressed case: the same bytes written
as one new file per chunk by 2 threads per core (no fsync), and read back. Cases (issue 2):
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
import shutil
import statistics
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import fmt, measured, row
from benchmarks.core_adapters import (  # noqa: F401 (DATA_SETS: re-exported for users)
    ADAPTERS,
    DATA_SETS,
    Case,
    check_equal,
    make_data,
    remove,
    stored_bytes,
)
from benchmarks.measure import (
    LIBRARIES,
    MB,
    release_memory,
    report,
    settle_memory,
)

#: the peers run by default: zarr-python also with the zarrs codec pipeline
DEFAULT_LIBRARIES = (*LIBRARIES[:2], "zarrs", *LIBRARIES[2:], "file-limit")


def applies(name: str, case: Case) -> bool:
    """Whether library ``name`` runs ``case`` (numpy: one file, not for v2 variants;
    file-limit: the machine's file write/read limit, for uncompressed local cases)."""
    if name == "numpy":
        return case.with_numpy
    if name == "file-limit":
        return case.codec == "raw" and case.store == "local"
    return True


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


class Slot:
    """One library's target directory/store for a case, and what its runs measured."""

    def __init__(self, case: Case, lib: Any, where: Path, keep: bool = False) -> None:
        #: keep every run's target until the benchmark ends: on file systems that scan
        #: recently deleted inodes when creating files (ext4 without a journal), creating
        #: thousands of small files right after deleting thousands measures that scan
        self.keep = keep
        self.case, self.lib, self.where = case, lib, where
        self.current: list[Any] = []
        self.times: dict[str, list[float]] = {"write": [], "read": []}
        self.cpu: dict[str, list[float]] = {"write": [], "read": []}
        self.peak: dict[str, float] = {"write": 0.0, "read": 0.0}
        self.stored: int | None = None

    def _timed(self, op: str, fn: Any) -> Any:
        release_memory()
        result, peak, wall, cpu = measured(fn)
        self.times[op].append(wall)
        self.cpu[op].append(cpu)
        self.peak[op] = max(self.peak[op], peak)
        return result

    def write(self, data: np.ndarray) -> None:
        while self.current and not self.keep:  # the previous run's files, outside timing
            remove(self.current.pop())
        where = self.where.with_name(f"{self.where.name}-{len(self.current)}")
        target = self.lib.new_target(self.case, where)
        self.current.append(target)
        self._timed("write", lambda: self.lib.write(self.case, target, data))
        self.stored = stored_bytes(target)

    def read(self, data: np.ndarray) -> None:
        got = self._timed("read", lambda: self.lib.read(self.case, self.current[-1]))
        check_equal(self.lib.name, self.case, got, data)  # untimed

    def close(self) -> None:
        for target in self.current:
            remove(target)
        self.current.clear()

    def rows(self, nbytes: int) -> list[dict]:
        extra = {"stored_mb": self.stored / MB} if self.stored is not None else {}
        out = []
        for op in ("write", "read"):
            seconds = statistics.median(self.times[op])
            out.append(row(f"{self.case.name} {op}", self.lib.name, seconds, nbytes=nbytes,
                           peak_mb=self.peak[op], op=op,
                           cpu_s=statistics.median(self.cpu[op]), **extra))
        w, r = out
        print(f"  {self.case.name:<18} {self.lib.name:<12} write {fmt(w['mb_per_s']):>6} MB/s "
              f"(cpu {w['cpu_s']:.2f} s)  read {fmt(r['mb_per_s']):>6} MB/s "
              f"(cpu {r['cpu_s']:.2f} s)", flush=True)
        return out


KEEP_BYTES = 64 * 2**20  # cases this small keep their targets (see Slot.keep)


def run_case(case: Case, libraries: list[str], work: Path, repeat: int,
             data: np.ndarray | None = None, leftovers: list | None = None) -> list[dict]:
    """Write then read ``case`` with every library, interleaved: each repeat writes with
    every library in turn, then each repeat reads likewise, so that a burst of load on
    the machine falls on all libraries alike. Rows hold medians (wall and CPU seconds)
    and the highest peak RSS over the runs. With ``leftovers``, small cases keep their
    targets and hand them over, to be removed when the benchmark ends."""
    data = make_data(case) if data is None else data
    keep = leftovers is not None and data.nbytes <= KEEP_BYTES
    slots = [Slot(case, ADAPTERS[name], work / f"{case.name.replace(' ', '-')}-{name}", keep)
             for name in libraries if applies(name, case)]
    try:
        interleave(slots, data, repeat)
    finally:
        for slot in slots:
            if slot.keep:
                leftovers.append(slot)  # type: ignore[union-attr]
            else:
                slot.close()
    return [r for slot in slots for r in slot.rows(data.nbytes)]


def interleave(slots: Iterable[Slot], data: np.ndarray, repeat: int) -> None:
    """Each of ``repeat`` runs writes ``data`` with every slot in turn, then each run
    reads it back likewise (see :func:`run_case`)."""
    slots = list(slots)
    settle_memory(data.nbytes)  # see settle_memory: the first library is not charged
    for _ in range(max(1, repeat)):
        for slot in slots:
            slot.write(data)
    settle_memory(data.nbytes)  # a read's output
    for _ in range(max(1, repeat)):
        for slot in slots:
            slot.read(data)


HEADER = """\
chunkstore core benchmark: median of {repeat} interleaved run(s) per operation, MB/s = decoded MB / s.
Local store = a directory under {workdir_fs}; no library fsyncs (tensorstore's default
file_io_sync is turned off to match), so writes land in the OS page cache and reads right
after the write are WARM-cache reads: no disk IO is measured, only CPU and syscalls.
Peak MB = RSS growth above the start of the operation (sampled every 10 ms; includes
the output array for reads). ratio chunkstore/peer = peer seconds / chunkstore seconds
(> 1: chunkstore faster). All libraries run in one process with default thread settings."""


def run_parser(description: str, libraries: Iterable[str]) -> argparse.ArgumentParser:
    """The options of an interleaved benchmark: ``--tiny``, ``--repeat`` and
    ``--libraries`` (by default ``libraries``); see :func:`run_options`."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--tiny", action="store_true", help="small arrays, one run (CI)")
    parser.add_argument("--repeat", type=int, default=None, help="runs per operation")
    parser.add_argument("--libraries", default=",".join(libraries))
    return parser


def run_options(parser: argparse.ArgumentParser, args: argparse.Namespace,
                adapters: Iterable[str]) -> tuple[int, list[str]]:
    """The runs per operation (1 with ``--tiny``, else 5) and the libraries of ``args``
    (parsed by a :func:`run_parser`); a library not among ``adapters`` is a usage error."""
    repeat = args.repeat or (1 if args.tiny else 5)
    libraries = [s.strip() for s in args.libraries.split(",") if s.strip()]
    known = sorted(adapters)
    unknown = set(libraries) - set(known)
    if unknown:
        parser.error(f"unknown libraries {sorted(unknown)}; choose from {known}")
    return repeat, libraries


def main(argv: list[str] | None = None) -> list[dict]:
    """Run the core benchmark; return one row per (case + operation, library)."""
    parser = run_parser(__doc__.splitlines()[0], DEFAULT_LIBRARIES)
    parser.add_argument("--cases", default=None,
                        help="comma-separated case names (default: all), e.g. 'lz4 local'")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args(argv)
    repeat, libraries = run_options(parser, args, ADAPTERS)
    selected = cases(args.tiny)
    if args.cases:
        wanted = {s.strip() for s in args.cases.split(",")}
        selected = [c for c in selected if c.name in wanted]
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-core-"))
    work.mkdir(parents=True, exist_ok=True)
    print(HEADER.format(repeat=repeat, workdir_fs=work), flush=True)
    rows: list[dict] = []
    leftovers: list[Slot] = []
    try:
        for case in selected:
            rows += run_case(case, libraries, work, repeat, leftovers=leftovers)
    finally:
        for slot in leftovers:
            slot.close()
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    return report(rows, "bench_core")


if __name__ == "__main__":
    main()
