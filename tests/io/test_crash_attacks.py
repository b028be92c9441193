"""Red team: SIGKILL in the middle of long write loops (partial writes into shards,
appends, attributes, consolidated groups). After every kill: every inner chunk is old or
new (never torn, never undecodable), ``verify`` finds 0 bad chunks, a consolidated open
shows the real shapes, and ``LocalStore.sweep_temp`` removes every temporary file."""

from __future__ import annotations

import os
import random
import signal
import time

import numpy as np

import chunkstore as cs
from chunkstore.api.verify import verify
from chunkstore.storage import LocalStore
from tests.multiproc import context

SHAPE, CHUNKS, SHARDS = (256,), (16,), (64,)
IDX = np.arange(SHAPE[0])


def _partial_writer(root, first_gen, ready):
    a = cs.open_array(root, mode="r+")
    gen = first_gen
    while True:
        values = gen * 1000 + IDX
        a[0::2] = values[0::2]  # every inner chunk of every shard, partly: RMW
        a[1::2] = values[1::2]
        a.attrs["gen"] = gen
        if gen == first_gen:
            ready.set()
        gen += 1


def _temps(root):
    return [os.path.join(d, n) for d, _, names in os.walk(root) for n in names
            if n.startswith(".chunkstore-tmp-")]


def _check_generations(data):
    gens = (data - IDX) // 1000
    assert ((data - IDX) % 1000 == 0).all(), "an element holds neither generation's value"
    for start in range(0, SHAPE[0], CHUNKS[0]):
        inner = gens[start:start + CHUNKS[0]]
        # each half of an inner chunk was written by one partial write: one generation
        assert len(set(inner[0::2].tolist())) == 1, f"torn inner chunk at {start}"
        assert len(set(inner[1::2].tolist())) == 1, f"torn inner chunk at {start}"
    return set(gens.tolist())


def test_sigkill_during_partial_shard_writes(tmp_path):
    root = str(tmp_path / "k.zarr")
    a = cs.create_array(root, shape=SHAPE, chunks=CHUNKS, shards=SHARDS, dtype="i8",
                        fill_value=-1)
    a[:] = IDX
    ctx = context()
    rng = random.Random(7)
    seen, leftovers = set(), 0
    for k in range(10):
        ready = ctx.Event()
        p = ctx.Process(target=_partial_writer, args=(root, 1 + 1000 * k, ready))
        p.start()
        assert ready.wait(60)
        time.sleep(rng.uniform(0.0, 0.25))
        os.kill(p.pid, signal.SIGKILL)
        p.join()
        b = cs.open_array(root, mode="r")
        seen |= _check_generations(b[:])
        assert isinstance(b.attrs["gen"], int)
        assert verify(LocalStore(root)).bad == {}
        leftovers += len(_temps(root))
    assert len(seen) > 10
    before = len(_temps(root))
    removed = LocalStore(root).sweep_temp()
    assert _temps(root) == [], f"{len(_temps(root))} temp files survive sweep_temp()"
    assert removed == before, (removed, before, leftovers)
    print(f"temp files seen after kills (cumulative): {leftovers}; swept: {removed}")
    b = cs.open_array(root, mode="r")
    _check_generations(b[:])
    assert verify(LocalStore(root)).ok
    from tests.cli_run import run_cli  # here: the writer processes import this module

    r = run_cli("verify", root)
    assert r.returncode == 0 and "0 bad" in r.stdout, (r.returncode, r.stdout, r.stderr)


def _consolidated_appender(root, ready):
    a = cs.open_group(root, mode="r+")["arr"]
    ready.set()
    while True:
        a.append(np.ones(1, "i4"))


def test_sigkill_during_appends_never_leaves_a_stale_consolidated_shape(tmp_path):
    """A member of a consolidated group is appended to until SIGKILL; a consolidated open
    afterwards must show the real shape (or refuse with a clear error).

    Observed: 3 of 10 kills leave the consolidated copy one row short, served silently
    (the member's document commits first, the consolidated refresh runs after it: a
    kill between the two leaves the copy stale, and nothing marks it so)."""
    root = str(tmp_path / "g.zarr")
    g = cs.group(root)
    g.create_array("arr", shape=(0,), chunks=(16,), dtype="i4")
    cs.consolidate_metadata(root)
    ctx = context()
    rng = random.Random(3)
    stale = []
    for k in range(10):
        ready = ctx.Event()
        p = ctx.Process(target=_consolidated_appender, args=(root, ready))
        p.start()
        assert ready.wait(60)
        time.sleep(rng.uniform(0.2, 0.6))
        os.kill(p.pid, signal.SIGKILL)
        p.join()
        real = cs.open_array(root, path="arr", mode="r").shape
        try:
            cons = cs.open_group(root, mode="r", use_consolidated=True)["arr"].shape
        except cs.errors.ChunkstoreError:
            continue  # refusing a stale copy is acceptable
        if cons != real:
            stale.append((k, real, cons))
    assert not stale, f"consolidated shape stale after kills: {stale}"
    assert LocalStore(root).sweep_temp() >= 0 and _temps(root) == []
