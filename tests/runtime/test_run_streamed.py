"""run_streamed: every item once, taken lazily by the next free pool thread; the first
failure (of the work or of the iteration) stops the others and is raised."""

from __future__ import annotations

import threading
import time

import pytest

from chunkstore.runtime import current
from chunkstore.runtime.pool import interleaved


def test_every_item_once_across_pool_threads():
    seen: list[int] = []
    names: set[str] = set()
    lock = threading.Lock()

    def f(x: int) -> None:
        time.sleep(0.001)
        with lock:
            seen.append(x)
            names.add(threading.current_thread().name)

    current().pool.run_streamed(f, iter(range(200)))
    assert sorted(seen) == list(range(200))
    assert len(names) >= 2 and all(n.startswith("chunkstore") for n in names)


@pytest.mark.parametrize("n", [0, 1])
def test_no_or_one_item_runs_inline(n):
    names: list[str] = []
    current().pool.run_streamed(lambda x: names.append(threading.current_thread().name), range(n))
    assert names == [threading.current_thread().name] * n


def test_the_stream_is_consumed_lazily():
    """At most one item per thread is taken ahead of the work done."""
    taken = 0
    done = 0
    lock = threading.Lock()
    worst = 0

    def items():
        nonlocal taken, worst
        for i in range(100):
            with lock:
                taken += 1
                worst = max(worst, taken - done)
            yield i

    def f(_x: int) -> None:
        nonlocal done
        time.sleep(0.0005)
        with lock:
            done += 1

    current().pool.run_streamed(f, items())
    assert done == 100
    assert worst <= current().pool.executor()._max_workers + 1


def test_a_failure_stops_the_others_and_is_raised():
    started: list[int] = []

    def f(x: int) -> None:
        started.append(x)
        if x == 3:
            raise ValueError("item 3")
        time.sleep(0.002)

    with pytest.raises(ValueError, match="item 3"):
        current().pool.run_streamed(f, range(10_000))
    assert len(started) < 100  # nobody went on to the end


def test_an_error_of_the_iteration_is_raised():
    def items():
        yield from range(5)
        raise KeyError("broken stream")

    with pytest.raises(KeyError, match="broken stream"):
        current().pool.run_streamed(lambda x: None, items())


def test_inside_a_pool_thread_it_runs_inline():
    """A pool thread never waits on the pool (which could be full of waiters)."""
    def outer(_x: int) -> list[str]:
        inner: list[str] = []
        current().pool.run_streamed(lambda y: inner.append(threading.current_thread().name), range(20))
        assert set(inner) == {threading.current_thread().name}
        return inner

    results = [current().pool.executor().submit(outer, i) for i in range(8)]
    assert all(len(r.result(timeout=30)) == 20 for r in results)


@pytest.mark.parametrize("n, parts, window", [(0, 4, 16), (1, 4, 16), (10, 4, 16),
                                              (256, 4, 4096), (1000, 3, 64), (7, 1, 3)])
def test_interleaved_takes_every_item_once_from_distant_stretches(n, parts, window):
    order = list(interleaved(range(n), parts, window))
    assert sorted(order) == list(range(n))
    if n >= window:  # the first items of a full window are a stretch apart
        step = -(-window // parts)
        assert order[:parts] == [k * step for k in range(parts)]


def test_interleaved_holds_one_window_at_most():
    taken = 0

    def items():
        nonlocal taken
        for i in range(10_000):
            taken += 1
            yield i

    it = interleaved(items(), 4, window=100)
    next(it)
    assert taken == 100


def test_a_whole_read_places_distant_chunks_first(tmp_path, monkeypatch):
    """Threads filling the output at once work in different rows of chunks (no two
    fault in the same huge page of the output at once)."""
    import chunkstore as cs
    from chunkstore.io.plain import ChunkIO

    a = cs.create_array(str(tmp_path / "a.zarr"), shape=(1024, 1024), chunks=(128, 128),
                        dtype="f4", compressors=None)
    a[...] = 1
    seen: list[tuple[int, ...]] = []
    real = ChunkIO._read_one

    def watching(self, out, reader, kept_maps, proj):
        seen.append(proj.chunk_coords)
        return real(self, out, reader, kept_maps, proj)

    monkeypatch.setattr(ChunkIO, "_read_one", watching)
    assert (cs.open_array(str(tmp_path / "a.zarr"), mode="r")[...] == 1).all()
    assert len(seen) == 64
    parts = 2 * current().pool.threads(True)
    first_rows = {coords[0] for coords in seen[:parts]}
    assert len(first_rows) >= max(2, parts // 2)  # C order: all in the first row
