"""The ``rectilinear`` chunk grid of v3 documents, as zarr-python (3.2+) reads and writes
it: per axis a bare integer (regular along that axis) or a list of chunk lengths in which
``[length, count]`` is a run of ``count`` chunks of ``length``."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from chunkstore.errors import MetadataError
from chunkstore.metadata.json_io import INT64_MAX
from chunkstore.runtime import current

#: one axis: a regular chunk length, or every chunk's length
AxisEdges = int | tuple[int, ...]


def compress_runs(lengths: Sequence[int]) -> list[int | list[int]]:
    """Chunk lengths with every run of equal lengths as ``[length, count]`` and a lone
    length bare: ``[10, 10, 10, 5] -> [[10, 3], 5]``."""
    out: list[int | list[int]] = []
    for value, run in itertools.groupby(lengths):
        count = sum(1 for _ in run)
        out.append([value, count] if count > 1 else value)
    return out


def edges_to_json(edges: Sequence[AxisEdges]) -> dict[str, Any]:
    """The ``chunk_grid`` object zarr-python writes: an explicit axis run-length
    compressed only where that is shorter."""
    shapes: list[Any] = []
    for e in edges:
        if isinstance(e, int):
            shapes.append(e)
        else:
            runs = compress_runs(e)
            shapes.append(runs if len(runs) < len(e) else list(e))
    return {"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": shapes}}


def edges_from_json(configuration: Any, shape: tuple[int, ...], where: str) -> tuple[AxisEdges, ...]:
    """Per axis the chunk lengths of a ``rectilinear`` grid's configuration; MetadataError
    naming ``where`` for anything zarr-python would not read."""
    field = "field 'chunk_grid'"
    if not isinstance(configuration, dict):
        raise MetadataError(f"{where}: {field}: a rectilinear grid needs a configuration")
    kind = configuration.get("kind")
    if kind != "inline":
        raise MetadataError(f"{where}: {field}: rectilinear grid kind {kind!r} is not "
                            "supported (only 'inline')")
    specs = configuration.get("chunk_shapes")
    if not isinstance(specs, list) or len(specs) != len(shape):
        raise MetadataError(f"{where}: {field}: chunk_shapes {specs!r} must list one entry "
                            f"per axis of the {len(shape)}-d shape")
    # a run of a huge count is a few bytes: the lengths it stands for count as the JSON
    # values they would be, under the same cap (``metadata.max_elements``)
    cap, total = current().budgets.metadata_max_elements, 0
    out: list[AxisEdges] = []
    for axis, (spec, n) in enumerate(zip(specs, shape, strict=True)):
        if _positive(spec):
            out.append(spec)
            continue
        if not isinstance(spec, list) or not spec:
            raise MetadataError(f"{where}: {field}: axis {axis}: {spec!r} is neither a chunk "
                                "length nor a list of them")
        lengths: list[int] = []
        for item in spec:
            count = 1 if _positive(item) else (
                item[1] if isinstance(item, list) and len(item) == 2
                and all(map(_positive, item)) else 0)
            if not count:
                raise MetadataError(f"{where}: {field}: axis {axis}: {item!r} is neither a "
                                    "chunk length nor a [length, count] run")
            total += count
            if total > cap:
                raise MetadataError(f"{where}: {field}: more than {cap} chunk lengths (chunkstore "
                                    "config 'metadata.max_elements': raise it to read this "
                                    "document)")
            if count == 1 and not isinstance(item, list):
                lengths.append(item)
            else:
                lengths.extend([item[0]] * count)
        if max(lengths) > INT64_MAX:
            raise MetadataError(f"{where}: {field}: axis {axis}: a chunk length does not fit "
                                "an int64")
        if sum(lengths) < n:
            raise MetadataError(f"{where}: {field}: axis {axis}: the chunk lengths sum to "
                                f"{sum(lengths)}, less than the axis length {n}")
        out.append(tuple(lengths))
    return tuple(out)


def grown_edges(edges: Sequence[AxisEdges], shape: Sequence[int]) -> tuple[AxisEdges, ...]:
    """The edges of the array resized to ``shape`` (zarr-python's rule: an explicit axis
    that grows past its chunks gets one more chunk covering the growth; one that shrinks
    keeps its chunks)."""
    out: list[AxisEdges] = []
    for e, n in zip(edges, shape, strict=True):
        if not isinstance(e, int) and n > sum(e):
            e = (*e, n - sum(e))
        out.append(e)
    return tuple(out)


def with_own_chunk(edges: Sequence[AxisEdges], axis: int, extent: int, length: int
                   ) -> tuple[AxisEdges, ...]:
    """The edges after an append of ``length`` elements along ``axis`` (now ``extent``
    long) as a chunk of its own: the axis's chunks that end at or before ``extent`` kept
    (a regular axis, a bare length, spelled out), then one of ``length``. ValueError
    when ``extent`` falls inside one of the axis's chunks (a new chunk there would
    change a stored one)."""
    e = edges[axis]
    if isinstance(e, int):
        count, cap = -(-extent // e), current().budgets.metadata_max_elements
        if count >= cap:  # spelled out, the grid could not be read back
            raise ValueError(f"axis {axis} spelled out would list {count + 1} chunk lengths, "
                             f"more than {cap} (chunkstore config 'metadata.max_elements')")
        e = (e,) * count
    kept = tuple(itertools.takewhile(lambda end: end <= extent, itertools.accumulate(e)))
    if (kept[-1] if kept else 0) != extent:
        raise ValueError(f"axis {axis} is {extent} long, inside a chunk: an appended block "
                         "cannot be a chunk of its own without rewriting that chunk")
    return tuple((*e[:len(kept)], length) if a == axis else x for a, x in enumerate(edges))


def max_lengths(edges: Sequence[AxisEdges]) -> tuple[int, ...]:
    """The longest chunk along each axis."""
    return tuple(e if isinstance(e, int) else max(e) for e in edges)


def _positive(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0
