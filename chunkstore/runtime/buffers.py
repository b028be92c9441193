"""Large buffers lent to the tasks of a Dask worker and kept between them.

A rechunk or transpose task decodes into, permutes into and writes from blocks of tens
of MiB. Allocated afresh per task, every page of them is faulted in and zeroed by the
kernel again: on the 4 GiB transpose, zeroing fresh huge pages was 40% of each
worker's CPU (``perf``, ``clear_page_erms``). Blocks borrowed here are reused by the
next task instead.

The pool is the process Runtime's ``current().buffers``. Nothing is kept unless a task
says how much it may keep (:meth:`~BufferPool.retaining`, around the task's work, with the
plan's per-task memory): outside one, :meth:`~BufferPool.borrow` is ``np.empty`` and
:meth:`~BufferPool.give_back` drops the buffer. The pool never holds more than the
budgets of the tasks running, minus what they have borrowed, so a worker's peak is
what its tasks use; a worker that has run no task for :data:`IDLE_SECONDS` frees it all.

A buffer is reused only when nothing else refers to it when it is given back (no view,
memoryview or stored value left): a store that kept a view of a block it was asked
to write would otherwise see it overwritten by the next task.

>>> import numpy as np
>>> pool = BufferPool()
>>> with pool.retaining(2**26):
...     a = pool.borrow((1024, 1024), np.float32)
...     pool.give_back(a); del a
...     b = pool.borrow((1024, 1024), np.float32)   # the same memory, not faulted again
...     pool.give_back(b); del b
>>> pool.pooled_bytes() > 0
True
"""

from __future__ import annotations

import contextlib
import math
import sys
import threading
from collections.abc import Iterator

import numpy as np

MIN_BYTES = 1 << 20  # smaller arrays come from malloc's own pools, without page faults
IDLE_SECONDS = 2.0


