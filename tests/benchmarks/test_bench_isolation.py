"""bench_rechunk runs each method in a child process that is killed, with everything it
started, when it hangs (``rechunk_measure.in_child``)."""

from __future__ import annotations

import functools
import subprocess
import time

import psutil

from benchmarks.rechunk_measure import in_child


def _sleepers(tag: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if proc.info["cmdline"] == ["sleep", tag]:
            found.append(proc)
    return found


def test_a_hung_run_and_the_processes_it_started_are_killed():
    tag = "61.2345"
    start = time.monotonic()
    row = in_child(functools.partial(subprocess.run, ["sleep", tag]), timeout=3)
    assert "TimeoutError" in row["error"]
    assert time.monotonic() - start < 40
    assert not [p for p in _sleepers(tag) if p.status() != psutil.STATUS_ZOMBIE]


def test_an_answer_and_an_error_come_back():
    assert in_child(functools.partial(dict, wall_s=1.5), timeout=60) == {"wall_s": 1.5}
    row = in_child(functools.partial(int, "not a number"), timeout=60)
    assert row["error"].startswith("ValueError")
