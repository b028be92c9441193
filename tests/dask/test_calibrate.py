"""describe()'s predicted wall time and simulate()'s default throughput: this machine's
copy rates, measured once per process and kept on the Runtime (``dask.calibrate``)."""

import dataclasses
import tempfile
import time

import numpy as np
import pytest

import chunkstore as cs
import chunkstore.dask as csd
from chunkstore import runtime
from chunkstore.dask import calibrate
from chunkstore.dask.memory import Workers

ONE_SLOT = Workers(threads=1, codec_threads=2, count=1)


@pytest.fixture(autouse=True)
def steady_load(monkeypatch):
    """The share of a core measured once and held: the predictions compared are made
    apart."""
    monkeypatch.setattr(calibrate, "SHARE_KEEP_SECONDS", 3600.0)


def _plan(rows, store=None, workers=ONE_SLOT):
    src = cs.create_array(cs.MemoryStore(), shape=(rows, 64), chunks=(64, 8), dtype="f8")
    src[...] = np.arange(rows * 64, dtype="f8").reshape(rows, 64)
    return csd.rechunk(src, (8, 64), store or cs.MemoryStore(), max_mem="200KB",
                       workers=workers)


def test_rates_are_measured_once_per_process_and_kept_on_the_runtime(monkeypatch):
    runtime.reset()
    timed = []
    real = calibrate._time_copy
    monkeypatch.setattr(calibrate, "_time_copy",
                        lambda *a: timed.append(1) or real(*a))
    first = _plan(512).describe()
    part = runtime.current().part(calibrate.Calibrations)
    assert part is calibrate.calibrations() and len(part.seconds_per_byte) == 1
    assert len(timed) == 1 and len(part.overheads) == 1
    # the same codecs, dtype, chunks and stores: nothing measured again, the same rates
    again = _plan(2048).describe()
    assert len(timed) == 1 and again["rates"] == first["rates"]
    # a new Runtime (as after a fork or reset) measures afresh
    runtime.reset()
    _plan(512).describe()
    assert len(timed) == 2
    rates = first["rates"]
    assert rates["read_seconds_per_byte"] > 0 and rates["write_seconds_per_byte"] > 0
    assert rates["task_overhead_seconds"] > 0 and 0 < rates["cpu_share"] <= 1


def test_cpu_share_is_measured_and_kept_a_moment(monkeypatch):
    runtime.reset()
    spins = []
    real = calibrate._measure_share
    monkeypatch.setattr(calibrate, "_measure_share", lambda n: spins.append(n) or real(n))
    share = calibrate.cpu_share(2, 8, local=True)
    cores = calibrate.os.cpu_count()
    assert 0 < share <= 1 and spins == [min(4 * cores, 2 * min(8, cores))]
    assert calibrate.cpu_share(2, 8, local=True) == share and len(spins) == 1  # kept
    monkeypatch.setattr(calibrate, "SHARE_KEEP_SECONDS", 0.0)
    calibrate.cpu_share(2, 8, local=True)
    assert len(spins) == 2  # measured again once stale
    # many slots on few cores: each gets a small share of one
    assert calibrate.cpu_share(64 * cores, 1, local=True) < 0.1
    assert calibrate.cpu_share(2, 8, local=False) == 1.0  # workers elsewhere


