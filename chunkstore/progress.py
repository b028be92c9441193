"""Progress reporting: a callback protocol, and a text bar with rate and ETA at the edge."""

from __future__ import annotations

import sys
import time
from typing import Protocol, TextIO


class ProgressCallback(Protocol):
    """Called as work advances: ``callback(done, total, nbytes_done)``."""

    def __call__(self, done: int, total: int, nbytes: int) -> None: ...


class ProgressBar:
    """``[#######.......]  45%  120/270 chunks  85.3 MB/s  ETA 0:00:12`` on stderr.

    >>> bar = ProgressBar("copy", stream=sys.stdout, min_interval=0)
    >>> bar(1, 2, 10)  # doctest: +ELLIPSIS
    copy [...]  50% 1/2 ...
    """

    def __init__(self, label: str, unit: str = "chunks", stream: TextIO | None = None,
                 width: int = 24, min_interval: float = 0.1) -> None:
        self.label, self.unit, self.width = label, unit, width
        self.stream = stream or sys.stderr
        self.start = time.perf_counter()
        self.min_interval, self._last = min_interval, 0.0

    def __call__(self, done: int, total: int, nbytes: int = 0) -> None:
        now = time.perf_counter()
        if done < total and now - self._last < self.min_interval:
            return
        self._last = now
        elapsed = max(now - self.start, 1e-9)
        frac = done / total if total else 1.0
        filled = int(self.width * frac)
        rate = f"{nbytes / elapsed / 1e6:.1f} MB/s" if nbytes else f"{done / elapsed:.1f} {self.unit}/s"
        eta = elapsed * (1 - frac) / frac if frac > 0 else 0.0
        line = (f"{self.label} [{'#' * filled}{'.' * (self.width - filled)}] {frac:4.0%} "
                f"{done}/{total} {self.unit} {rate} ETA {_hms(eta)}")
        end = "\n" if done >= total else "\r"
        print(line, end=end, file=self.stream, flush=True)


def _hms(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
