"""Values that read when sliced (another Array, a dask array, an h5py dataset, a lazy
xarray variable) written into an Array block by block, in bounded memory.

A block is read from the value just before it is written, so a value that reads the
Array being written (``a[1:] = from_store(a)[:-1]``) would read blocks that earlier
blocks already overwrote. NumPy (and zarr-python, which converts the value first) give
the value as it was before the write, whatever its size. So:

* a region of one block (``io.copy.COPY_BLOCK_BYTES``) is read whole, then written:
  nothing to decide;
* over more blocks, the value is looked into first (``sources.value_reads``: the
  objects it holds, its dask graph with the closures, partials, bound methods, defaults
  and globals of its tasks). When it holds a reader of the target's place (any handle on
  it, a zarr-python array or an h5py/memmap file there, a path to it) -- or when it
  cannot be looked into completely (a callable of an extension type that does not
  reduce, a graph of more than about ``MAX_OBJECTS / 3`` tasks) -- it is *staged*:
  copied whole into a temporary array on local disk (``TMPDIR``; same bounded memory,
  twice the IO), then from there. Staging is correct for any value, so an unknown one is
  staged rather than refused; it fails only when the temporary copy cannot be written
  (the disk is full), and then before anything of the target was written;
* otherwise blocks are copied straight, and reads the value makes of the target on this
  thread are watched (``note_read``): seen before the first block is written, the value
  is staged; seen only later (a reader made while a block is read, e.g. by ``eval`` or
  from a context variable), ``SelfReadingValueError`` names the array and the blocks
  written.
"""

from __future__ import annotations

import itertools
import tempfile
import threading
from typing import Any, Protocol

import numpy as np

from chunkstore.array.facts import ArrayFacts, Placed
from chunkstore.array.sources import is_array, value_reads
from chunkstore.errors import SelfReadingValueError
from chunkstore.io.copy import block_parts
from chunkstore.io.overlap import overlaps
from chunkstore.metadata import ArrayMetadata
from chunkstore.runtime import current
from chunkstore.runtime.part import Part
from chunkstore.storage.base import Store
from chunkstore.storage.local.store import LocalStore


class Target(ArrayFacts, Protocol):
    """What a copy needs of the Array it writes (``array.Array``, which imports this
    module): its layout, regions to write (and read, of the staging array), and its
    constructor, ``type(target)(store, path, metadata, write_empty_chunks=True)``, which
    makes the staging array."""

    def __init__(self, store: Store, path: str, metadata: ArrayMetadata, *,
                 write_empty_chunks: bool | None = None) -> None: ...
    def read_region(self, region: tuple[slice, ...]) -> np.ndarray: ...
    def write_region(self, region: tuple[slice, ...], data: Any) -> None: ...


class CopyWatch(threading.local, Part):
    """Per thread (a part of the process's Runtime): the Array a copy running on this
    thread writes (``target``), and whether its value read that array (``hit``)."""

    target: Any = None
    hit: bool = False


def note_read(array: Placed) -> None:
    """Every read of an Array calls this: it marks a copy running on this thread whose
    value reads the copy's own target."""
    watch = current().part(CopyWatch)
    if watch.target is not None and same_place(watch.target, array):
        watch.hit = True


def same_place(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are Arrays stored in the same place (any handles)."""
    return a is b or (is_array(a) and is_array(b)
                      and overlaps(a.store, a.path, b.store, b.path))


def reads_target(value: Any, target: Placed) -> bool:
    """Whether writing ``value`` into ``target`` block by block must be staged: the value
    holds a reader of the target's place, or could not be looked into completely
    (``sources.value_reads``)."""
    return value_reads(value, target.store, target.path).must_stage


def copy_value(value: Any, array: Target, region: tuple[slice, ...]) -> None:
    """``array[region] = value``, block by block; ``value`` has the region's shape."""
    if same_place(array, value) and all(r == slice(0, n) for r, n in zip(region, array.shape,
                                                                        strict=True)):
        return  # ``a[...] = a``: nothing changes
    itemsize = array.dtype.itemsize
    blocks = block_parts(array.layout, region, itemsize)
    first = next(blocks, None)
    second = next(blocks, None) if first is not None else None
    if second is None:  # at most one block: the value is read whole before it is written
        if first is not None:
            array.write_region(first[0], np.asarray(value[first[1]]))
        return
    if reads_target(value, array):
        _staged(value, array, region)
        return
    watch = current().part(CopyWatch)
    for n, (block, part) in enumerate(itertools.chain((first, second), blocks)):
        outer = watch.target, watch.hit
        watch.target, watch.hit = array, False
        try:
            data = np.asarray(value[part])
            hit = watch.hit
        finally:
            watch.target, watch.hit = outer
        if hit and n == 0:  # nothing written yet: start again from a copy
            _staged(value, array, region)
            return
        if hit:
            raise SelfReadingValueError(
                f"array {array.name!r}: the value written to {_show(region)} reads this "
                f"array too (first found in block {_show(block)}, after {n} blocks were "
                "written); write the value to another array first, then copy it here")
        array.write_region(block, data)


def _staged(value: Any, array: Target, region: tuple[slice, ...]) -> None:
    """The value copied into a temporary array of the target's dtype, chunks and codecs
    (its metadata with the value's shape, never stored), then from there."""
    with tempfile.TemporaryDirectory(prefix="chunkstore-stage-") as tmp:
        meta = array.metadata.replace(shape=tuple(value.shape))
        stage = type(array)(LocalStore(tmp), "", meta, write_empty_chunks=True)
        whole = tuple(slice(0, n) for n in stage.shape)
        for block, part in block_parts(stage.layout, whole, array.dtype.itemsize):
            stage.write_region(block, np.asarray(value[part]))
        for block, part in block_parts(array.layout, region, array.dtype.itemsize):
            array.write_region(block, stage.read_region(part))


def _show(region: tuple[slice, ...]) -> str:
    return "[" + ", ".join(f"{r.start}:{r.stop}" for r in region) + "]"
