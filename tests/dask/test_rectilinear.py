"""The Dask layer over rectilinear chunk grids: ``to_store`` of irregular dask chunks
writes a rectilinear grid matching them (one whole chunk per block: nothing read, no
lock), ``from_store`` gives the stored chunk lengths back, region writes align with an
existing rectilinear grid, and rechunk/transpose read and write such grids within
max_mem (checked against NumPy, threaded scheduler)."""

import dask
import dask.array as da
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import chunkstore as cs
import chunkstore.dask as csd
from chunkstore.runtime.sync import ThreadSynchronizer


@pytest.fixture(autouse=True)
def threaded():
    with dask.config.set(scheduler="threads"):
        yield


class ReadCountingStore(cs.MemoryStore):
    """Records every key whose value is read (all of MemoryStore's reads pass here)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.read_keys = []

    def _value(self, key, max_bytes):
        self.read_keys.append(key)
        return super()._value(key, max_bytes)

    def get_ranges(self, requests, object_size=None):
        self.read_keys.extend(k for k, _ in requests)
        return super().get_ranges(requests, object_size)

    def chunk_reads(self):
        return [k for k in self.read_keys if not k.endswith("zarr.json")
                and not k.endswith((".zarray", ".zattrs", ".zgroup"))]


class RecordingSynchronizer(ThreadSynchronizer):
    """A synchronizer that records the keys it is asked to lock."""

    def __init__(self):
        super().__init__()
        self.locked = []

    def __getitem__(self, key):
        self.locked.append(key)
        return super().__getitem__(key)


def stored_grid(array):
    """The chunk lengths per axis the stored document spells (its run-length form
    expanded), as dask spells chunks."""
    doc = array.metadata.to_json()["chunk_grid"]
    if doc["name"] == "regular":
        shape = doc["configuration"]["chunk_shape"]
        return tuple(tuple(min(c, n - i) for i in range(0, n, c)) or (0,)
                     for c, n in zip(shape, array.shape, strict=True))
    out = []
    for spec, n in zip(doc["configuration"]["chunk_shapes"], array.shape, strict=True):
        if isinstance(spec, int):
            sizes = [min(spec, n - i) for i in range(0, n, spec)]
        else:
            sizes = [v for e in spec for v in ([e[0]] * e[1] if isinstance(e, list) else [e])]
        out.append(tuple(sizes) if n else (0,))
    return tuple(out)


def irregular(x):
    return any(len(c) > 1 and (len(set(c[:-1])) > 1 or c[-1] > c[0]) for c in x.chunks)


axis_chunks = st.lists(st.integers(1, 6), min_size=1, max_size=4).map(tuple)


@settings(max_examples=40, deadline=None)
@given(st.lists(axis_chunks, min_size=1, max_size=3).map(tuple))
def test_to_store_writes_the_dask_chunks(chunks):
    shape = tuple(sum(c) for c in chunks)
    data = np.arange(np.prod(shape), dtype="i4").reshape(shape)
    x = da.from_array(data, chunks=chunks)
    a = csd.to_store(x, cs.MemoryStore())
    np.testing.assert_array_equal(a[...], data)
    assert stored_grid(a) == x.chunks
    assert (a.metadata.to_json()["chunk_grid"]["name"] == "rectilinear") == irregular(x)
    y = csd.from_store(a)
    assert y.chunks == x.chunks
    np.testing.assert_array_equal(y.compute(), data)


def test_irregular_write_reads_nothing_and_takes_no_lock():
    data = np.random.default_rng(0).standard_normal((40, 33))
    x = da.concatenate([da.from_array(data[:7], chunks=(7, 10)),
                        da.from_array(data[7:20], chunks=(13, 10)),
                        da.from_array(data[20:], chunks=(20, 10))])
    assert x.chunks == ((7, 13, 20), (10, 10, 10, 3))
    store, sync = ReadCountingStore(), RecordingSynchronizer()
    a = csd.to_store(x, store, synchronizer=sync)
    assert store.chunk_reads() == [] and sync.locked == []
    assert a.read_chunk_sizes == ((7, 13, 20), (10, 10, 10, 3))
    assert len([k for k in store.list() if k.startswith("c/")]) == 12  # one chunk per block
    np.testing.assert_array_equal(a[...], data)
    # the graph: one store task per block, no rechunk layer in front of them
    graph = csd.to_store(x, cs.MemoryStore(), compute=False).__dask_graph__()
    assert not any("rechunk" in str(k) for k in graph)
    assert len([k for k in graph if str(k).startswith("('to-store-")]) == 12
    # the proof can fail: a region cutting chunks reads them and locks them
    store.read_keys.clear()
    csd.to_store(da.from_array(data[3:9, 1:5], chunks=3), a, region=(slice(3, 9), slice(1, 5)))
    assert store.chunk_reads() and sync.locked


def test_regular_dask_chunks_keep_a_regular_grid():
    x = da.ones((10, 9), chunks=(4, 3))
    a = csd.to_store(x, cs.MemoryStore())
    assert a.chunks == (4, 3) and a.metadata.to_json()["chunk_grid"]["name"] == "regular"


def test_chunks_forces_a_regular_grid():
    data = np.arange(30.0).reshape(6, 5)
    x = da.from_array(data, chunks=((1, 5), (3, 2)))
    a = csd.to_store(x, cs.MemoryStore(), chunks=(2, 2))
    assert a.chunks == (2, 2)
    np.testing.assert_array_equal(a[...], data)
    b = csd.to_store(x, cs.MemoryStore(), chunks=(2, 2), zarr_format=2)
    np.testing.assert_array_equal(b[...], data)


def test_v2_target_with_irregular_chunks_is_refused():
    x = da.ones((6, 5), chunks=((1, 5), (3, 2)))
    store = cs.MemoryStore()
    with pytest.raises(ValueError, match=r"'arr'.*irregular.*zarr_format=3.*chunks="):
        csd.to_store(x, store, path="arr", zarr_format=2)
    assert list(store.list()) == []  # refused before anything is created


def test_empty_axis():
    x = da.zeros((0, 5), chunks=((0,), (2, 3)))
    a = csd.to_store(x, cs.MemoryStore())
    assert a.read_chunk_sizes == ((), (2, 3))
    assert csd.from_store(a).chunks == ((0,), (2, 3))


def test_region_into_a_rectilinear_array():
    data = np.random.default_rng(1).standard_normal((25, 30))
    store, sync = ReadCountingStore(), RecordingSynchronizer()
    a = cs.create_array(store, shape=(25, 30), chunks=((10, 5, 10), (15, 15)), dtype="f8",
                        synchronizer=sync)
    # blocks matching the grid's chunks: written whole, nothing read, no lock
    x = da.from_array(data[10:25], chunks=((5, 10), (15, 15)))
    csd.to_store(x, a, region=(slice(10, 25), slice(0, 30)))
    assert store.chunk_reads() == [] and sync.locked == []
    # unaligned blocks: rechunked onto the grid; the region's ends are safe RMWs
    y = da.from_array(data[3:12, 2:29], chunks=4)
    csd.to_store(y, a, region=(slice(3, 12), slice(2, 29)))
    expected = np.zeros_like(data)
    expected[10:25] = data[10:25]
    expected[3:12, 2:29] = data[3:12, 2:29]
    np.testing.assert_array_equal(a[...], expected)
    assert sync.locked  # the partial chunks went through the locked read-modify-write


def test_into_an_existing_rectilinear_array_of_another_grid():
    data = np.arange(25 * 30.0).reshape(25, 30)
    a = cs.create_array(cs.MemoryStore(), shape=(25, 30), chunks=((10, 5, 10), (15, 15)),
                        dtype="f8")
    x = da.from_array(data, chunks=((3, 22), (29, 1)))
    csd.to_store(x, a)
    np.testing.assert_array_equal(a[...], data)
    assert a.read_chunk_sizes == ((10, 5, 10), (15, 15))


def test_from_store_of_a_rectilinear_array_with_chunks():
    data = np.arange(25 * 30).reshape(25, 30)
    a = cs.create_array(cs.MemoryStore(), shape=(25, 30), chunks=((10, 5, 10), (15, 15)),
                        dtype="i8")
    a[...] = data
    x = csd.from_store(a)
    assert x.chunks == ((10, 5, 10), (15, 15))
    np.testing.assert_array_equal(x[3:22:2, ::3].compute(), data[3:22:2, ::3])
    np.testing.assert_array_equal(csd.from_store(a, chunks=(7, 7)).compute(), data)


def test_auto_rechunked_irregular_array_roundtrip(tmp_path):
    data = np.random.default_rng(2).standard_normal((300, 40))
    x = da.from_array(data, chunks=((100, 150, 50), 40)).rechunk({0: "auto"},
                                                                 block_size_limit=40_000)
    a = csd.to_store(x, str(tmp_path / "a.zarr"))
    b = cs.open_array(str(tmp_path / "a.zarr"), mode="r")
    assert csd.from_store(b).chunks == x.chunks
    np.testing.assert_array_equal(b[...], data)
    assert a.read_chunk_sizes[0] == x.chunks[0]


# -- rechunk / transpose ------------------------------------------------------------------

def _rectilinear(data, chunks, store=None):
    a = cs.create_array(store if store is not None else cs.MemoryStore(), shape=data.shape,
                        chunks=chunks, dtype=data.dtype)
    a[...] = data
    return a


@pytest.fixture
def rect_source():
    data = np.random.default_rng(3).standard_normal((60, 45))
    return _rectilinear(data, ((10, 25, 5, 20), (7, 38))), data


@pytest.mark.parametrize("target", [(8, 9), (60, 1), ((30, 30), (5, 5, 35)), {1: (40, 5)}])
@pytest.mark.parametrize("max_mem", ["60KB", "1MB"])
def test_rechunk_of_a_rectilinear_source(rect_source, target, max_mem):
    a, data = rect_source
    plan = csd.rechunk(a, target, cs.MemoryStore(), max_mem=max_mem)
    assert plan.peak_task_memory <= csd.parse_bytes(max_mem)
    b = plan.execute()
    np.testing.assert_array_equal(b[...], data)
    if isinstance(target, dict):  # the other axis keeps the source's rectilinear chunks
        assert b.read_chunk_sizes == ((10, 25, 5, 20), (40, 5))
    elif isinstance(target[0], tuple):
        assert b.read_chunk_sizes == target
    else:
        assert b.chunks == target


@pytest.mark.parametrize(("target", "max_mem"), [
    (((1, 59), (44, 1)), 60_000), (((7, 7, 7, 39), (45,)), 40_000),
    (((13, 13, 13, 21), (2, 43)), 40_000), (((9, 12, 9, 12, 9, 9), (20, 25)), 40_000)])
def test_rechunk_onto_a_rectilinear_target_writes_whole_chunks(target, max_mem):
    data = np.random.default_rng(4).standard_normal((60, 45))
    src = cs.array(data, chunks=(7, 7))
    store, sync = ReadCountingStore(), RecordingSynchronizer()
    plan = csd.rechunk(src, target, store, max_mem=max_mem, synchronizer=sync)
    assert plan.peak_task_memory <= max_mem
    if target[0] == (13, 13, 13, 21):  # planned blocks of 21 rows: snapping moves them
        assert plan.stages[-1].block[0] == 21
    b = plan.execute()
    # every block snapped onto the grid: no chunk of the target is read back or locked
    assert [k for k in store.chunk_reads() if k.startswith("c/")] == [] and sync.locked == []
    np.testing.assert_array_equal(b[...], data)
    assert b.read_chunk_sizes == target


def test_rechunk_refuses_when_snapped_blocks_cannot_fit():
    src = cs.array(np.zeros((60, 45)), chunks=(7, 7))
    with pytest.raises(csd.PlanError, match="rectilinear grid.*raise max_mem"):
        csd.rechunk(src, ((1, 59), (44, 1)), cs.MemoryStore(), max_mem="40KB")


def test_snapped_blocks_stay_within_max_mem(rect_source):
    """The blocks a plan snaps onto a rectilinear grid, by the model, fit max_mem."""
    from chunkstore.dask.rechunk import _grown
    from chunkstore.dask.source import snapped
    _, data = rect_source
    src = cs.array(data, chunks=(4, 4))
    plan = csd.rechunk(src, ((13, 13, 13, 21), (2, 43)), cs.MemoryStore(), max_mem="40KB")
    last = plan.stages[-1]
    grown = _grown(last, plan.target)
    assert grown.task_memory <= 40_000
    regions = [snapped(last.block_region(j), plan.target) for j in range(last.ntasks)]
    for r in regions:
        assert all(s.stop - s.start <= g for s, g in zip(r, grown.block, strict=True))
    covered = np.zeros(data.shape, dtype=int)  # the snapped blocks tile the array
    for r in regions:
        covered[r] += 1
    assert (covered == 1).all()


def test_transpose_of_a_rectilinear_source(rect_source):
    a, data = rect_source
    t = csd.transpose(a, (1, 0), cs.MemoryStore(), max_mem="100KB")
    np.testing.assert_array_equal(t[...], data.T)
    assert t.read_chunk_sizes == ((7, 38), (10, 25, 5, 20))  # the grid permuted
    u = csd.transpose(a, None, cs.MemoryStore(), chunks=(9, 9), max_mem="100KB")
    assert u.chunks == (9, 9)
    np.testing.assert_array_equal(u[...], data.T)


def test_rectilinear_3d_transpose_to_rectilinear_target():
    data = np.arange(12 * 10 * 6, dtype="i4").reshape(12, 10, 6)
    a = _rectilinear(data, ((5, 7), (3, 3, 4), 6))
    t = csd.transpose(a, (2, 0, 1), cs.MemoryStore(), chunks=((1, 5), (6, 6), (9, 1)),
                      max_mem="200KB")
    np.testing.assert_array_equal(t[...], data.transpose(2, 0, 1))
    assert t.read_chunk_sizes == ((1, 5), (6, 6), (9, 1))


# -- on a LocalCluster: per-worker peak RSS sampled from outside -------------------------

MiB = 2**20
#: sampling and first-use slack over the model (as tests/dask/test_memory.py)
SLACK = 12 * MiB


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       memory_limit="700MB", dashboard_address=None)
    with cluster, distributed.Client(cluster) as c:
        yield c


def _irregular_rows(lengths, cols, seed):
    """``da.concatenate`` of blocks of ``lengths`` rows, each generated (float64)."""
    parts = [da.random.default_rng(seed + i).random((n, cols), chunks=(n, cols))
             for i, n in enumerate(lengths)]
    return da.concatenate(parts)


@pytest.mark.parametrize("kind", ["concatenate", "auto"])
def test_irregular_to_store_on_a_cluster(client, tmp_path, kind):
    """256 MiB of irregular blocks written as a rectilinear grid by two worker processes:
    each worker's peak RSS under the modelled bound, and the chunks come back."""
    from chunkstore.dask.io import store_task_memory
    from chunkstore.dask.memory import WorkerMemory, Workers
    lengths = [160, 320, 96, 256, 224, 288, 128, 192, 320, 64, 256, 160, 224, 192, 288, 160,
               128, 320, 96, 224]
    x = _irregular_rows(lengths, 8192, seed=10)
    if kind == "auto":  # dask's own choice along axis 1, the rows stay irregular
        x = x.rechunk({1: "auto"}, block_size_limit=8 * MiB)
    assert x.nbytes == 256 * MiB and irregular(x)
    probe = cs.create_array(None, shape=x.shape, dtype=x.dtype, chunks=x.chunks)
    workers = Workers.of_client(client)
    predicted = workers.worker_memory(store_task_memory(x, probe, workers.codec_threads))
    where = str(tmp_path / "x.zarr")
    with WorkerMemory(client, interval=0.01) as mem:
        csd.to_store(x, where)
    assert not mem.events, mem.events
    assert len(mem.peaks) == 2
    for addr, peak in mem.peaks.items():
        assert peak <= predicted + SLACK, (addr, peak / MiB, predicted / MiB)
        assert peak - mem.baselines[addr] <= 3 * max(x.chunks[0]) * 8192 * 8, addr
    back = cs.open_array(where, mode="r")
    assert csd.from_store(back).chunks == x.chunks
    np.testing.assert_array_equal(back[470:700], x[470:700].compute(scheduler="sync"))


