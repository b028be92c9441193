"""Issue 15, item 9: one progress style, labelled with the step, a summary line with time
and output path, ``\\r`` redraws only on a terminal; the same for every command."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest

import chunkstore as cs
from chunkstore import progress as progress_mod
from chunkstore.progress import TaskProgress, TerminalProgress, local_dask_progress

from .conftest import DATA


@pytest.fixture
def eager(monkeypatch):
    """Draw every update (no rate limit), to see the style of intermediate lines."""
    monkeypatch.setattr(progress_mod, "MIN_INTERVAL", 0.0)
    monkeypatch.setattr(progress_mod, "PLAIN_INTERVAL", 0.0)


def test_terminal_redraws_in_place_and_ends_the_line(eager):
    out = io.StringIO()
    progress = TerminalProgress("copy", stream=out, interactive=True)
    bar = progress.step("write", "blocks")
    for i in range(1, 4):
        bar(i, 3, i * 10**6)
    progress.summary("copied a -> b")
    text = out.getvalue()
    assert text.startswith("\rwrite: [########") and text.count("\r") == 3
    lines = text.split("\n")
    assert lines[0].rsplit("\r", 1)[1].startswith("write: 3/3 blocks in ")
    assert re.fullmatch(r"chunkstore copy: copied a -> b in \d+\.\d s", lines[1])


def test_not_a_terminal_prints_plain_lines(eager):
    out = io.StringIO()
    bar = TerminalProgress("verify", stream=out, interactive=False).step("verify", "keys")
    for i in range(1, 4):
        bar(i, 3)
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue() and len(lines) == 3
    assert lines[0].startswith("verify:  33% 1/3 keys") and "ETA" in lines[0]
    assert lines[2].startswith("verify: 3/3 keys in ")


def test_not_a_terminal_stays_quiet_for_short_steps():
    out = io.StringIO()
    bar = TerminalProgress("verify", stream=out, interactive=False).step("verify")
    for i in range(1, 101):
        bar(i, 100)
    assert len(out.getvalue().splitlines()) == 1


def test_task_progress_steps_in_order_from_the_local_scheduler():
    import dask

    out = io.StringIO()
    reporter = TerminalProgress("x", stream=out, interactive=False)
    tasks = TaskProgress(reporter, lambda key: "even" if key[0] == "even" else None)
    graph = {("even", i): (abs, -i) for i in range(4)} | {"odd": (abs, 1)}
    with local_dask_progress(tasks):
        dask.get(graph, [("even", i) for i in range(4)] + ["odd"])
    assert out.getvalue().startswith("even: 4/4 tasks in ")
    fallback = TaskProgress(reporter, fallback="compute")
    with local_dask_progress(fallback):
        dask.get({"a": (abs, -1), "b": (abs, "a")}, "b")
    assert "compute: 2/2 tasks in " in out.getvalue()


def test_rechunk_progress_and_summary(cli, mode, eager, tmp_path):
    out = tmp_path / "r.zarr"
    result = cli("rechunk", "big.zarr", str(out), "--chunks", "-1,10", "--max-mem", "2MB")
    assert result.status == 0, result.err
    assert result.out == ""
    err = result.err
    assert "RechunkPlan" in err and "Completed" not in err  # no dask progress bar
    nstages = int(re.search(r"(\d+) stage\(s\)", err)[1])
    for stage in range(1, nstages + 1):
        assert re.search(rf"stage {stage}/{nstages} copy: \d+/\d+ tasks in ", err), err
    assert re.search(rf"chunkstore rechunk: rechunked big.zarr -> {re.escape(str(out))} "
                     r"\(chunks \(1000, 10\)\) in \d+\.\d s\n$", err)
    assert ("\r" in err) == (mode == "pty")
    np.testing.assert_array_equal(cs.open_array(str(out), mode="r")[:, :20],
                                  np.arange(10**6).reshape(1000, 1000)[:, :20])


def test_copy_and_verify_progress(cli, mode, eager, tmp_path):
    out = tmp_path / "c.zarr"
    result = cli("copy", "s.zarr", str(out), "--node", "x")
    assert result.status == 0
    assert re.search(r"copy: 1/1 blocks in \d+\.\d s", result.err)
    assert re.search(rf"chunkstore copy: copied s.zarr -> {re.escape(str(out))} "
                     r"\(\(20, 30\) int32\) in \d+\.\d s", result.err)
    np.testing.assert_array_equal(cs.open_array(str(out))[:], DATA)
    result = cli("verify", "big.zarr")
    assert re.search(r"verify: 16/16 keys in ", result.err)
    assert ("\r" in result.err) == (mode == "pty")
