"""The process state chunkstore keeps: one :class:`Runtime` (``current()``) owning the
thread pool chunk IO runs on, buffers lent to tasks, caches and budgets; and the
synchronizers (``sync``) that writers of one process or of many share."""

from chunkstore.runtime.part import Part
from chunkstore.runtime.runtime import Budgets, Runtime, current, reset, set_map_bytes

__all__ = ["Budgets", "Part", "Runtime", "current", "reset", "set_map_bytes"]
