"""What the child process of a tests/codecs/test_hostile_payloads.py case runs, started
from the suite's fork server (chunkstore already imported: a fresh interpreter spent ~1 s
importing it per case): open the array and warm it up, tell the parent, wait for it to
place the hostile chunk, cap the address space, run the operations and report, for each,
its error and the growth of the peak RSS."""

from __future__ import annotations

import ctypes
import resource
from typing import Any

import chunkstore as cs
from chunkstore.api.verify import verify
from chunkstore.errors import ChunkstoreError

_M_ARENA_MAX = -8  # mallopt: at most this many malloc arenas (as MALLOC_ARENA_MAX)


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise LookupError(field)


def _reset_peak() -> tuple[int, Any]:
    """The current RSS, with the peak RSS (VmHWM) reset to it, and how to read the peak."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return _status("VmRSS"), lambda: _status("VmHWM")
    except OSError:  # no clear_refs: the peak so far (may understate the growth)
        def peak() -> int:
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return peak(), peak


def run(path: str, key: str, index: int, value: Any, chunk_nbytes: int, headroom: int,
        ops: str, conn: Any) -> None:
    """Send ``"ready"`` through ``conn`` once the array at ``path`` is open and warm, wait
    for the parent's go, then send ``{op: {"error": text | None, "growth": bytes}}``."""
    # two malloc arenas, as the fresh interpreter had (MALLOC_ARENA_MAX=2): a new thread's
    # arena reserves 64 MiB of address space, which the cap counts
    ctypes.CDLL(None).mallopt(_M_ARENA_MAX, 2)
    a = cs.open_array(path, mode="r+")
    last = a.shape[0] - 1
    a[last] = a[last]  # warm up: a read-modify-write of the valid last chunk
    a[:]
    conn.send("ready")
    conn.recv()  # the parent has placed the hostile chunk
    if headroom:
        cap = _status("VmSize") + 2 * chunk_nbytes + headroom
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    report = {}
    for op in ops.split(","):
        base, peak = _reset_peak()
        error = None
        try:
            if op == "read":
                a[:]
            elif op == "write":
                a[index] = value
            elif op == "verify":
                bad = verify(a.store).bad
                error = "verify: " + bad[key] if key in bad else None
        except ChunkstoreError as e:
            error = f"{type(e).__name__}: {e}"
        except MemoryError as e:
            error = f"MemoryError: {e}"
        report[op] = {"error": error, "growth": peak() - base}
    conn.send(report)