class BufferPool:
    """Buffers lent to tasks and kept between them, within the running tasks' budgets
    (see the module docstring). ``idle_seconds``: how long the pool is kept once no task
    runs; ``min_bytes``: smaller arrays are never pooled."""

    def __init__(self, idle_seconds: float = IDLE_SECONDS, min_bytes: int = MIN_BYTES) -> None:
        self.idle_seconds, self.min_bytes = idle_seconds, min_bytes
        self._lock = threading.Lock()
        self._free: list[np.ndarray] = []  # uint8 buffers ready to lend
        self._pooled = 0  # bytes in _free
        self._lent: dict[int, int] = {}  # id of a lent array's base -> its bytes
        self._budgets: list[int] = []  # the budget of each task running
        self._limit = 0
        self._idle_timer: threading.Timer | None = None
        self._task = threading.local()  # .lent: ids this thread's running task borrowed

    def borrow(self, shape: tuple[int, ...], dtype: np.dtype | str) -> np.ndarray:
        """An uninitialised C-contiguous array of ``shape`` and ``dtype``, from the pool
        when it holds a buffer of about that size (give it back with :meth:`give_back`)."""
        dtype = np.dtype(dtype)
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes < self.min_bytes or dtype.hasobject or not self._limit:
            return np.empty(shape, dtype)
        with self._lock:
            raw = self._take(nbytes)
            self._lent[id(raw)] = raw.nbytes
        mine = getattr(self._task, "lent", None)
        if mine is not None:
            mine.add(id(raw))
        return raw[:nbytes].view(dtype).reshape(shape)

    def _take(self, nbytes: int) -> np.ndarray:
        free = self._free
        fits = [i for i, b in enumerate(free) if nbytes <= b.nbytes <= 2 * nbytes]
        if fits:  # (by index: ``list.remove`` would compare arrays element by element)
            raw = free.pop(min(fits, key=lambda i: free[i].nbytes))
            self._pooled -= raw.nbytes
            return raw
        # a miss: make room so that what is pooled, lent and new stays within the budgets
        lent = sum(self._lent.values())
        while free and self._pooled + lent + nbytes > self._limit:
            self._pooled -= free.pop(max(range(len(free)), key=lambda i: free[i].nbytes)).nbytes
        return np.empty(nbytes, np.uint8)

    def give_back(self, array: np.ndarray, reuse: bool = True) -> None:
        """Return an array from :meth:`borrow` (the caller drops its reference after this
        call and uses no view of it any more). Kept for the next borrower when the tasks'
        budgets allow and nothing else refers to it; never with ``reuse=False`` (after an
        error, whose traceback may still hold views of it)."""
        raw = array.base
        if raw is None or id(raw) not in self._lent:
            return  # not lent by the pool (small, or borrowed outside a task)
        # references to ``array``: the caller's, this call's and getrefcount's; to ``raw``:
        # ``array.base``, this local and getrefcount's. More: a view or stored value lives.
        unshared = (reuse and sys.getrefcount(array) <= _ARRAY_REFS
                    and sys.getrefcount(raw) <= 3)
        with self._lock:
            nbytes = self._lent.pop(id(raw), 0)
            if unshared and self._pooled + sum(self._lent.values()) + nbytes <= self._limit:
                self._free.append(raw)
                self._pooled += nbytes

    @contextlib.contextmanager
    def retaining(self, nbytes: int) -> Iterator[None]:
        """Within this block (a task's work) the pool may keep up to ``nbytes`` more for
        the task (its planned peak): buffers given back are kept for the next task."""
        nbytes = max(0, int(nbytes))
        task = self._task
        outer, task.lent = getattr(task, "lent", None), set()
        with self._lock:
            self._budgets.append(nbytes)
            self._limit = sum(self._budgets)
            self._trim()  # what earlier tasks (with other budgets) left beyond the running
            if self._idle_timer is not None:
                self._idle_timer.cancel()
                self._idle_timer = None
        try:
            yield
        finally:
            mine, task.lent = task.lent, outer
            with self._lock:
                for ident in mine:  # borrowed and not given back (the task failed): dropped
                    self._lent.pop(ident, None)
                self._budgets.remove(nbytes)
                if self._budgets:
                    self._limit = sum(self._budgets)
                    self._trim()
                else:  # kept for the next task; freed if none comes soon
                    self._idle_timer = threading.Timer(self.idle_seconds,
                                                       self._release_if_idle)
                    self._idle_timer.daemon = True
                    self._idle_timer.start()

    def _trim(self) -> None:
        free = self._free
        lent = sum(self._lent.values())
        while free and self._pooled + lent > self._limit:
            self._pooled -= free.pop(max(range(len(free)), key=lambda i: free[i].nbytes)).nbytes

    def _release_if_idle(self) -> None:
        with self._lock:
            if not self._budgets:
                self.release()

    def release(self) -> None:
        """Free every pooled buffer and forget what is lent (called with the lock held,
        or when nothing runs: a buffer still lent then was never given back)."""
        self._free.clear()
        self._lent.clear()
        self._pooled = 0
        self._limit = 0
        timer, self._idle_timer = self._idle_timer, None
        if timer is not None:
            timer.cancel()

    def pooled_bytes(self) -> int:
        """Bytes the pool holds, ready to lend."""
        return self._pooled

    def lent_bytes(self) -> int:
        """Bytes lent and not given back."""
        return sum(self._lent.values())

    def running_tasks(self) -> int:
        """How many tasks are inside :meth:`retaining`."""
        return len(self._budgets)


def _array_refs() -> int:
    """What ``sys.getrefcount`` says of an array inside ``give_back`` when only its
    caller holds it (measured, not assumed: it differs between Python versions)."""
    seen = []

    def probe(array: np.ndarray) -> None:
        seen.append(sys.getrefcount(array))

    a = np.empty(1)
    probe(a)
    return seen[0]


_ARRAY_REFS = _array_refs()
