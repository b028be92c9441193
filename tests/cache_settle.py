"""Wait until a LocalStore's files may be kept by the decoded-chunk cache: the cache
keeps a chunk only once its file changed longer ago than its file system's timestamp
window (``chunkstore.io.cache.stamps``: a few ms on a local disk). Tests that assert hits
right after writing call :func:`settle` first. This waits on the file system's clock
(one short sleep until a known time), not for another thread."""

from __future__ import annotations

import os
import time
from typing import Any


def settle(store: Any, *caches: Any) -> None:
    """Return once every file below ``store``'s root (a LocalStore; anything else:
    at once) is older than the window each of ``caches`` (default: the process-wide
    cache) measured for ``store``."""
    root = getattr(store, "root", None)
    if root is None or not os.path.isdir(root):
        return
    from chunkstore.io.cache import chunk_cache
    caches = caches or (chunk_cache.shared(),)
    device = os.stat(root).st_dev
    window = max(c.stamps.window(store, device) for c in caches)
    newest = 0
    for where, _, names in os.walk(root):
        for name in names:
            st = os.stat(os.path.join(where, name))
            newest = max(newest, st.st_mtime_ns, st.st_ctime_ns)
    wait = newest + window - time.time_ns()
    if wait >= 0:
        time.sleep(wait / 1e9 + 0.001)
