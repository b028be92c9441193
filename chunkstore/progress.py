"""Progress reporting: one callback protocol, one terminal renderer, and adapters from
Dask's local and distributed schedulers at the edge.

Work reports progress by calling a :class:`ProgressCallback` ``(done, total, nbytes)``.
A :class:`ProgressReporter` hands out one callback per labelled step ("write",
"stage 1/2 copy", ...). :class:`TerminalProgress` is the reporter of the command line:
a ``\\r``-updated bar when its stream is a terminal, occasional plain lines otherwise,
and a summary line at the end. :class:`TaskProgress` turns Dask task completions into
step progress; :func:`local_dask_progress` feeds it from Dask's local schedulers (and
``chunkstore.cli.cluster.distributed_progress`` from a ``distributed`` cluster), so local
and distributed runs look the same.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TextIO

#: seconds between redraws of a progress line on a terminal
MIN_INTERVAL = 0.1
#: seconds between plain progress lines when the stream is not a terminal
PLAIN_INTERVAL = 10.0


class ProgressCallback(Protocol):
    """Called as work advances: ``callback(done, total, nbytes_done)``."""

    def __call__(self, done: int, total: int, nbytes: int = 0) -> None: ...


class ProgressReporter(Protocol):
    """Hands out the callback of each step of a job, labelled for the user."""

    def step(self, label: str, unit: str = "chunks") -> ProgressCallback:
        """The callback of a new step called ``label``, counting ``unit``."""
        ...


def _hms(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _rate(done: int, nbytes: int, elapsed: float, unit: str) -> str:
    elapsed = max(elapsed, 1e-3)
    value, unit = (nbytes / elapsed / 1e6, "MB") if nbytes else (done / elapsed, unit)
    return f"{value:.0f} {unit}/s" if value >= 100 else f"{value:.1f} {unit}/s"


class StepBar:
    """The progress of one step of a :class:`TerminalProgress` (a ProgressCallback)."""

    def __init__(self, owner: TerminalProgress, label: str, unit: str) -> None:
        self.owner, self.label, self.unit = owner, label, unit
        self.start = self._last = time.perf_counter()
        self._finished = False

    def __call__(self, done: int, total: int, nbytes: int = 0) -> None:
        if self._finished:
            return
        owner, now = self.owner, time.perf_counter()
        elapsed = now - self.start
        rate = _rate(done, nbytes, elapsed, self.unit)
        if done >= total:
            self._finished = True
            owner.write_final(f"{self.label}: {done}/{total} {self.unit} in {elapsed:.1f} s "
                              f"({rate})")
            return
        if now - self._last < (owner.min_interval if owner.interactive else owner.plain_interval):
            return
        self._last = now
        frac = done / total if total else 0.0
        eta = elapsed * (1 - frac) / frac if frac > 0 else 0.0
        filled = int(owner.width * frac)
        bar = f"[{'#' * filled}{'.' * (owner.width - filled)}] " if owner.interactive else ""
        owner.write_update(f"{self.label}: {bar}{frac:4.0%} {done}/{total} {self.unit} {rate} "
                           f"ETA {_hms(eta)}")


class TerminalProgress:
    """The command line's reporter: one line per step on ``stream`` (stderr).

    On a terminal the line is redrawn in place (``\\r``) at most every ``min_interval``
    seconds (default :data:`MIN_INTERVAL`); otherwise a plain line is printed at most every
    ``plain_interval`` seconds (default :data:`PLAIN_INTERVAL`).
    Every step ends with a line giving its count, time and rate, and :meth:`summary`
    prints the last line of the job.

    >>> import io
    >>> out = io.StringIO()
    >>> progress = TerminalProgress("copy", stream=out, interactive=False)
    >>> bar = progress.step("write", "blocks")
    >>> bar(1, 2); bar(2, 2)
    >>> out.getvalue().startswith("write: 2/2 blocks in ")
    True
    """

    def __init__(self, command: str, stream: TextIO | None = None, interactive: bool | None = None,
                 min_interval: float | None = None, plain_interval: float | None = None,
                 width: int = 24) -> None:
        self.command = command
        self.stream = stream if stream is not None else sys.stderr
        if interactive is None:
            isatty = getattr(self.stream, "isatty", None)
            interactive = bool(isatty and isatty())
        self.interactive = interactive
        self.min_interval = MIN_INTERVAL if min_interval is None else min_interval
        self.plain_interval = PLAIN_INTERVAL if plain_interval is None else plain_interval
        self.width = width
        self.start = time.perf_counter()
        self._open_line = 0  # length of a line drawn with \r and not yet ended
        self._lock = threading.Lock()

    def step(self, label: str, unit: str = "chunks") -> StepBar:
        """The callback of a new step called ``label`` counting ``unit``."""
        return StepBar(self, label, unit)

    def write_update(self, line: str) -> None:
        """Show an intermediate progress line (redrawn in place on a terminal)."""
        with self._lock:
            if self.interactive:
                pad = " " * max(0, self._open_line - len(line))
                self.stream.write(f"\r{line}{pad}")
                self._open_line = len(line)
            else:
                self.stream.write(line + "\n")
            self.stream.flush()

    def write_final(self, line: str) -> None:
        """Print a line that stays (replacing a line drawn in place)."""
        with self._lock:
            if self._open_line:
                pad = " " * max(0, self._open_line - len(line))
                self.stream.write(f"\r{line}{pad}\n")
            else:
                self.stream.write(line + "\n")
            self._open_line = 0
            self.stream.flush()

    def summary(self, outcome: str) -> None:
        """The job's last line: ``chunkstore <command>: <outcome> in <time>``."""
        self.write_final(f"chunkstore {self.command}: {outcome} in "
                         f"{time.perf_counter() - self.start:.1f} s")


