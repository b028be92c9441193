"""Plans at any scale: lazy graphs, runs of blocks per task, describe() and simulate()."""

import time

import dask
import dask.array as da
import numpy as np
import pytest

import chunkstore as cs
import chunkstore.dask as csd
from chunkstore.dask.graph import PlanGraph
from chunkstore.dask.memory import Workers
from chunkstore.io.buffers import POOL_THREAD_BYTES
from chunkstore.rechunk.planner import blocks_per_task

GiB = 2**30


SEED_WORKERS = Workers(threads=4, codec_threads=4, count=50)


def _seed(shape, chunks=(255, 255, 255), workers=SEED_WORKERS):
    src = cs.create_array(cs.MemoryStore(), shape=shape, chunks=chunks, dtype="f8")
    view = csd.TransposedSource(src, (2, 1, 0))
    return csd.rechunk(view, view.chunks, cs.MemoryStore(), max_mem="3.5GiB", workers=workers)


def test_seed_plan_describe_and_simulate():
    plan = _seed((10000, 10000, 500))
    d = plan.describe()
    assert len(d["stages"]) == 1 and d["bytes_read"] == 10000 * 10000 * 500 * 8
    # two tasks per thread of the 50 x 4 cluster at least; each within max_mem
    assert d["ntasks"] >= 400
    assert d["peak_task_memory"] <= 3.5 * GiB
    terms = d["stages"][0]["task_memory_terms"]
    codec = terms["decode_scratch"] + terms["encode_copy"]
    # 4 tasks at once; the codec buffers and threads of the worker's one IO pool once
    pool = plan.stages[0].codec_threads * POOL_THREAD_BYTES
    assert d["peak_worker_memory"] == \
        d["workers"]["baseline"] + 4 * (d["peak_task_memory"] - codec) + codec + pool
    assert d["peak_worker_memory"] < d["workers"]["baseline"] + 4 * d["peak_task_memory"] + pool
    assert terms["total"] == d["peak_task_memory"] and terms["block"] > 0
    text = str(d)
    assert "per worker" in text and "per task" in text
    sim = plan.simulate(workers=50, threads_per_worker=4, worker_memory="24GiB",
                        throughput="100MB")
    assert sim["fits"] and sim["ntasks"] == d["ntasks"]
    stage = sim["stages"][0]
    assert stage["waves"] == -(-stage["ntasks"] // 200)
    expected = stage["waves"] * plan.stages[0].block_bytes / 100e6
    assert sim["wall_seconds"] == pytest.approx(expected)
    assert "estimated wall time" in str(sim)
    slow_store = plan.simulate(workers=50, threads_per_worker=4, worker_memory="24GiB",
                               throughput="100MB", store_bandwidth="1GB")
    assert slow_store["stages"][0]["bound_by"] == "store"
    # blocks of one 126 MiB chunk (BLOCK_BYTES stops growth): ~1.2 GB per worker
    tight = plan.simulate(workers=50, threads_per_worker=4, worker_memory="1GiB",
                          throughput="100MB")
    assert not tight["fits"] and "memory_limit" in tight["notes"][0]


def test_100tb_graph_is_lazy_and_bounded():
    plan = _seed((100_000, 100_000, 1250))
    t0 = time.perf_counter()
    delayed = plan.to_delayed()
    assert time.perf_counter() - t0 < 1.0
    graph = delayed.__dask_graph__()
    layer = next(iter(graph.layers.values()))
    mapping = getattr(layer, "mapping", layer)
    assert isinstance(mapping, PlanGraph)
    stage = plan.stages[0]
    assert stage.ntasks > 10_000 and blocks_per_task(stage) > 1
    assert len(mapping) == mapping.ntasks[0] + 3 <= 10_003
    key = (mapping.copy_name(0), 7)
    assert key in mapping and (mapping.copy_name(0), 10**9) not in mapping


def test_runs_of_blocks_per_task_copy_everything(tmp_path):
    data = np.random.default_rng(3).standard_normal((40, 30, 20))
    a = cs.array(data, store=str(tmp_path / "a.zarr"), chunks=(4, 30, 2))
    plan = csd.rechunk(a, (40, 3, 20), str(tmp_path / "b.zarr"), max_mem="100KB")
    graph = plan.to_delayed(max_tasks=3)
    mapping = next(iter(graph.__dask_graph__().layers.values()))
    mapping = getattr(mapping, "mapping", mapping)
    assert all(n <= 3 for n in mapping.ntasks) and max(mapping.per_task) > 1
    dask.compute(graph, scheduler="sync")
    np.testing.assert_array_equal(cs.open_array(str(tmp_path / "b.zarr"))[:], data)


def test_blocks_are_read_and_written_in_pieces(tmp_path, monkeypatch):
    """A task writes its block one piece at a time (whole target chunks, about a
    quarter of the block): no write_region call carries the whole block."""
    data = np.arange(64 * 64, dtype="f4").reshape(64, 64)
    a = cs.array(data, store=str(tmp_path / "a.zarr"), chunks=(64, 4))
    plan = csd.rechunk(a, (4, 64), str(tmp_path / "b.zarr"), max_mem="1MB",
                       workers=Workers(threads=1, codec_threads=2))
    (stage,) = plan.stages
    assert stage.block == (64, 64)
    sizes = []
    original = cs.Array.write_region

    def spy(self, region, value):
        sizes.append(np.asarray(value).nbytes)
        return original(self, region, value)

    monkeypatch.setattr(cs.Array, "write_region", spy)
    plan.execute()
    assert max(sizes) <= stage.block_bytes // 4 and sum(sizes) == data.nbytes
    np.testing.assert_array_equal(cs.open_array(str(tmp_path / "b.zarr"))[:], data)


def test_to_store_fuses_with_blockwise_producers(tmp_path):
    x = da.ones((64, 64), chunks=(16, 64)) * 3
    d = csd.to_store(x, str(tmp_path / "f.zarr"), chunks=(16, 64), compute=False)
    keys = list(dict(d.__dask_graph__()))
    names = {(k[0] if isinstance(k, tuple) else k).rsplit("-", 1)[0] for k in keys}
    # one task per block (producer and store fused), the array handle and the end
    assert len(keys) == 4 + 2, names
    assert d.compute() is None
    np.testing.assert_array_equal(cs.open_array(str(tmp_path / "f.zarr"))[:], 3)


def test_store_task_memory_counts_a_waiting_block():
    from chunkstore.dask.io import store_task_memory
    target = cs.create_array(cs.MemoryStore(), shape=(1024, 1024), chunks=(256, 1024))
    fused = da.ones((1024, 1024), chunks=(256, 1024)) * 2  # blockwise: fused with the store
    waiting = da.random.default_rng(0).random((1024, 1024), chunks=(256, 1024))
    # the written block is in the task's figure; dask's root-task queue (worker-saturation
    # 1.1: two tasks per thread) lets a worker make two more before their stores run
    assert store_task_memory(waiting, target) == store_task_memory(fused, target) + 2 * 2 * 2**20
    with dask.config.set({"distributed.scheduler.worker-saturation": 2.5}):
        assert store_task_memory(waiting, target) == (store_task_memory(fused, target)
                                                      + 3 * 2 * 2**20)


def test_to_store_max_mem_refuses_large_blocks(tmp_path):
    x = da.zeros((1024, 1024), chunks=(1024, 1024))  # 8 MiB blocks
    with pytest.raises(csd.PlanError, match="max_mem"):
        csd.to_store(x, str(tmp_path / "r.zarr"), chunks=(1024, 1024), max_mem="4MB")
    csd.to_store(x + 1, str(tmp_path / "ok.zarr"), chunks=(128, 1024), max_mem="64MB")
    assert cs.open_array(str(tmp_path / "ok.zarr"))[5, 5] == 1


def test_local_intermediate_is_stored_uncompressed(tmp_path):
    data = np.arange(256 * 256, dtype="f4").reshape(256, 256)
    a = cs.array(data, store=str(tmp_path / "a.zarr"), chunks=(256, 1))
    plan = csd.rechunk(a, (1, 256), str(tmp_path / "b.zarr"), max_mem="100KB",
                       workers=Workers(threads=1, codec_threads=2))
    assert len(plan.stages) == 2 and plan.stages[0].raw_target
    temp = plan._intermediate(plan.stages[0])
    try:
        assert temp.metadata.to_json()["codecs"] == [
            {"name": "bytes", "configuration": {"endian": "little"}}]
    finally:
        plan.remove_intermediates()
    np.testing.assert_array_equal(plan.execute()[:], data)
    # in memory (or any store without local files) the intermediate stays compressed
    mem = csd.rechunk(a, (1, 256), cs.MemoryStore(), max_mem="100KB",
                      workers=Workers(threads=1, codec_threads=2))
    assert not mem.stages[0].raw_target
