"""The package's import graph has no cycles (issue 10): every ``import`` of every module,
module-level or inside a function (a function-local import does not remove a cycle, it
hides it), resolving relative imports; ``from . import x`` of a submodule is an edge to
it, and importing ``a.b.c`` runs the ``__init__`` of ``a.b`` too (an edge to it, unless
it is a package containing the importer, which is always initialised first). Imports
under ``if TYPE_CHECKING:`` never run and are not edges of that graph; they make no cycle
either (``test_no_import_cycles_for_type_checkers``): a module that needs only part of
a class above it describes that part with a Protocol (e.g. ``array.copy.Target``)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import chunkstore

ROOT = Path(chunkstore.__file__).parent
PACKAGE = "chunkstore"

# Known cycles owned by another change, as (importer, imported) edges to skip, each to be
# removed by its owner when fixed. Empty: array <-> copying went with the io/ rewrite.
KNOWN_EDGES: set[tuple[str, str]] = set()


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in ROOT.rglob("*.py")}


@functools.cache
def _tree(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once per session (every test walks them all)."""
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _is_package(name: str, modules: dict[str, Path]) -> bool:
    return name in modules and modules[name].name == "__init__.py"


def _resolve(importer: str, modules: dict[str, Path], level: int, module: str | None) -> str:
    """The absolute name of ``from <level dots><module> import ...`` in ``importer``."""
    if level == 0:
        return module or ""
    base = importer.split(".")
    if not _is_package(importer, modules):
        base = base[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _targets(importer: str, name: str, modules: dict[str, Path]) -> set[str]:
    """``name`` and the packages above it that importing it initialises (not the root
    package, nor packages containing the importer: those are initialised first)."""
    out = set()
    parts = name.split(".")
    for i in range(2, len(parts) + 1):
        prefix = ".".join(parts[:i])
        if prefix in modules and not importer.startswith(prefix + "."):
            out.add(prefix)
    return out


def _is_type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _imports(tree: ast.AST, type_checking: bool = False):
    """Every Import/ImportFrom node, except under ``if TYPE_CHECKING:`` (unless
    ``type_checking``)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        for child in ast.iter_child_nodes(node):
            if type_checking or not _is_type_checking(child):
                todo.append(child)
            else:
                todo.extend(child.orelse)  # type: ignore[attr-defined]


@functools.cache
def import_graph(type_checking: bool = False) -> dict[str, frozenset[str]]:
    """module -> the package modules it imports (anywhere in its body; with
    ``type_checking``, under ``if TYPE_CHECKING:`` too); built once per session (six tests
    read it), so frozen."""
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        tree = _tree(path)
        for node in _imports(tree, type_checking):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == PACKAGE:
                        graph[name] |= _targets(name, alias.name, modules)
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(name, modules, node.level, node.module)
                if base.split(".")[0] != PACKAGE:
                    continue
                graph[name] |= _targets(name, base, modules)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    if sub in modules:  # ``from . import indexing``: the submodule
                        graph[name] |= _targets(name, sub, modules)
                    elif base in modules:  # a name the body of ``base`` defines: an
                        graph[name].add(base)  # edge even to a package above the importer
        graph[name].discard(name)
    return {name: frozenset(targets) for name, targets in graph.items()}


def find_cycle(graph: dict[str, set[str]] | dict[str, frozenset[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a list of modules (first == last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if (node, nxt) in KNOWN_EDGES:
                continue
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_no_import_cycles():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_import_cycles_for_type_checkers():
    """Imports under ``if TYPE_CHECKING:`` make no cycle either: a cycle that only type
    checkers follow still ties a module to one above it."""
    cycle = find_cycle(import_graph(type_checking=True))
    assert cycle is None, "import cycle under TYPE_CHECKING: " + " -> ".join(cycle or [])


def test_the_checker_sees_function_local_and_package_edges():
    graph = {"a": {"b"}, "b": {"a"}}
    assert find_cycle(graph) == ["a", "b", "a"]
    real = import_graph()
    assert "chunkstore.nodes.documents" in real["chunkstore.array.array"]
    assert "chunkstore.array" in real["chunkstore.group.group"]
    # ``from chunkstore import __version__``: the root package's body runs first
    assert "chunkstore" in real["chunkstore.cli.main"]
    # ``from chunkstore import indexing``: the submodule, not the root
    assert "chunkstore" not in real["chunkstore.array.array"]


# The only package modules imported inside a function, each for the optional package it
# imports when imported (so that ``import chunkstore`` and the CLI's parser do not need
# it). Any other function-level import of a package module would hide a cycle or a
# dependency: import it at the top instead.
DEFERRED = {"chunkstore.dask": "dask", "chunkstore.cli.cluster": "distributed"}


def _function_level_imports(tree: ast.AST):
    """The Import/ImportFrom nodes inside a function body (not under TYPE_CHECKING)."""
    seen: set[int] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in _imports(fn):
                if id(node) not in seen:
                    seen.add(id(node))
                    yield node


def function_level_imports() -> dict[str, set[str]]:
    """module -> the package modules it imports inside a function (``from X import y``:
    X)."""
    modules = _modules()
    out: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = _tree(path)
        for node in _function_level_imports(tree):
            if isinstance(node, ast.Import):
                bases = [alias.name for alias in node.names]
            else:
                bases = [_resolve(name, modules, node.level, node.module)]
            for base in bases:
                if base.split(".")[0] == PACKAGE:
                    out.setdefault(name, set()).add(base)
    return out


def test_function_level_imports_only_defer_optional_packages():
    found = function_level_imports()
    deferred = {target for targets in found.values() for target in targets}
    assert deferred - set(DEFERRED) == set(), found
    assert set(DEFERRED) - deferred == set(), "no longer deferred: remove from DEFERRED"


def test_deferred_modules_import_their_optional_package():
    """Each of DEFERRED imports its optional package, which ``import chunkstore`` and the
    CLI do not: the reason it is imported inside functions holds."""
    import subprocess
    import sys
    code = "\n".join([
        "import importlib, sys", "import chunkstore, chunkstore.cli.main",
        f"deferred = {DEFERRED!r}",
        "assert not [p for p in deferred.values() if p in sys.modules], sys.modules.keys()",
        "for module, package in deferred.items():",
        "    importlib.import_module(module)",
        "    assert package in sys.modules, (module, package)",
    ])
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT.parent, timeout=300)
    assert done.returncode == 0, done.stderr


# The layers, top to bottom (DESIGN.md "Layers"): a unit imports only units below it.
# ``testing`` (test support: the store contract suite) sits on top: it tests the stores.
# ``rechunk`` sits above ``io``: its memory model adds up the engine's own description of
# its buffers (``io.buffers``), not a copy of it (issue 31).
LAYERS = [
    ["__main__", "testing"], ["cli"], ["xarray_backend", "xarray_io"], ["dask"], ["api"],
    ["group"], ["array"], ["nodes"], ["rechunk"], ["io"], ["indexing"], ["grid"], ["codecs"],
    ["metadata"], ["storage"], ["runtime"], ["config"], ["progress"], ["sizes"], ["errors"],
]
RANK = {unit: i for i, row in enumerate(LAYERS) for unit in row}
# What the dask layer may use (issue 31: a thin executor over public primitives; workers
# set the map-cache bound through the runtime, ``runtime.set_map_bytes``).
DASK_USES = {"api", "array", "group", "rechunk", "runtime", "errors", "sizes", "progress"}
# Upward edges owned by work under way, each removed by its owner when fixed.
KNOWN_UPWARD: set[tuple[str, str]] = set()
KNOWN_DASK: set[str] = set()


@functools.cache
def unit_graph() -> dict[str, frozenset[str]]:
    """The import graph between the package's units (subpackages and top-level modules),
    built once per session."""
    out: dict[str, set[str]] = {}
    for name, targets in import_graph().items():
        src = _unit(name)
        out.setdefault(src, set()).update(_unit(t) for t in targets if _unit(t) != src)
    out.pop("", None)
    return {src: frozenset(targets - {""}) for src, targets in out.items()}


def _unit(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_unit_has_a_layer():
    assert set(unit_graph()) - set(RANK) == set()


def test_layers_point_downwards():
    upward = {(src, dst) for src, targets in unit_graph().items() for dst in targets
              if RANK[dst] <= RANK[src]}
    assert upward - KNOWN_UPWARD == set()
    assert KNOWN_UPWARD - upward == set(), "fixed: remove from KNOWN_UPWARD"


def test_the_dask_layer_uses_only_public_layers():
    used = unit_graph()["dask"]
    assert used - DASK_USES - KNOWN_DASK == set()
    assert KNOWN_DASK - (used - DASK_USES) == set(), "fixed: remove from KNOWN_DASK"


def test_metadata_does_no_io():
    for name, targets in import_graph().items():
        if name.startswith("chunkstore.metadata"):
            assert not any(t.startswith(("chunkstore.nodes", "chunkstore.io",
                                         "chunkstore.storage", "chunkstore.array",
                                         "chunkstore.api")) for t in targets), (name, targets)


def test_rechunk_is_pure_planning():
    """``rechunk/`` plans without Dask (issue 31): no module of it imports dask or
    distributed, even inside a function; the Dask layer passes in what it needs."""
    for path in (ROOT / "rechunk").rglob("*.py"):
        tree = _tree(path)
        for node in _imports(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) \
                else [node.module or ""]
            assert not any(n.split(".")[0] in ("dask", "distributed") for n in names), path
