"""Walk a hierarchy from its metadata documents, and verify that every chunk decodes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from .array import Array
from .errors import ChunkstoreError
from .hierarchy.reading import try_read_node
from .metadata import is_array
from .storage.base import Store


def walk_nodes(store: Store, path: str = "") -> Iterator[tuple[str, object]]:
    """``(path, metadata)`` of the node at ``path`` and every node below it, sorted by
    path (one listing and one batched read per level, or the consolidated metadata)."""
    node = try_read_node(store, path)
    if node is None:
        return
    yield path, node
    if is_array(node):
        return
    from .api import open_group
    below = open_group(store, mode="r", path=path)._descendants(None)
    for rel in sorted(below):
        yield (f"{path}/{rel}" if path else rel), below[rel]


@dataclass
class VerifyReport:
    """What ``verify`` found: arrays and chunks checked, and the bad keys with reasons."""

    arrays: int = 0
    chunks: int = 0
    bad: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.bad


def verify(store: Store, path: str = "",
           progress: Callable[[int, int, int], None] | None = None) -> VerifyReport:
    """Decode every stored chunk of every array at or below ``path``."""
    report = VerifyReport()
    arrays = []
    for node_path, node in walk_nodes(store, path):
        if is_array(node):
            try:
                arrays.append(Array(store, node_path, node, read_only=True))
            except ChunkstoreError as e:
                report.bad[node_path or "/"] = str(e)
    work = [(a, key) for a in arrays for key in a._chunk_keys()]
    report.arrays = len(arrays)
    nbytes = 0
    for i, (array, key) in enumerate(work, 1):
        blob = store.get(key)
        if blob is not None:
            nbytes += len(blob)
            try:
                array._engine.decode_unit(key, blob)
            except ChunkstoreError as e:
                report.bad[key] = str(e)
        report.chunks += 1
        if progress:
            progress(i, len(work), nbytes)
    return report
