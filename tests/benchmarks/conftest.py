"""The benchmarks run in the test process at tiny sizes: their full garbage collections
(``benchmarks.measure.release_memory``, before every timed phase) would each walk the
whole heap of a long test session (42 ms each in a fresh process, far more after
thousands of tests). Objects that exist before a benchmark test starts are frozen for
its duration, so those collections walk only what the benchmark made."""

import gc

import pytest


@pytest.fixture(autouse=True)
def _heap_before_the_benchmark_frozen():
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()
