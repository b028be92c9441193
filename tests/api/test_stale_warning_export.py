"""``StaleConsolidatedMetadataWarning`` is importable from ``chunkstore.errors`` and from
``chunkstore`` (as the errors are), and is the very class chunkstore warns with; its old
homes in ``hierarchy`` still name the same class."""

from __future__ import annotations

import os
import warnings

import chunkstore as cs
from chunkstore import errors
from chunkstore.errors import StaleConsolidatedMetadataWarning


def test_one_class_everywhere():
    from chunkstore.nodes import consolidated, enclosing
    assert cs.StaleConsolidatedMetadataWarning is StaleConsolidatedMetadataWarning
    assert errors.StaleConsolidatedMetadataWarning is StaleConsolidatedMetadataWarning
    assert consolidated.StaleConsolidatedMetadataWarning is StaleConsolidatedMetadataWarning
    assert enclosing.StaleConsolidatedMetadataWarning is StaleConsolidatedMetadataWarning
    assert issubclass(StaleConsolidatedMetadataWarning, UserWarning)
    assert "StaleConsolidatedMetadataWarning" in cs.__all__


def test_it_is_the_class_warned_with(tmp_path, monkeypatch):
    from chunkstore.nodes import enclosing
    root = str(tmp_path / "g.zarr")
    g = cs.open_group(root, mode="w")
    g.create_array("arr", shape=(4,), dtype="i4")
    cs.consolidate_metadata(root)
    # the enclosing group's copy cannot be written (e.g. no permission there)
    monkeypatch.setattr(enclosing, "group_store", lambda d: cs.LocalStore(d, read_only=True))
    m = cs.open_array(os.path.join(root, "arr"), mode="r+")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m.resize(8)
    stale = [w for w in caught if "consolidate_metadata" in str(w.message)]
    assert stale, [str(w.message) for w in caught]
    assert all(type(w.message) is StaleConsolidatedMetadataWarning for w in stale)
    assert all(w.category is errors.StaleConsolidatedMetadataWarning for w in stale)
