"""The operation a hostile-file test runs in a process of its own
(tests/storage/local/test_hostile_file_attacks.py), started from the suite's fork server
(chunkstore already imported): a CPU-time limit and, where memory is the point, an
address-space cap on top of what the process holds once the array is open."""

from __future__ import annotations

import resource
from typing import Any

from tests.multiproc import limit_cpu


def run(root: str, op: str, cap: int, cpu: int, conn: Any) -> None:
    """Evaluate ``op`` (with ``a`` the array at ``root``, ``cs``, ``np`` and ``verify``)
    and send ``{"ok" | "error" | "raw": text}`` through ``conn``."""
    import numpy as np

    import chunkstore as cs
    import chunkstore.dask  # noqa: F401  (``cs.dask`` in an operation)
    from chunkstore.api.verify import verify
    from chunkstore.errors import ChunkstoreError

    a = cs.open_array(root, mode="r+")
    if cap:
        with open("/proc/self/status") as f:
            vm = [int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize")][0]
        resource.setrlimit(resource.RLIMIT_AS, (vm + cap, vm + cap))
    limit_cpu(cpu)
    try:
        result = eval(op, {"a": a, "cs": cs, "np": np, "verify": verify})
        out = {"ok": repr(result)[:300]}
    except ChunkstoreError as e:
        out = {"error": f"{type(e).__name__}: {e}"}
    except BaseException as e:
        out = {"raw": f"{type(e).__name__}: {e}"[:300]}
    conn.send(out)
    conn.close()
