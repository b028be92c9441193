"""Pure planning of rechunk and transpose: stages, tasks, bytes, memory per task and per
worker; ``describe()`` and ``simulate()``. No Dask import."""
