"""Fixtures of the Dask layer's tests."""

from __future__ import annotations

import dask
import pytest


@pytest.fixture(scope="module")
def client():
    """A ``distributed`` client of a LocalCluster of 2 worker processes x 1 thread, one per
    test module (a module may define its own ``client`` of another shape)."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        with distributed.Client(cluster) as c:
            yield c


@pytest.fixture
def scratch(tmp_path):
    """Dask's ``temporary-directory`` set to a fresh directory, where each rechunk plan
    into an object store makes its own directory for its intermediate."""
    base = tmp_path / "dask-tmp"
    with dask.config.set({"temporary-directory": str(base)}):
        yield base
