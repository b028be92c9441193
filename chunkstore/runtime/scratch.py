"""Per-thread scratch buffers: one reusable array per thread and purpose, so that a
chunk decoded or staged for compression does not page-fault a fresh buffer each time.

The buffers are a part of the process's Runtime (``current().part(Scratch)``). A buffer
larger than :data:`KEEP_MAX_BYTES` is not kept (it is as cheap to fault as it is costly
to hold); :func:`release` drops the calling thread's buffers and
:func:`release_all` every thread's (a Dask task calls it when it ends, so that the
codec threads of an idle worker hold nothing; a thread still using a buffer keeps it
until it is done).
"""

from __future__ import annotations

import threading

import numpy as np

from chunkstore.runtime.part import Part
from chunkstore.runtime.runtime import current

KEEP_MAX_BYTES = 64 * 2**20
SMALL_BYTES = 64 * 1024  # freshly allocated below this: from malloc's pools, no faults


class Scratch(Part):
    """The scratch buffers of every thread (a part of the Runtime)."""

    def __init__(self) -> None:
        self.local = threading.local()
        self.every: dict[int, dict] = {}  # thread id -> its held buffers (release_all)
        self.lock = threading.Lock()

    def held(self) -> dict[str, tuple[tuple, np.ndarray]]:
        """The calling thread's buffers by purpose."""
        held = getattr(self.local, "held", None)
        if held is None or self.every.get(threading.get_ident()) is not held:
            held = self.local.held = {}
            with self.lock:
                self.every[threading.get_ident()] = held
        return held

    def release_all(self) -> None:
        """Drop the buffers of every thread."""
        with self.lock:
            helds = list(self.every.values())
            self.every.clear()
        for held in helds:
            held.clear()


def scratch_buffer(shape: tuple[int, ...], dtype: np.dtype, purpose: str = "decode"
                   ) -> np.ndarray:
    """An uninitialised array of ``shape`` and ``dtype``, reused by this thread for
    ``purpose`` until it asks for another shape or dtype. The caller must be done with
    it before asking again for the same purpose."""
    dtype = np.dtype(dtype)
    key = (tuple(shape), dtype)  # not dtype.str: every 8-byte record dtype is '|V8'
    held = _held()
    entry = held.get(purpose)
    if entry is not None and entry[0] == key:
        return entry[1]
    buf = np.empty(shape, dtype=dtype)
    if buf.nbytes <= KEEP_MAX_BYTES:
        held[purpose] = (key, buf)
    else:
        held.pop(purpose, None)
    return buf


def contiguous(array: np.ndarray, dtype: np.dtype, purpose: str = "encode") -> np.ndarray:
    """``array`` as a C-contiguous array of ``dtype`` that is read once and not kept
    (e.g. a compressor's input): ``array`` itself when it already is one, a new small
    array (cheaper than the scratch lookup below ``SMALL_BYTES``), else this thread's
    scratch buffer for ``purpose``. The conversion is a byte-order change at most."""
    if array.flags.c_contiguous and array.dtype == dtype:
        return array
    if array.nbytes <= SMALL_BYTES:
        return np.ascontiguousarray(array, dtype=dtype)
    staged = scratch_buffer(array.shape, dtype, purpose)
    np.copyto(staged, array)
    return staged


def held_bytes() -> int:
    """Bytes of scratch the calling thread holds."""
    return sum(buf.nbytes for _, buf in _held().values())


def release() -> None:
    """Drop the calling thread's scratch buffers."""
    _held().clear()


def release_all() -> None:
    """Drop the scratch buffers of every thread."""
    current().part(Scratch).release_all()


def _held() -> dict[str, tuple[tuple, np.ndarray]]:
    return current().part(Scratch).held()
