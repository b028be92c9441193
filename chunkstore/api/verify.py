"""Verify stored data: decode every stored chunk (every shard, with its inner chunks) of
every array at or below a node, and report the bad keys.

Also the chunk grid as it is stored, in one vocabulary: a sharded array stores *shards*,
each holding a block of inner *chunks*; an unsharded array stores *chunks*. Only public
names of :class:`chunkstore.Array` and :class:`chunkstore.Group` are used.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from chunkstore.api.opening import open as open_any
from chunkstore.array.array import Array
from chunkstore.errors import ChunkstoreError, NodeNotFoundError
from chunkstore.group.group import Group
from chunkstore.storage.local import LocalStore
from chunkstore.storage.wrappers import unwrapped

_METADATA_NAMES = frozenset({"zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"})


def unit_grid(array: Any) -> tuple[int, ...]:
    """How many stored units (shards or chunks) lie along each axis."""
    return array.layout.unit_grid


def stored_units(array: Any) -> list[tuple[tuple[int, ...], str]]:
    """``(grid coordinates, key)`` of every stored shard (or chunk) of ``array``, sorted."""
    base = f"{array.path}/" if array.path else ""
    layout = array.layout
    found = []
    for key in array.store.list_prefix(base):
        coords = layout.unit_of_key(key)
        if coords is not None:
            found.append((coords, key))
    return sorted(found)


def links_outside(array: Any) -> dict[str, str]:
    """Key -> reason of each entry below ``array`` that is a symlink leading outside the
    store's root (never listed, nor followed; reads of it fail). Only local stores have
    them."""
    store = unwrapped(array.store)  # wrappers keep the inner store's keys
    if not isinstance(store, LocalStore):
        return {}
    base = f"{array.path}/" if array.path else ""
    return {key: " ".join(reason.split()) for key, reason in store.links_outside(base).items()}


def unit_region(array: Any, coords: tuple[int, ...]) -> tuple[slice, ...]:
    """The region of the array a stored unit covers (clipped to the shape)."""
    return array.layout.unit_region(coords)


def chunks_in(array: Any, coords: tuple[int, ...]) -> int:
    """Number of (inner) chunks inside the array's bounds in a stored unit."""
    return math.prod(math.ceil((r.stop - r.start) / c)
                     for r, c in zip(unit_region(array, coords), array.layout.chunks,
                                     strict=True))


@dataclass
class VerifyReport:
    """What :func:`verify` checked, and the bad keys with their reasons."""

    arrays: int = 0
    chunks: int = 0  # chunks of unsharded arrays
    shards: int = 0
    shard_chunks: int = 0  # inner chunks of the shards checked
    bad: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when nothing bad was found."""
        return not self.bad

    def counts(self) -> str:
        """``12 chunks, 9 shards (30 chunks)`` (the parts that apply)."""
        parts = []
        if self.chunks or not self.shards:
            parts.append(f"{self.chunks} chunks")
        if self.shards:
            parts.append(f"{self.shards} shards ({self.shard_chunks} chunks)")
        return ", ".join(parts)

    def summary(self) -> str:
        """``2 arrays checked: 12 chunks, 9 shards (30 chunks), 0 bad``."""
        arrays = f"{self.arrays} array{'s' if self.arrays != 1 else ''}"
        return f"{arrays} checked: {self.counts()}, {len(self.bad)} bad"


def _walk(node: Any, report: VerifyReport) -> Iterator[Any]:
    """The arrays at or below ``node``, listing the store level by level so that one bad
    metadata document is reported without hiding the rest."""
    if isinstance(node, Array):
        yield node
        return
    base = f"{node.path}/" if node.path else ""
    for name in sorted(node.store.list_dir(node.path)):
        if name in _METADATA_NAMES:
            continue
        try:
            child = open_any(node.store, mode="r", path=base + name)
        except NodeNotFoundError:
            continue  # a key or directory that is not a node
        except (ChunkstoreError, ValueError, OSError, RecursionError) as e:
            report.bad[base + name] = " ".join(f"cannot open: {e}".split())
            continue
        yield from _walk(child, report)


def verify(node: Any, path: str = "", progress: Callable[[int, int, int], None] | None = None
           ) -> VerifyReport:
    """Decode every stored unit (chunk or shard) of the arrays at or below ``node`` (an
    Array or Group, or a store with the node's ``path`` in it); ``progress`` is called as
    ``(done, total, nbytes_decoded)``."""
    if not isinstance(node, Array | Group):
        node = open_any(node, mode="r", path=path or None)
    report = VerifyReport()
    arrays = list(_walk(node, report))
    for array in arrays:  # keys the listing leaves out as they lead outside the store
        report.bad.update(links_outside(array))
    work = [(a, coords, key) for a in arrays for coords, key in stored_units(a)]
    report.arrays = len(arrays)
    nbytes = 0
    for i, (array, coords, key) in enumerate(work, 1):
        try:
            nbytes += array.read_region(unit_region(array, coords)).nbytes
        except (ChunkstoreError, ValueError, OSError) as e:
            report.bad[key] = " ".join(str(e).split())
        if array.layout.shards is not None:
            report.shards += 1
            report.shard_chunks += chunks_in(array, coords)
        else:
            report.chunks += 1
        if progress is not None:
            progress(i, len(work), nbytes)
    return report
