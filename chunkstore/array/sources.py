"""What a lazy value written into an Array may read: a bounded walk over the objects the
value holds, looking for a reader of the place being written.

A reader is a chunkstore Array, Group or Store (compared with ``overlaps``), or a foreign
one resolved to a place: a zarr-python-like handle (a ``store`` with a ``root``, an
``fs`` + ``path`` or a ``path``, and the handle's ``path`` in it), an object with a
``filename`` (NumPy memmaps, h5py files) or a ``file`` that has one (h5py datasets), an
open file, a ``PathLike``, a string that looks like a path or URL (absolute, with a
``/``, or ending in ``.zarr``/``.zip``), or the very dict a memory store keeps. Local
places are real paths, compared with the target store's ``location()`` joined with the
array's path (a zip archive is one place); remote ones by scheme and path (any
endpoint: too careful, never wrong). A place at, inside or containing the target reads
it.

The walk goes through containers (tuple, list, set, dict values, deque), the attributes
and slots of objects, the classes of objects defined outside installed libraries (their
functions and data), functions (closure cells, defaults, ``__dict__`` and, for code
outside installed libraries, the module globals their code names, with the attributes
of user modules it names), bound methods (``__self__``), ``functools.partial`` (function,
arguments, keywords), weak references, dask collections (their graph: the layers' tasks,
blockwise templates and inline arguments, data nodes; tasks fused into others) and
callables of extension types through ``__reduce_ex__``. Data of extension types with no
Python attributes (a NumPy array, a lock, a random generator) is data, not a reader.

The value is *unknown* when something cannot be looked into: a callable of an extension
type that does not reduce, or more than ``MAX_OBJECTS`` objects (a graph of about
``MAX_OBJECTS / 3`` to ``MAX_OBJECTS`` tasks). A found reader is ``Reads.source``; an unknown value has
``Reads.unknown``. Not looked into: dict keys, globals of installed libraries, values
created only when a task runs (an ``eval``, a context variable); foreign readers of a
target behind a chained URL (``zip::s3://...``) are not compared.
"""

from __future__ import annotations

import collections
import functools
import io
import os
import site
import sys
import sysconfig
import types
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from chunkstore.errors import SameLocationError
from chunkstore.io.overlap import overlaps, refuse_onto_itself
from chunkstore.storage.base import Store
from chunkstore.storage.location import canonical_path, canonical_scheme

#: objects looked at before a value counts as unknown: 1 to 3 per dask task, about 2 us
#: and 60 bytes each (measured on a 10^5-task graph)
MAX_OBJECTS = 1_000_000

_LEAF_TYPES = frozenset({int, float, bool, complex, bytes, bytearray, type(None), slice,
                         range, type(Ellipsis), type(NotImplemented), memoryview})
_NO_CHILDREN = (np.generic, np.dtype, types.ModuleType, types.CodeType,
                types.GetSetDescriptorType, types.MemberDescriptorType)
_BUILTIN_CALLABLES = (types.BuiltinFunctionType, types.MethodWrapperType,
                      types.WrapperDescriptorType, types.MethodDescriptorType,
                      types.ClassMethodDescriptorType)
_PATH_SUFFIXES = (".zarr", ".zip")
_CLASS_TEXT = frozenset({"__doc__", "__module__", "__qualname__", "__annotations__"})
_NONE = object()


class _Found(Exception):
    """Ends a walk at the first reader of the target."""


def _roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    found = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    found.add(os.path.dirname(os.path.abspath(__file__)))  # chunkstore itself
    user = getattr(site, "getusersitepackages", lambda: None)()
    if isinstance(user, str):
        found.add(user)
    out = set()
    for p in found:
        out |= {os.path.join(os.path.abspath(p), ""), os.path.join(os.path.realpath(p), "")}
    return tuple(sorted(out))


#: where installed libraries live: their functions' globals are not looked into
_LIBRARY_ROOTS = _roots()


