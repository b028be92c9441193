"""No mutable module-level state outside ``chunkstore/runtime/`` and ``chunkstore/config.py``
(issue 31): the process's state lives on the Runtime (``chunkstore.runtime.current()``,
its own slots and the parts the layers above keep there).

Walked with ``ast`` over every module of the package:

* a ``global`` statement is state (it rebinds a module name at run time), and so is
  a call of ``globals()``;
* so is ``os.register_at_fork`` outside runtime/ (what must be reset after a fork is
  state: the Runtime is re-made in the child instead);
* a module-level name bound to a list, dict or set (literal or comprehension) is a
  constant only when it is spelled as one (``UPPER_CASE``) and nothing in the package
  mutates it (item assignment or deletion, augmented assignment, a mutating method);
* a module-level function memoized by ``functools.cache`` / ``lru_cache`` keeps what it
  returned (a store, a client...): state, unless listed in :data:`PURE_MEMOS` (a pure
  function of immutable arguments, or a fact of the installed software);
* a module-level name bound to a call: a call of a class makes an instance, state
  unless it is immutable (checked on the imported value: a frozen dataclass, an object of
  ``__slots__`` holding immutable values, such as a sentinel, or one of the immutable
  types below); a call of a function makes
  a constant only when the name is spelled as one, is not mutated, and the value is not
  of a mutable kind (checked on the imported value too).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import logging
import re
import struct
import types
import typing
from pathlib import Path

import numpy as np
import pytest

import chunkstore

ROOT = Path(chunkstore.__file__).parent
EXEMPT = ("runtime/", "config.py")
MUTATORS = {"append", "extend", "insert", "add", "update", "setdefault", "pop", "popitem",
            "clear", "remove", "discard", "sort", "reverse", "__setitem__", "__delitem__",
            "difference_update", "intersection_update", "symmetric_difference_update"}
IMMUTABLE = (int, float, complex, str, bytes, bool, type(None), tuple, frozenset, range,
             re.Pattern, struct.Struct, np.dtype, np.generic, logging.Logger, typing.TypeVar,
             types.MappingProxyType, type, types.FunctionType, types.BuiltinFunctionType)
CONSTANT = re.compile(r"_*[A-Z][A-Z0-9_]*")
# State owned by work under way elsewhere, each removed by its owner when moved.
KNOWN: set[tuple[str, str]] = set()
# Registries of types that declarations fill as their modules are imported (a decorator):
# what the program is, not run-time state, so a Runtime reset must not forget them.
REGISTRIES: set[tuple[str, str]] = {("codecs/registry.py", "NATIVE_CODECS")}
# Memoized functions whose cache is no state: pure functions of immutable arguments, or
# what the installed software supports (the same for the life of the process).
PURE_MEMOS: set[tuple[str, str]] = {
    ("codecs/scalars.py", "_bounds"),  # a dtype's integer range
    ("codecs/pipeline.py", "_takes_limit"),  # whether a codec class's decode takes a limit
    ("storage/s3_conditional.py", "conditional_requests_supported"),  # installed botocore
    ("dask/memory.py", "_plugin_class"),  # the one WorkerPlugin class of installed distributed
}
MEMOIZERS = {"cache", "lru_cache", "cached"}


def _modules() -> dict[str, ast.Module]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        out[rel] = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return out


def _module_body(tree: ast.Module):
    """Module-level statements, including those inside module-level if/try blocks."""
    todo = list(tree.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, ast.If | ast.Try):
            todo[:0] = [*node.body, *node.orelse, *getattr(node, "finalbody", []),
                        *[s for h in getattr(node, "handlers", []) for s in h.body]]
        else:
            yield node


def _callee(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _mutated_names(trees: dict[str, ast.Module]) -> set[str]:
    """Every name (or attribute name) something in the package mutates in place."""
    out: set[str] = set()

    def base(node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute):
            return node.attr
        return None

    for tree in trees.values():
        for node in ast.walk(tree):
            targets: list[ast.AST] = []
            if isinstance(node, ast.Assign | ast.Delete):
                targets = list(node.targets)
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            for t in targets:
                if isinstance(t, ast.Subscript) and base(t.value):
                    out.add(base(t.value))
                if isinstance(node, ast.AugAssign) and base(t):
                    out.add(base(t))
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in MUTATORS and base(node.func.value)):
                out.add(base(node.func.value))
    return out


def _is_immutable(value: object) -> bool:
    if isinstance(value, tuple | frozenset):
        return all(_is_immutable(v) for v in value)
    if isinstance(value, IMMUTABLE):
        return True
    kind = type(value)
    params = getattr(kind, "__dataclass_params__", None)
    if params is not None and params.frozen:
        return True
    if hasattr(value, "__dict__") or not any("__slots__" in vars(k) for k in kind.__mro__[:-1]):
        return False
    slots = [n for k in kind.__mro__[:-1] for n in vars(k).get("__slots__", ())]
    return all(_is_immutable(getattr(value, n, None)) for n in slots)  # (a sentinel's name)


def _value(rel: str, name: str) -> object:
    module = "chunkstore." + rel[:-3].replace("/", ".").removesuffix(".__init__")
    return getattr(importlib.import_module(module), name)


def module_state(trees: dict[str, ast.Module]) -> list[tuple[str, str, int, str]]:
    """(module path, name, line, why) of every piece of module-level state found."""
    mutated = _mutated_names(trees)
    found = []
    for rel, tree in trees.items():
        if rel.startswith(EXEMPT):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Global):
                found += [(rel, n, node.lineno, "global statement") for n in node.names]
            if isinstance(node, ast.Call) and _callee(node) == "register_at_fork":
                found.append((rel, "register_at_fork", node.lineno,
                              "fork handling outside the Runtime"))
            if isinstance(node, ast.Call) and _callee(node) == "globals":
                found.append((rel, "globals", node.lineno,
                              "globals() binds module names at run time"))
        for node in _module_body(tree):
            if isinstance(node, ast.FunctionDef) and (rel, node.name) not in PURE_MEMOS:
                for d in node.decorator_list:
                    d = d.func if isinstance(d, ast.Call) else d
                    name = d.id if isinstance(d, ast.Name) else getattr(d, "attr", "")
                    if name in MEMOIZERS:
                        found.append((rel, node.name, node.lineno, f"memoized by {name}"))
            if isinstance(node, ast.Assign):
                names, value = [t.id for t in node.targets if isinstance(t, ast.Name)], node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                names = [node.target.id] if isinstance(node.target, ast.Name) else []
                value = node.value
            else:
                continue
            for name in names:
                if name == "__all__":
                    continue
                constant = bool(CONSTANT.fullmatch(name)) and name not in mutated
                if isinstance(value, ast.List | ast.Dict | ast.Set | ast.ListComp
                              | ast.DictComp | ast.SetComp):
                    if not constant:
                        found.append((rel, name, node.lineno, "a mutable container"))
                elif isinstance(value, ast.Call):
                    callee = _callee(value)
                    made = _value(rel, name)
                    if callee.lstrip("_")[:1].isupper() or not constant:
                        if not _is_immutable(made):
                            found.append((rel, name, node.lineno,
                                          f"a {type(made).__name__} made at import"))
                    elif isinstance(made, list | dict | set | bytearray):
                        found.append((rel, name, node.lineno, "a mutable container"))
    return found


TREES = _modules()


def test_no_module_level_state_outside_the_runtime():
    state = [s for s in module_state(TREES) if (s[0], s[1]) not in KNOWN | REGISTRIES]
    assert state == [], "\n".join(f"{rel}:{line} {name}: {why}"
                                  for rel, name, line, why in state)


def test_known_state_is_still_there():
    left = {(s[0], s[1]) for s in module_state(TREES)}
    assert (KNOWN | REGISTRIES) - left == set(), "moved: remove from KNOWN / REGISTRIES"


@pytest.mark.parametrize("source, name", [
    ("_cache = {}\n", "_cache"),
    ("import threading\n_local = threading.local()\n", "_local"),
    ("import threading\n_lock = threading.Lock()\n", "_lock"),
    ("TABLE = {}\ndef f():\n    TABLE['a'] = 1\n", "TABLE"),
    ("SEEN = set()\ndef f(x):\n    SEEN.add(x)\n", "SEEN"),
    ("n = 0\ndef f():\n    global n\n    n += 1\n", "n"),
    ("import os\nos.register_at_fork(after_in_child=print)\n", "register_at_fork"),
    ("def f():\n    globals()['_made'] = 1\n", "globals"),
    ("class _Pool:\n    pass\n_POOL = _Pool()\n", "_POOL"),
    ("import functools\n@functools.lru_cache(maxsize=8)\ndef store(p):\n    return [p]\n",
     "store"),
    ("class _Named:\n    __slots__ = ('names',)\n    def __init__(self):\n"
     "        self.names = []\nNAMED = _Named()\n", "NAMED"),
])
def test_the_checker_finds_state(source, name, monkeypatch):
    import sys
    module = types.ModuleType("chunkstore._probe_state")
    monkeypatch.setitem(sys.modules, "chunkstore._probe_state", module)
    exec(compile(source, "probe", "exec"), module.__dict__)
    found = module_state({"_probe_state.py": ast.parse(source)})
    assert name in {s[1] for s in found}


def test_the_checker_allows_constants(monkeypatch):
    import sys
    source = ("import re\nimport dataclasses\nUNITS = {'k': 1000}\nNAMES = frozenset({'a'})\n"
              "PATTERN = re.compile('x')\n@dataclasses.dataclass(frozen=True)\nclass P:\n"
              "    x: int\nORIGIN = P(0)\n")
    module = types.ModuleType("chunkstore._probe_const")
    monkeypatch.setitem(sys.modules, "chunkstore._probe_const", module)
    exec(compile(source, "probe", "exec"), module.__dict__)
    assert module_state({"_probe_const.py": ast.parse(source)}) == []
    assert dataclasses.is_dataclass(module.P)
