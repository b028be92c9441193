"""The suite's own scheduling: tests marked ``starts_first`` come first in the collection
(tests/conftest.py), which pytest-xdist hands out from its front."""

from __future__ import annotations

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


def test_the_marked_cluster_tests_are_collected_first(request) -> None:
    """The real-cluster tests carry the mark (the hook has something to move)."""
    marked = [item.nodeid for item in request.session.items
              if item.get_closest_marker("starts_first")]
    if len(request.session.items) > len(marked) + 100:  # the whole suite was collected
        assert any("test_cluster_notebook" in nodeid for nodeid in marked), marked
        assert [item.nodeid for item in request.session.items[:len(marked)]] == marked
