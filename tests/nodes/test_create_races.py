"""Creating a node without ``overwrite`` where another writer creates one at the same
moment (between the existence check and the write): the metadata document is committed
only if still absent, so the later creator raises instead of replacing the other's node;
a group above it that the other writer made meanwhile is kept as made."""

from __future__ import annotations

import numpy as np
import pytest

import chunkstore as cs
from chunkstore.errors import ContainsArrayError, ContainsGroupError
from chunkstore.nodes import placement


def _race(monkeypatch, other):
    """Run ``other()`` once, right after the next creation has looked and before it
    writes."""
    real = placement.write_nodes
    done = []

    def write_nodes(store, nodes, **kw):
        if not done:
            done.append(1)
            other()
        return real(store, nodes, **kw)

    monkeypatch.setattr(placement, "write_nodes", write_nodes)


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("store_kind", ["local", "memory"])
@pytest.mark.parametrize("mine,theirs", [("array", "array"), ("group", "array"),
                                         ("array", "group"), ("group", "group")])
def test_the_later_creator_raises_and_the_first_node_stays(tmp_path, monkeypatch, fmt,
                                                           store_kind, mine, theirs):
    where = str(tmp_path / "g.zarr") if store_kind == "local" else cs.MemoryStore()
    cs.open_group(where, mode="w", zarr_format=fmt)

    def other():
        g = cs.open_group(where, mode="r+")
        if theirs == "array":
            b = g.create_array("x", shape=(4,), chunks=(4,), dtype="i4",
                               attributes={"owner": "B"})
            b[:] = [7, 7, 7, 7]
        else:
            g.create_group("x", attributes={"owner": "B"})

    _race(monkeypatch, other)
    g = cs.open_group(where, mode="r+")
    expected = ContainsArrayError if theirs == "array" else ContainsGroupError
    with pytest.raises(expected, match="'x'.*another writer"):
        if mine == "array":
            g.create_array("x", shape=(2,), dtype="f8", attributes={"owner": "A"})
        else:
            g.create_group("x", attributes={"owner": "A"})
    monkeypatch.undo()
    node = cs.open(where, path="x", mode="r")
    assert dict(node.attrs) == {"owner": "B"}
    if theirs == "array":
        assert node[:].tolist() == [7, 7, 7, 7]
    assert sorted(cs.open_group(where, mode="r").keys()) == ["x"]


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_parent_group_made_meanwhile_keeps_its_attributes(tmp_path, monkeypatch, fmt):
    where = str(tmp_path / "g.zarr")
    cs.open_group(where, mode="w", zarr_format=fmt)

    def other():
        cs.open_group(where, mode="r+").create_group("p", attributes={"made_by": "B"})

    _race(monkeypatch, other)
    a = cs.open_group(where, mode="r+").create_array("p/q", shape=(3,), dtype="i2")
    a[:] = [1, 2, 3]
    monkeypatch.undo()
    assert dict(cs.open_group(where, path="p", mode="r").attrs) == {"made_by": "B"}
    np.testing.assert_array_equal(cs.open_array(where, path="p/q", mode="r")[:], [1, 2, 3])


def test_overwrite_still_replaces(tmp_path):
    where = str(tmp_path / "g.zarr")
    g = cs.open_group(where, mode="w")
    g.create_array("x", data=np.arange(3))
    g.create_group("x", overwrite=True, attributes={"v": 2})
    assert dict(cs.open_group(where, path="x", mode="r").attrs) == {"v": 2}
