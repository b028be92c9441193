"""Large buffers lent to the tasks of a Dask worker and kept between them.

A rechunk or transpose task decodes into, permutes into and writes from blocks of tens
of MiB. Allocated afresh per task, every page of them is faulted in and zeroed by the
kernel again: on the 4 GiB transpose, zeroing fresh huge pages was 40% of each
worker's CPU (``perf``, ``clear_page_erms``). Blocks borrowed here are reused by the
next task instead.

Nothing is kept unless a task says how much it may keep (:func:`retaining`, around the
task's work, with the plan's per-task memory): outside one, :func:`borrow` is
``np.empty`` and :func:`give_back` drops the buffer. The pool never holds more than the
budgets of the tasks running, minus what they have borrowed, so a worker's peak is
what its tasks use; a worker that has run no task for :data:`IDLE_SECONDS` frees it all.

A buffer is reused only when nothing else refers to it when it is given back (no view,
memoryview or stored value left): a store that kept a view of a block it was asked
to write would otherwise see it overwritten by the next task.

>>> import numpy as np
>>> with retaining(2**26):
...     a = borrow((1024, 1024), np.float32)
...     give_back(a); del a
...     b = borrow((1024, 1024), np.float32)   # the same memory, not faulted again
...     give_back(b); del b
>>> pooled_bytes() > 0
True
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
from collections.abc import Iterator

import numpy as np

MIN_BYTES = 1 << 20  # smaller arrays come from malloc's own pools, without page faults
IDLE_SECONDS = 2.0

_lock = threading.Lock()
_free: list[np.ndarray] = []  # uint8 buffers ready to lend
_pooled = 0  # bytes in _free
_lent: dict[int, int] = {}  # id of a lent array's base -> its bytes
_budgets: list[int] = []  # the budget of each task running
_limit = 0
_idle_timer: threading.Timer | None = None
_task = threading.local()  # .lent: ids this thread's running task borrowed


def borrow(shape: tuple[int, ...], dtype: np.dtype | str) -> np.ndarray:
    """An uninitialised C-contiguous array of ``shape`` and ``dtype``, from the pool
    when it holds a buffer of about that size (give it back with :func:`give_back`)."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < MIN_BYTES or dtype.hasobject or not _limit:
        return np.empty(shape, dtype)
    with _lock:
        raw = _take(nbytes)
        _lent[id(raw)] = raw.nbytes
    mine = getattr(_task, "lent", None)
    if mine is not None:
        mine.add(id(raw))
    return raw[:nbytes].view(dtype).reshape(shape)


def _take(nbytes: int) -> np.ndarray:
    global _pooled
    fits = [i for i, b in enumerate(_free) if nbytes <= b.nbytes <= 2 * nbytes]
    if fits:  # (by index: ``list.remove`` would compare arrays element by element)
        raw = _free.pop(min(fits, key=lambda i: _free[i].nbytes))
        _pooled -= raw.nbytes
        return raw
    # a miss: make room so that what is pooled, lent and new stays within the budgets
    lent = sum(_lent.values())
    while _free and _pooled + lent + nbytes > _limit:
        _pooled -= _free.pop(max(range(len(_free)), key=lambda i: _free[i].nbytes)).nbytes
    return np.empty(nbytes, np.uint8)


def give_back(array: np.ndarray, reuse: bool = True) -> None:
    """Return an array from :func:`borrow` (the caller drops its reference after this
    call and uses no view of it any more). Kept for the next borrower when the tasks'
    budgets allow and nothing else refers to it; never with ``reuse=False`` (after an
    error, whose traceback may still hold views of it)."""
    global _pooled
    raw = array.base
    if raw is None or id(raw) not in _lent:
        return  # not lent by the pool (small, or borrowed outside a task)
    # references to ``array``: the caller's, this call's and getrefcount's; to ``raw``:
    # ``array.base``, this local and getrefcount's. More: a view or stored value is alive.
    unshared = (reuse and sys.getrefcount(array) <= _ARRAY_REFS
                and sys.getrefcount(raw) <= 3)
    with _lock:
        nbytes = _lent.pop(id(raw), 0)
        if unshared and _pooled + sum(_lent.values()) + nbytes <= _limit:
            _free.append(raw)
            _pooled += nbytes


@contextlib.contextmanager
def retaining(nbytes: int) -> Iterator[None]:
    """Within this block (a task's work) the pool may keep up to ``nbytes`` more for
    the task (its planned peak): buffers given back are kept for the next task."""
    global _limit, _idle_timer
    nbytes = max(0, int(nbytes))
    outer, _task.lent = getattr(_task, "lent", None), set()
    with _lock:
        _budgets.append(nbytes)
        _limit = sum(_budgets)
        _trim()  # what earlier tasks (with other budgets) left beyond the running ones'
        if _idle_timer is not None:
            _idle_timer.cancel()
            _idle_timer = None
    try:
        yield
    finally:
        mine, _task.lent = _task.lent, outer
        with _lock:
            for ident in mine:  # borrowed and not given back (the task failed): dropped
                _lent.pop(ident, None)
            _budgets.remove(nbytes)
            if _budgets:
                _limit = sum(_budgets)
                _trim()
            else:  # kept for the next task; freed if none comes soon
                _idle_timer = threading.Timer(IDLE_SECONDS, _release_if_idle)
                _idle_timer.daemon = True
                _idle_timer.start()


def _trim() -> None:
    global _pooled
    lent = sum(_lent.values())
    while _free and _pooled + lent > _limit:
        _pooled -= _free.pop(max(range(len(_free)), key=lambda i: _free[i].nbytes)).nbytes


def _release_if_idle() -> None:
    global _limit, _idle_timer
    with _lock:
        if not _budgets:
            release()


def release() -> None:
    """Free every pooled buffer and forget what is lent (called with the lock held, or
    when nothing runs: a buffer still lent then was never given back)."""
    global _limit, _pooled, _idle_timer
    _free.clear()
    _lent.clear()
    _pooled = 0
    _limit = 0
    _idle_timer = None


def pooled_bytes() -> int:
    """Bytes the pool holds, ready to lend."""
    return _pooled


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


def _after_fork() -> None:
    global _lock
    _lock = threading.Lock()
    _budgets.clear()
    release()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