def test_rectilinear_rechunk_on_a_cluster(client, tmp_path):
    """A rectilinear source rechunked onto a rectilinear target by two worker processes,
    each within max_mem (one task per worker at a time) over its baseline."""
    from chunkstore.dask.memory import WorkerMemory
    rows = [200, 312, 64, 448, 256, 168, 400, 200]  # 2048 rows of 4096 float32: 32 MiB
    src = cs.create_array(str(tmp_path / "s.zarr"), shape=(2048, 4096), dtype="f4",
                          chunks=(tuple(rows), 512))
    rng = np.random.default_rng(5)
    src[...] = rng.random((2048, 4096), dtype="f4")
    max_mem = 24 * MiB
    target = ((512,) * 4, (1000, 1000, 1000, 1096))
    plan = csd.rechunk(src, target, str(tmp_path / "t.zarr"), max_mem=max_mem)
    assert plan.peak_task_memory <= max_mem
    with WorkerMemory(client, interval=0.01) as mem:
        out = plan.execute()
    assert not mem.events, mem.events
    for addr, peak in mem.peaks.items():
        assert peak - mem.baselines[addr] <= max_mem + SLACK, (addr, peak / MiB)
    assert out.read_chunk_sizes == target
    np.testing.assert_array_equal(out[300:700, ::7], src[300:700, ::7])
