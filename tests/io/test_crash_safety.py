"""A writer killed with SIGKILL mid-write never leaves a torn chunk or document.

The writer rewrites every chunk over and over, generation after generation; each
generation's data is recognisable (``gen * 10_000 + element index``), so after each
kill every chunk must hold exactly one generation. A reader running beside a writer
must likewise only ever see whole chunks.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import signal
import time

import numpy as np

import chunkstore as cs

SHAPE, CHUNKS = (64, 64), (8, 8)


def pattern(gen: int) -> np.ndarray:
    return gen * 10_000 + np.arange(np.prod(SHAPE), dtype="i8").reshape(SHAPE)


def check_chunks(data: np.ndarray) -> set[int]:
    """The generations seen; asserts every chunk is entirely one generation."""
    gens = set()
    base = pattern(0)
    for i in range(0, SHAPE[0], CHUNKS[0]):
        for j in range(0, SHAPE[1], CHUNKS[1]):
            block = data[i:i + CHUNKS[0], j:j + CHUNKS[1]]
            delta = block - base[i:i + CHUNKS[0], j:j + CHUNKS[1]]
            assert (delta == delta.flat[0]).all(), f"torn chunk at {(i, j)}"
            gens.add(int(delta.flat[0]) // 10_000)
    return gens


def _writer(root: str, start_gen: int) -> None:
    a = cs.open_array(root, mode="r+")
    gen = start_gen
    while True:
        a[:] = pattern(gen)
        a.attrs["generation"] = gen
        gen += 1


def test_sigkill_during_writes_leaves_whole_chunks(tmp_path):
    root = str(tmp_path / "a.zarr")
    cs.create_array(root, shape=SHAPE, chunks=CHUNKS, dtype="i8", fill_value=-1)
    cs.open_array(root)[:] = pattern(1)
    ctx = mp.get_context("fork")
    rng = random.Random(0)
    seen: set[int] = set()
    for attempt in range(20):
        proc = ctx.Process(target=_writer, args=(root, 2 + attempt * 1000))
        proc.start()
        time.sleep(rng.uniform(0.05, 0.3))
        os.kill(proc.pid, signal.SIGKILL)
        proc.join()
        a = cs.open_array(root, mode="r")  # metadata still parses
        assert a.shape == SHAPE
        seen |= check_chunks(a[:])
        assert isinstance(a.attrs.get("generation", 0), int)
    assert len(seen) > 20  # the kills really landed mid-run, across many generations


def _reader(root: str, seconds: float, queue) -> None:
    a = cs.open_array(root, mode="r")
    deadline, reads = time.time() + seconds, 0
    try:
        while time.time() < deadline:
            check_chunks(a[:])
            reads += 1
        queue.put(("ok", reads))
    except AssertionError as e:
        queue.put(("torn", str(e)))


def test_reader_beside_writer_never_sees_torn_chunks(tmp_path):
    root = str(tmp_path / "a.zarr")
    cs.create_array(root, shape=SHAPE, chunks=CHUNKS, dtype="i8")
    cs.open_array(root)[:] = pattern(1)
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    writer = ctx.Process(target=_writer, args=(root, 2))
    reader = ctx.Process(target=_reader, args=(root, 2.0, queue))
    writer.start()
    reader.start()
    status, detail = queue.get(timeout=60)
    reader.join()
    os.kill(writer.pid, signal.SIGKILL)
    writer.join()
    assert status == "ok" and detail > 0, detail