@dataclass(frozen=True)
class Reads:
    """What a value reads of a target: ``source``, the first reader found at the target's
    place (an Array, a handle, a path...), or None; ``unknown``, why the value could not
    be looked into completely, or None."""

    source: Any = None
    place: str = ""
    unknown: str | None = None

    @property
    def must_stage(self) -> bool:
        """Whether a copy of the value into the target must be staged: a reader of the
        target was found, or the value could not be looked into completely."""
        return self.source is not None or self.unknown is not None

    def describe(self) -> str:
        """A few words for messages: the reader found, or why the value is unknown."""
        if self.source is not None:
            return f"{type(self.source).__name__} reading {self.place}"
        return self.unknown or "nothing of the target"


def value_reads(value: Any, store: Store, path: str, max_objects: int | None = None
                ) -> Reads:
    """Whether ``value`` holds a reader of the array at ``path`` of ``store`` (see the
    module docstring): stops at the first one found.

    >>> import chunkstore as cs
    >>> a = cs.zeros((4,), chunks=(2,))
    >>> value_reads(a, a.store, a.path).source is a
    True
    """
    walk = _Walk(store, path, MAX_OBJECTS if max_objects is None else max_objects)
    try:
        walk.run(value)
        return Reads(walk.found, walk.found_place, walk.unknown)
    finally:
        # the bound methods it caches make the walk a reference cycle: break it, so the
        # target store (a zip session commits when its last store goes) is freed at once
        walk.handlers.clear()
        walk.keep.clear()
        walk.stack.clear()


def refuse_reader_of(value: Any, store: Store, path: str, what: str) -> None:
    """Raise SameLocationError when ``value`` holds a reader of ``path`` of ``store`` (a
    write there would change data the value still reads). An unknown value passes."""
    reads = value_reads(value, store, path)
    if reads.source is None:
        return
    if is_array(reads.source):
        refuse_onto_itself(reads.source, store, path, what)
    raise SameLocationError(
        f"{what}: the target {path or '/'!r} in {store!r} is read by the value written "
        f"({reads.describe()}), the same place; writing it would change data before it is "
        "read. Write to a new path (or store) first, then copy from there")


def is_array(x: Any) -> bool:
    """Whether ``x`` is a chunkstore Array (duck-typed: this module sits below it)."""
    return (hasattr(type(x), "read_region") and isinstance(getattr(x, "store", None), Store)
            and isinstance(getattr(x, "path", None), str))


def _parts(path: str) -> tuple[str, ...]:
    return tuple(p for p in path.replace("\\", "/").split("/") if p)


def _file_place(path: Any) -> tuple[tuple, tuple[str, ...]] | None:
    try:
        p = os.fspath(path)
        if isinstance(p, bytes):
            p = os.fsdecode(p)
        return ("file",), _parts(os.path.realpath(os.path.expanduser(p)))
    except (TypeError, ValueError, OSError):
        return None


def _url_place(url: str) -> tuple[tuple, tuple[str, ...]] | None:
    scheme, _, rest = url.partition("://")
    scheme = canonical_scheme(scheme.split("::")[-1])
    if scheme in ("file", "local"):
        return _file_place(rest)
    return (scheme,), _parts(canonical_path(rest, scheme))


def _string_place(s: str) -> tuple[tuple, tuple[str, ...]] | None:
    if "://" in s:
        return _url_place(s)
    if "\n" in s:
        return None  # text, not a path
    if "/" in s or os.sep in s or s.startswith("~") or s.lower().endswith(_PATH_SUFFIXES):
        place = _file_place(s)
        return place if place and place[1] else None  # "/" alone is a separator
    return None