class TaskProgress:
    """Dask tasks grouped into labelled steps: ``classify(key)`` names the step of a task
    (None: not counted). When no task of a graph has a step, all its tasks count under
    ``fallback``. Steps run one after the other, in the order they were first seen: each
    gets its callback from ``reporter`` (counting tasks) when the one before it ends."""

    def __init__(self, reporter: ProgressReporter,
                 classify: Callable[[Hashable], str | None] = lambda key: None,
                 fallback: str = "compute") -> None:
        self.reporter, self.classify, self.fallback = reporter, classify, fallback
        self._step_of: dict[Hashable, str] = {}
        self._totals: dict[str, int] = {}  # in the order the steps were first seen
        self._done: dict[str, int] = {}
        self._callbacks: dict[str, ProgressCallback] = {}
        self._lock = threading.Lock()

    def _start_next(self) -> None:
        """Start the first step not started yet, unless a started one is still running."""
        if any(self._done[label] < self._totals[label] for label in self._callbacks):
            return
        for label in self._totals:
            if label not in self._callbacks:
                self._callbacks[label] = self.reporter.step(label, "tasks")
                return

    def add(self, keys: Iterable[Hashable]) -> None:
        """Tasks about to run."""
        keys = [k for k in keys if k not in self._step_of]
        labelled = [(k, self.classify(k)) for k in keys]
        if not any(label for _, label in labelled):
            labelled = [(k, self.fallback) for k in keys]
        with self._lock:
            for key, label in labelled:
                if label is not None:
                    self._step_of[key] = label
                    self._totals[label] = self._totals.get(label, 0) + 1
                    self._done.setdefault(label, 0)
            self._start_next()

    def finished(self, key: Hashable) -> None:
        """A task finished."""
        with self._lock:
            label = self._step_of.pop(key, None)
            if label is None:
                return
            self._done[label] += 1
            if label not in self._callbacks:  # ran before the steps seen first: start it
                self._callbacks[label] = self.reporter.step(label, "tasks")
            callback, done, total = self._callbacks[label], self._done[label], self._totals[label]
        callback(done, total)
        if done >= total:
            with self._lock:
                self._start_next()


@contextmanager
def local_dask_progress(tasks: TaskProgress) -> Iterator[None]:
    """Feed ``tasks`` from every computation of Dask's local schedulers in the block."""
    from dask.callbacks import Callback

    def start_state(dsk: Any, state: dict[str, Any]) -> None:
        tasks.add([*state["ready"], *state["waiting"]])

    def posttask(key: Hashable, result: Any, dsk: Any, state: Any, worker_id: Any) -> None:
        tasks.finished(key)

    with Callback(start_state=start_state, posttask=posttask):
        yield