def test_predicted_wall_time_grows_linearly_with_the_array():
    plans = {k: _plan(512 * k) for k in (1, 2, 4)}
    d = {k: p.describe() for k, p in plans.items()}
    assert {tuple(s["block"] for s in v["stages"]) for v in d.values()} == \
        {tuple(s["block"] for s in d[1]["stages"])}  # the same plan shape
    for k, v in d.items():
        assert v["ntasks"] == k * d[1]["ntasks"]
        assert v["predicted_wall_seconds"] == pytest.approx(k * d[1]["predicted_wall_seconds"])
        assert v["predicted_wall_seconds"] == pytest.approx(
            sum(s["predicted_wall_seconds"] for s in v["stages"]))
        assert "predicted wall time" in str(v) and "wave(s) at" in str(v)
    # per stage: waves of tasks over the slots, each its bytes at the measured rate + overhead
    stage, plan = d[4]["stages"][0], plans[4]
    rates = plan.rates()
    assert stage["waves"] == stage["ntasks"]  # one slot
    assert stage["predicted_wall_seconds"] == pytest.approx(stage["waves"] * (
        stage["blocks_per_task"] * stage["block_bytes"] * rates.seconds_per_byte(plan.stages[0])
        + rates.task_overhead))
    # twice the slots: half the waves
    wide = _plan(2048, workers=Workers(threads=1, codec_threads=2, count=2)).describe()
    assert wide["stages"][0]["waves"] == -(-stage["ntasks"] // 2)


def test_simulate_uses_the_measured_throughput_by_default():
    plan = _plan(1024)
    sim = plan.simulate(workers=50, threads_per_worker=4, worker_memory="1GiB")
    # a simulated cluster's threads each have a core (none of this machine's load)
    rates = dataclasses.replace(plan.rates(200), cpu_share=1.0)
    assert sim["throughput_measured"] and "(measured here)" in str(sim)
    assert sim["throughput_per_thread"] == pytest.approx(rates.throughput(plan.stages[0]))
    row = sim["stages"][0]
    assert row["seconds"] == pytest.approx(row["waves"] * (
        row["blocks_per_task"] * plan.stages[0].block_bytes / row["throughput_per_thread"]
        + rates.task_overhead))
    given = plan.simulate(workers=50, threads_per_worker=4, worker_memory="1GiB",
                          throughput="100MB")
    assert not given["throughput_measured"] and given["throughput_per_thread"] == 100e6


def test_raw_intermediate_is_timed_on_local_files(tmp_path, monkeypatch):
    runtime.reset()  # measured here, in scratch directories under ``scratch``
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    made = []
    real = tempfile.mkdtemp
    monkeypatch.setattr(tempfile, "mkdtemp", lambda **kw: made.append(real(**kw)) or made[-1])
    src = cs.array(np.random.default_rng(0).random((1024, 1024)), store=str(tmp_path / "a"),
                   chunks=(1024, 16))
    plan = csd.rechunk(src, (16, 1024), str(tmp_path / "b"), max_mem="2MB", workers=ONE_SLOT)
    assert len(plan.stages) == 2 and plan.stages[0].raw_target
    rates = plan.rates()
    assert rates.raw_read > 0 and rates.raw_write > 0
    d = plan.describe()
    assert d["stages"][0]["throughput_per_thread"] == pytest.approx(
        rates.cpu_share / (rates.read + rates.raw_write))
    assert d["stages"][1]["throughput_per_thread"] == pytest.approx(
        rates.cpu_share / (rates.raw_read + rates.write))
    # the local target's and the raw samples were written to local files, then removed
    assert len(made) == 2 and all(m.startswith(str(scratch)) for m in made)
    assert not list(scratch.iterdir())


def test_timed_writes_store_new_objects_each_time(tmp_path, monkeypatch):
    """Each timed write stores new chunk files, as a plan's tasks do (a rewrite of the
    same files would reuse the pages the file system just freed: cheaper than what a
    run pays on some machines). Of each sample (the target's, the raw intermediate's),
    the warm-up and every repeat store keys none of the others stored, and the values
    each wrote are there."""
    runtime.reset()
    src = cs.array(np.random.default_rng(0).random((1024, 1024)), store=str(tmp_path / "a"),
                   chunks=(1024, 16))
    plan = csd.rechunk(src, (16, 1024), str(tmp_path / "b"), max_mem="2MB", workers=ONE_SLOT)
    written: dict[str, list[list[str]]] = {}
    real = cs.Array.write_region

    def spy(self, region, values):
        before = set(self.store.list_prefix(""))
        real(self, region, values)
        written.setdefault(repr(self.store), []).append(
            sorted(set(self.store.list_prefix("")) - before))
        np.testing.assert_array_equal(self[region], values)

    monkeypatch.setattr(cs.Array, "write_region", spy)
    plan.rates()
    assert len(written) == 2  # the target's sample and the raw intermediate's
    for writes in written.values():
        assert all(writes), "a timed write stored no new object"
        every = [k for keys in writes for k in keys]
        assert len(every) == len(set(every))


def test_the_warm_up_is_never_the_figure():
    """A sample whose first run is slow (code paths, first touch of its buffers) is run
    again and timed: once when the warm-up took LONG_SAMPLE_SECONDS or more (a 64 MiB
    chunk's warm-up took 0.24 s where later reads took 0.09-0.13), else REPEATS times."""
    calls = []

    def burn(seconds):
        t0 = time.process_time()
        while time.process_time() - t0 < seconds:
            pass

    def sample():
        calls.append(1)
        burn(calibrate.LONG_SAMPLE_SECONDS + 0.05 if len(calls) == 1 else 0.01)

    got = calibrate._median_seconds(sample)
    assert len(calls) == 2
    assert got < calibrate.LONG_SAMPLE_SECONDS / 2
    calls.clear()
    quick = calibrate._median_seconds(lambda: calls.append(1))
    assert len(calls) == 1 + calibrate.REPEATS and quick < 0.01
