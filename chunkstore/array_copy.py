"""Values that read when sliced (another Array, a dask array, an h5py dataset, a lazy
xarray variable) written into an Array block by block, in bounded memory.

A block is read from the value just before it is written, so a value that reads the
Array being written (``a[1:] = from_store(a)[:-1]``) would read blocks that earlier
blocks already overwrote. NumPy (and zarr-python, which converts the value first) give
the value as it was before the write. Such a value is therefore first copied whole into
a temporary array on local disk (same bounded memory, twice the IO), then from there.
It is recognised before the first block when it holds the Array (another handle on the
same place, a wrapper such as xarray's lazily indexed arrays, a dask collection built on
it); otherwise by the reads it makes of the Array on this thread while its blocks are
read (``note_read``). In a dask graph, the source layers, the arguments of the first
``_MAX_TASKS`` tasks and those of the tasks fused into them are looked into; a source
held in a closure is not found.
"""

from __future__ import annotations

import tempfile
import threading
from typing import Any

import numpy as np

from .errors import SelfReadingValueError
from .io.copy import block_parts
from .io.overlap import overlaps, refuse_onto_itself
from .storage.base import Store
from .storage.local import LocalStore

_watch = threading.local()  # .target: the Array a copy on this thread writes; .hit


_LEAVES = (np.ndarray, np.generic, str, bytes, int, float, complex, type(None), dict,
           list, tuple, set, frozenset, type)
_WRAPPER_DEPTH = 6  # xarray: adapter -> copy-on-write -> lazily indexed -> backend -> Array
_MAX_LOOKS = 256
_PLAIN = (np.ndarray, np.generic, str, bytes, int, float, complex, type(None), slice, type)
_NONE = object()
_TASK_DEPTH = 4  # a task's arguments, and those of tasks fused into it
_MAX_TASKS = 200_000  # graph tasks looked at, about 0.1 s


def note_read(array: Any) -> None:
    """Every read of an Array calls this: it marks a copy running on this thread whose
    value reads the copy's own target."""
    target = getattr(_watch, "target", None)
    if target is not None and same_place(target, array):
        _watch.hit = True


def same_place(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are Arrays stored in the same place (any handles)."""
    return a is b or (_is_array(a) and _is_array(b)
                      and overlaps(a.store, a.path, b.store, b.path))


def _is_array(x: Any) -> bool:
    return (isinstance(getattr(x, "store", None), Store)
            and isinstance(getattr(x, "path", None), str) and hasattr(x, "read_region"))


def reads_target(value: Any, target: Any) -> bool:
    """Whether ``value`` is known to read ``target`` before reading it (``stored_sources``)."""
    return any(same_place(source, target) for source in stored_sources(value))


def refuse_onto_sources(value: Any, store: Store, path: str, what: str) -> None:
    """Raise SameLocationError when the node ``path`` of ``store`` is (or contains, or
    lies inside) an Array that ``value`` holds (``stored_sources``): creating it there
    from ``value`` would delete the source before reading it. Checked before anything is
    created or deleted, through any handle or spelling of the place."""
    for source in stored_sources(value):
        refuse_onto_itself(source, store, path, what)


def stored_sources(value: Any) -> list[Any]:
    """The Arrays ``value`` holds: itself, those held by attributes of wrappers around them
    (xarray's lazily indexed arrays, h5py-like views), and those in a dask graph: a source
    layer (``chunkstore.dask.from_store``, ``dask.array.from_array``), an array passed
    inline to every task (``inline_array=True``), or one fused into optimized tasks. A
    bounded walk: a source hidden deeper, or in a closure, is not found."""
    found: list[Any] = []
    seen: set[int] = set()
    looks = [_MAX_LOOKS]
    _collect(value, _WRAPPER_DEPTH, seen, looks, found)
    graph = getattr(value, "__dask_graph__", None)
    layers = getattr(graph() if callable(graph) else None, "layers", None) or {}
    budget = _MAX_TASKS
    for layer in layers.values():
        for arg, _ in getattr(layer, "indices", None) or ():  # Blockwise: inline arguments
            _walk_task(arg, _TASK_DEPTH, seen, looks, found)
        mapping = getattr(layer, "mapping", None)
        if not isinstance(mapping, dict):
            continue
        for task in mapping.values():
            budget -= 1
            if budget < 0:
                return found
            _walk_task(task, _TASK_DEPTH, seen, looks, found)
    return found


def _walk_task(node: Any, depth: int, seen: set[int], looks: list[int], found: list) -> None:
    """The Arrays in one dask task: the values of its data nodes, its arguments and those
    of the tasks nested in it (fused tasks), ``depth`` levels down."""
    if isinstance(node, _PLAIN) or looks[0] <= 0:
        return
    value = getattr(node, "value", _NONE)  # dask's DataNode
    if value is not _NONE:
        if not isinstance(value, _PLAIN):
            _collect(value, _WRAPPER_DEPTH, seen, looks, found)
        return
    parts = node if isinstance(node, tuple | list) else getattr(node, "args", None)
    if parts is None:
        _collect(node, _WRAPPER_DEPTH, seen, looks, found)
    elif depth:
        for part in parts:
            _walk_task(part, depth - 1, seen, looks, found)


def _collect(obj: Any, depth: int, seen: set[int], looks: list[int], found: list) -> None:
    if id(obj) in seen or isinstance(obj, _LEAVES) or looks[0] <= 0:
        return
    seen.add(id(obj))
    looks[0] -= 1
    if _is_array(obj):
        found.append(obj)
        return
    if depth == 0:
        return
    names = list(getattr(obj, "__dict__", {}))
    for cls in type(obj).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        names += [slots] if isinstance(slots, str) else list(slots)
    for name in names:
        try:
            child = object.__getattribute__(obj, name)
        except AttributeError:
            continue
        _collect(child, depth - 1, seen, looks, found)


def copy_value(value: Any, array: Any, region: tuple[slice, ...]) -> None:
    """``array[region] = value``, block by block; ``value`` has the region's shape."""
    if same_place(array, value) and all(r == slice(0, n) for r, n in zip(region, array.shape,
                                                                        strict=True)):
        return  # ``a[...] = a``: nothing changes
    if reads_target(value, array):
        _staged(value, array, region)
        return
    itemsize = array.dtype.itemsize
    for n, (block, part) in enumerate(block_parts(array.layout, region, itemsize)):
        outer = getattr(_watch, "target", None), getattr(_watch, "hit", False)
        _watch.target, _watch.hit = array, False
        try:
            data = np.asarray(value[part])
            hit = _watch.hit
        finally:
            _watch.target, _watch.hit = outer
        if hit and n == 0:  # nothing written yet: start again from a copy
            _staged(value, array, region)
            return
        if hit:
            raise SelfReadingValueError(
                f"array {array.name!r}: the value written to {_show(region)} reads this "
                f"array too (first found in block {_show(block)}, after {n} blocks were "
                "written); write the value to another array first, then copy it here")
        array.write_region(block, data)


def _staged(value: Any, array: Any, region: tuple[slice, ...]) -> None:
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
