"""Fixtures of the ported zarr-python behaviour tests: every store kind chunkstore has
locally (memory, a directory, a zip file) and both formats."""

from __future__ import annotations

import pytest

import chunkstore as cs


@pytest.fixture(params=["memory", "local"])
def store(request, tmp_path):
    if request.param == "memory":
        return cs.MemoryStore()
    return cs.LocalStore(str(tmp_path / "store.zarr"))


@pytest.fixture(params=[2, 3])
def zarr_format(request):
    return request.param


@pytest.fixture(params=[True, False])
def overwrite(request):
    return request.param