def _fs_place(fs: Any, path: Any) -> tuple[tuple, tuple[str, ...]] | None:
    protocol = getattr(fs, "protocol", None)
    if isinstance(protocol, tuple | list):
        protocol = protocol[0] if protocol else None
    if not isinstance(protocol, str) or not isinstance(path, str):
        return None
    if canonical_scheme(protocol) in ("file", "local"):
        return _file_place(path)
    return (canonical_scheme(protocol),), _parts(canonical_path(path, protocol))


def _target_place(store: Store, path: str) -> tuple[tuple, tuple[str, ...]] | None:
    loc = store.location()
    if not isinstance(loc, tuple) or len(loc) < 2:
        return None
    kind, root = loc[0], loc[1]
    if kind == "memory" and not isinstance(root, str):  # a MemoryStore: the id of its dict
        return ("dict", root), _parts(path)
    if not isinstance(root, str):
        return None
    if kind == "zip":
        return ("file",), _parts(root)  # the archive is one place
    if kind == "file":
        return ("file",), _parts(root) + _parts(path)
    if "::" in kind:
        return None  # a chained URL (zip::s3://...): found through chunkstore handles only
    return (kind,), _parts(root) + _parts(path)


class _Walk:
    """One walk (iterative, depth first) of the objects a value holds."""

    def __init__(self, store: Store, path: str, budget: int) -> None:
        self.store, self.path, self.budget = store, path, budget
        self.target = _target_place(store, path)
        # the id of the dict a memory target keeps
        namespace = self.target[0] if self.target else ()
        self.memory = namespace[1] if namespace[:1] == ("dict",) else -1
        self.seen: set[int] = set()
        self.strings: set[str] = set()
        self.keep: list[Any] = []  # objects made during the walk keep their ids
        self.stack: list[Any] = []
        self.found: Any = None
        self.found_place = ""
        self.unknown: str | None = None
        self.library: dict[Any, bool] = {}
        self.names: dict[Any, tuple[str, ...]] = {}
        self.slots: dict[type, tuple[str, ...]] = {}
        task_spec = sys.modules.get("dask._task_spec")
        self.task_ref = getattr(task_spec, "TaskRef", ())
        self.graph_node = getattr(task_spec, "GraphNode", ())
        self.task = getattr(task_spec, "Task", ())
        self.data_node = getattr(task_spec, "DataNode", ())
        self.hlg = getattr(sys.modules.get("dask.highlevelgraph"), "HighLevelGraph", ())
        self.blockwise = getattr(sys.modules.get("dask.blockwise"), "Blockwise", ())
        self.handlers: dict[type, Callable[[Any], None] | None] = {}

    # -- the loop ---------------------------------------------------------------------
    def run(self, value: Any) -> None:
        stack, seen, handlers, strings = self.stack, self.seen, self.handlers, self.strings
        budget = self.budget
        pop, add = stack.pop, seen.add
        stack.append(value)
        try:
            while stack:
                obj = pop()
                t = type(obj)
                if t is str:
                    if obj not in strings:
                        self._string(obj)
                    continue
                handler = handlers.get(t, _NONE)
                if handler is _NONE:
                    handler = handlers[t] = self._handler(t)
                if handler is None or id(obj) in seen:
                    continue
                add(id(obj))
                if len(seen) > budget:
                    self.unknown = (self.unknown or f"the value holds more than {budget} "
                                    "objects (a dask graph of about a third as many tasks)")
                    return
                handler(obj)
        except _Found:
            return

    def _handler(self, t: type) -> Callable[[Any], None] | None:
        """How objects of type ``t`` are looked into; None: they hold nothing."""
        if t in _LEAF_TYPES or issubclass(t, _NO_CHILDREN) or issubclass(t, self.task_ref):
            return None
        if t is str:
            return self._string
        if t is tuple or t is list or t is set or t is frozenset:
            return self.stack.extend
        if t is dict:
            return self._dict
        if issubclass(t, self.task):
            return self._task
        if issubclass(t, self.data_node):
            return self._data_node
        if issubclass(t, self.graph_node):
            return None  # an alias of another task
        if issubclass(t, np.ndarray):
            return self._ndarray
        if issubclass(t, np.ufunc):
            return self._ufunc
        if issubclass(t, self.hlg):
            return self._graph
        if issubclass(t, self.blockwise):
            return self._blockwise
        if issubclass(t, types.FunctionType):
            return self._function
        if issubclass(t, types.MethodType):
            return self._method
        if issubclass(t, functools.partial):
            return self._partial
        if issubclass(t, _BUILTIN_CALLABLES):
            return self._builtin
        if issubclass(t, type):
            return self._class
        if issubclass(t, weakref.ref):
            return self._weakref
        if issubclass(t, collections.deque):
            return self.stack.extend
        if issubclass(t, types.MappingProxyType):
            return self._mapping
        return self._other

    def _string(self, s: str) -> None:
        self.strings.add(s)
        if len(s) < 4096:
            self._place(s, _string_place(s), s)

    def _dict(self, d: dict) -> None:
        if id(d) == self.memory:
            self._hit(d, "the dict of the target's memory store")
        self.stack.extend(d.values())

    def _mapping(self, m: Any) -> None:
        self.stack.extend(m.values())

    def _task(self, task: Any) -> None:
        self.stack.append(task.func)
        self.stack.extend(task.args)
        if task.kwargs:
            self.stack.extend(task.kwargs.values())

    def _data_node(self, node: Any) -> None:
        value = node.value
        if type(value) is not np.ndarray or value.base is not None:
            self.stack.append(value)

    def _graph(self, graph: Any) -> None:
        self.stack.extend(graph.layers.values())  # not the key dependencies

    def _blockwise(self, layer: Any) -> None:
        self.stack.append(layer.task)  # the template of every task
        self.stack.extend(arg for arg, _ in layer.indices)  # arguments given inline
        self.stack.extend(layer.io_deps.values())

    def _ufunc(self, u: np.ufunc) -> None:
        module = sys.modules.get(getattr(u, "__module__", None) or "numpy")
        if getattr(module, u.__name__, None) is not u:  # np.frompyfunc of any function
            self.unknown = self.unknown or f"the ufunc {u.__name__!r} cannot be looked into"

    def _method(self, method: types.MethodType) -> None:
        self.stack.append(method.__self__)
        self.stack.append(method.__func__)

    def _partial(self, p: functools.partial) -> None:
        self.stack.append(p.func)
        self.stack.extend(p.args)
        self.stack.extend(p.keywords.values())
        self.stack.extend(vars(p).values())

    def _builtin(self, f: Any) -> None:
        owner = getattr(f, "__self__", None)
        if owner is not None and not isinstance(owner, types.ModuleType):
            self.stack.append(owner)

    def _weakref(self, ref: weakref.ref) -> None:
        self._made(ref())

    def _other(self, obj: Any) -> None:
        if isinstance(obj, dict):  # OrderedDict, defaultdict...
            self._dict(obj)
        elif isinstance(obj, tuple | list | set | frozenset):
            self.stack.extend(obj)
        if not self._reader(obj):
            self._object(obj, type(obj))

    def _hit(self, obj: Any, place: str) -> None:
        self.found, self.found_place = obj, place
        raise _Found

    def _place(self, obj: Any, place: tuple[tuple, tuple[str, ...]] | None, text: Any) -> bool:
        """Record ``obj`` when ``place`` overlaps the target; True when ``place`` was known
        (the object is resolved, nothing to look into)."""
        if place is None:
            return False
        (ns, parts), target = place, self.target
        if target is not None and ns == target[0]:
            n = min(len(parts), len(target[1]))
            if parts[:n] == target[1][:n]:
                self._hit(obj, str(text))
        return True

    def _store_place(self, obj: Any, store: Any, path: str) -> bool:
        """A reader through ``store`` at ``path``: compared; True when resolved."""
        if isinstance(store, Store):
            if overlaps(store, path, self.store, self.path):
                self._hit(obj, f"{path or '/'!r} of {store!r}")
            return True
        place = self._foreign_store(store)
        if place is None:
            return False
        if place[0] == ("file",) and os.path.isfile("/" + "/".join(place[1])):
            path = ""  # an archive (zip): one place
        return self._place(obj, (place[0], place[1] + _parts(path)), f"{path or '/'!r} of "
                           f"{type(store).__name__} {'/'.join(place[1])!r}")

    def _foreign_store(self, store: Any) -> tuple[tuple, tuple[str, ...]] | None:
        root = self._static(store, "root")
        if isinstance(root, str) and "://" in root:
            return _url_place(root)
        if isinstance(root, str | os.PathLike):
            return _file_place(root)
        fs, path = self._static(store, "fs"), self._static(store, "path")
        if fs is not None:
            return _fs_place(fs, os.fspath(path) if isinstance(path, os.PathLike) else path)
        if isinstance(path, str | os.PathLike):
            return _file_place(path)
        return None

    def _static(self, obj: Any, name: str) -> Any:
        """``obj.name`` when the instance or its class defines it (never a proxy's
        ``__getattr__``), else None."""
        try:
            found = name in object.__getattribute__(obj, "__dict__")
        except (AttributeError, TypeError):
            found = False
        if not found and not any(name in vars(c) for c in type(obj).__mro__):
            return None
        try:
            return getattr(obj, name)
        except Exception:  # a closed file, a property that fails: not a reader we see
            return None

    def _made(self, obj: Any) -> None:
        """Look into an object made during the walk (kept alive: its id stays unique)."""
        self.keep.append(obj)
        self.stack.append(obj)

    def _ndarray(self, arr: np.ndarray) -> None:
        if type(arr) is np.ndarray and arr.base is None:
            return
        for _ in range(8):  # a view of a view... of a memmap
            if isinstance(arr, np.memmap):
                filename = getattr(arr, "filename", None)
                if filename is not None:
                    self._place(arr, _file_place(filename), filename)
                return
            arr = arr.base
            if not isinstance(arr, np.ndarray):
                return

    def _reader(self, obj: Any) -> bool:
        """Resolve a handle that reads a place; True when it is one (compared)."""
        if is_array(obj):
            if overlaps(obj.store, obj.path, self.store, self.path):
                self._hit(obj, f"{obj.path or '/'!r} of {obj.store!r}")
            return True
        if isinstance(obj, Store):
            return self._store_place(obj, obj, "")
        if isinstance(obj, os.PathLike):
            return self._place(obj, _file_place(obj), os.fspath(obj))
        if isinstance(obj, io.IOBase):
            name = getattr(obj, "name", None)
            if isinstance(name, str):
                return self._place(obj, _file_place(name), name)
            return False
        store, path = self._static(obj, "store"), self._static(obj, "path")
        if store is not None and isinstance(path, str):  # zarr-python-like arrays, groups
            if self._store_place(obj, store, path):
                return True
        filename = self._static(obj, "filename")  # h5py files, netCDF-like...
        if not isinstance(filename, str | os.PathLike):
            filename = self._static(self._static(obj, "file"), "filename")  # h5py datasets
        if isinstance(filename, str | os.PathLike):
            return self._place(obj, _file_place(filename), os.fspath(filename))
        fs = self._static(obj, "fs")  # fsspec-based stores of other libraries
        if fs is not None and isinstance(path, str):
            return self._place(obj, _fs_place(fs, path), path)
        return False

    def _function(self, f: types.FunctionType) -> None:
        push, extend = self.stack.append, self.stack.extend
        for cell in f.__closure__ or ():
            try:
                push(cell.cell_contents)
            except ValueError:  # an empty cell
                pass
        extend(f.__defaults__ or ())
        extend((f.__kwdefaults__ or {}).values())
        extend(vars(f).values())  # __wrapped__ of decorators...
        code = f.__code__
        if self._is_library_file(code.co_filename):
            return
        names = self._code_names(code)
        env = f.__globals__
        for name in names:
            value = env.get(name)
            if isinstance(value, types.ModuleType):
                if not self._is_library_file(getattr(value, "__file__", None) or ""):
                    extend(vars(value)[n] for n in names if n in vars(value))
            elif value is not None:
                push(value)

    def _code_names(self, code: types.CodeType) -> tuple[str, ...]:
        names = self.names.get(code)
        if names is None:
            found = set(code.co_names)
            for const in code.co_consts:
                if isinstance(const, types.CodeType):
                    found.update(self._code_names(const))
            names = self.names[code] = tuple(found)
        return names

    def _is_library_file(self, filename: str) -> bool:
        known = self.library.get(filename)
        if known is None:
            known = filename.startswith(_LIBRARY_ROOTS) or filename.startswith("<frozen")
            self.library[filename] = known
        return known

    def _is_library_class(self, cls: type) -> bool:
        """A class of an installed library or of a built-in module (not ``__main__``)."""
        known = self.library.get(cls)
        if known is None:
            module = sys.modules.get(getattr(cls, "__module__", None) or "")
            filename = getattr(module, "__file__", None)
            if module is None or module.__name__ == "__main__":
                known = False
            elif isinstance(filename, str):
                known = self._is_library_file(filename)
            else:
                known = True  # a built-in module (builtins, _thread...)
            self.library[cls] = known
        return known

    def _class(self, cls: type) -> None:
        """A class defined outside installed libraries: its functions and data (a
        method may name a global, a class attribute may be a handle)."""
        if self._is_library_class(cls):
            return
        for name, value in vars(cls).items():
            if name in _CLASS_TEXT:
                continue
            if isinstance(value, staticmethod | classmethod):
                self.stack.append(value.__func__)
            elif isinstance(value, property):
                self.stack.extend((value.fget, value.fset, value.fdel))
            else:
                self.stack.append(value)
        self.stack.extend(c for c in cls.__mro__[1:] if c is not object)

    def _object(self, obj: Any, t: type) -> None:
        """Anything else: its attributes and slots, its class, its dask graph; a callable
        of an extension type without them through ``__reduce_ex__``."""
        push, extend = self.stack.append, self.stack.extend
        try:
            attrs = object.__getattribute__(obj, "__dict__")
        except (AttributeError, TypeError):
            attrs = None
        if isinstance(attrs, dict):
            extend(attrs.values())
        slots = self.slots.get(t)
        if slots is None:
            slots = self.slots[t] = tuple(
                s for c in t.__mro__ for s in ([c.__dict__["__slots__"]]
                                               if isinstance(c.__dict__.get("__slots__"), str)
                                               else c.__dict__.get("__slots__", ()))
                if s not in ("__dict__", "__weakref__"))
        for name in slots:
            try:
                push(object.__getattribute__(obj, name))
            except AttributeError:
                pass
        if callable(getattr(t, "__dask_graph__", None)):
            try:
                self._made(obj.__dask_graph__())
            except Exception as e:  # noqa: BLE001 - any failure: the graph is not seen
                self.unknown = self.unknown or f"the dask graph of a {t.__name__}: {e}"
        if not self._is_library_class(t):
            push(t)
        if attrs is None and not slots and callable(obj):
            self._reduced(obj, t)

    def _reduced(self, obj: Any, t: type) -> None:
        try:
            reduced = obj.__reduce_ex__(4)
        except Exception:  # noqa: BLE001 - cannot be pickled: cannot be looked into
            reduced = None
        if not isinstance(reduced, tuple):
            self.unknown = self.unknown or (f"a callable {t.__module__}.{t.__qualname__} "
                                            "holds state that cannot be looked into")
            return
        self._made(reduced[:3])
