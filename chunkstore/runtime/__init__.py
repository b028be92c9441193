"""The process state chunkstore keeps: the thread pool chunk IO runs on, buffers lent to
tasks, caches and budgets."""
