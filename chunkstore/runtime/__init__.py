"""The process state chunkstore keeps: one :class:`Runtime` (``current()``) owning the
thread pool chunk IO runs on, buffers lent to tasks, caches and budgets."""

from chunkstore.runtime.runtime import Budgets, Runtime, current, reset

__all__ = ["Budgets", "Runtime", "current", "reset"]
