"""The suite's own scheduling: tests marked ``starts_first`` come first in the collection
(tests/conftest.py), which pytest-xdist hands out from its front."""

from __future__ import annotations

import importlib

import pytest

from tests.conftest import pytest_collection_modifyitems


class Item:
    def __init__(self, name: str, first: bool) -> None:
        self.name, self.first = name, first

    def get_closest_marker(self, name: str):
        return pytest.mark.starts_first.mark if self.first and name == "starts_first" else None


def test_marked_tests_move_to_the_front_in_their_order() -> None:
    items = [Item("a", False), Item("b", True), Item("c", False), Item("d", True)]
    pytest_collection_modifyitems(items)
    assert [item.name for item in items] == ["b", "d", "a", "c"]


def test_marked_tests_run_first_in_this_session(request) -> None:
    items = request.session.items
    marked = [item for item in items if item.get_closest_marker("starts_first")]
    assert items[:len(marked)] == marked


@pytest.mark.parametrize("module", [
    "tests.notebooks.test_cluster_notebook", "tests.notebooks.test_notebooks",
    "tests.deployment.test_docker_compose", "tests.benchmarks.test_bench_rechunk_cli_smoke",
    "tests.benchmarks.test_bench_rechunk_modes"])
def test_the_real_cluster_tests_carry_the_mark(module: str) -> None:
    assert importlib.import_module(module).pytestmark.name == "starts_first"
