"""The house as a DAG (issue 25): the imports between our own modules form no cycle, and no
function of ``compute/`` or ``dashboard/`` imports one of our modules in its body (a lazy
import hides a cycle rather than removing it).

The graph is read from the source with ``ast``: an edge A -> B for every ``import`` of
module B in A, ``from`` imports resolved to the module they name (``from .. import ids``
is an edge to ``dashboard.ids``; ``from ..planning import TaskSpec`` one to
``dashboard.planning``). The registry's discovery of view modules by name
(``importlib.import_module``) is not an edge: a view module is a leaf the registry finds.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("compute", "dashboard")


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _imports(name: str, tree: ast.AST) -> list[tuple[ast.stmt, str]]:
    """(statement, our module it imports) for every import statement in the tree."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node, alias.name) for alias in node.names if alias.name.split(".")[0] in PACKAGES]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if _is_package(name) else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] not in PACKAGES:
                continue
            for alias in node.names:  # `from pkg import module` names a module; else the name is in pkg
                sub = f"{target}.{alias.name}"
                found.append((node, sub if sub in MODULES else target))
    return found


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        graph[name] = {target for _, target in _imports(name, tree) if target in MODULES and target != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_helpers_see_a_cycle_and_a_lazy_import():
    """The checks below would catch what they look for: a cycle of three, and an import of
    ours inside a function (relative and absolute), but not a third-party one."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
    tree = ast.parse("def f():\n    from .store import Store\n    import compute\n    import numpy\n")
    assert [t for _, t in _imports("dashboard.jobs", tree)] == ["dashboard.store", "compute"]
    assert [t for _, t in _imports("dashboard.views", ast.parse("from .base import View"))] == ["dashboard.views.base"]
    assert [t for _, t in _imports("dashboard.views.pfi", ast.parse("from .. import ids"))] == ["dashboard.ids"]


def test_our_imports_form_a_dag():
    graph = _graph()
    assert len(graph) > 60 and graph["dashboard.server"], "the import graph was not read"
    assert _cycles(graph) == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_function_imports_our_modules(name):
    """Our modules are imported at the top of a module, where the import graph shows them
    (third-party imports in a function are allowed: scikit-learn, the booster libraries and
    ONNX Runtime load only where a job needs them)."""
    tree = ast.parse(MODULES[name].read_text())
    inside = []
    for func in ast.walk(tree):
        if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside += [f"line {node.lineno} in {func.name}(): {target}" for node, target in _imports(name, func)]
    assert inside == []


def _wide_returns(tree: ast.AST) -> list[str]:
    """``return a, b, c`` (a tuple literal of more than two values) in a function, or a
    lambda whose value is one."""
    found = []
    for func in ast.walk(tree):
        if isinstance(func, ast.Lambda):
            values = [(func.lineno, func.body)]
        elif isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            values = [(node.lineno, node.value) for node in ast.walk(func) if isinstance(node, ast.Return)]
        else:
            continue
        for lineno, value in values:
            if isinstance(value, ast.Tuple) and len(value.elts) > 2:
                found.append(f"line {lineno} in {getattr(func, 'name', 'lambda')}()")
    return sorted(set(found))


def test_the_wide_return_check_sees_one():
    assert _wide_returns(ast.parse("def f():\n    return 1, 2, 3\n")) == ["line 2 in f()"]
    assert _wide_returns(ast.parse("g = lambda a: (a, 1, {})\n")) == ["line 1 in lambda()"]
    assert _wide_returns(ast.parse("def f():\n    return 1, (2, 3)\n")) == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_results_of_more_than_two_values_are_named(name):
    """A function returns at most a pair; more values come as a dataclass (or a dict of
    named outputs), so no caller unpacks a result by position."""
    assert _wide_returns(ast.parse(MODULES[name].read_text())) == []


LONG_MODULE = 600
LONG_ALLOWED = {"dashboard.model_trust"}  # the skops allow-list: a table, read as one


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.startswith("dashboard")))
def test_dashboard_modules_stay_readable(name):
    """No module of the dashboard is over 600 lines (the skops allow-list aside): a family of
    figures, the HTTP guard, a file-format reader each have their own."""
    lines = len(MODULES[name].read_text().splitlines())
    assert name in LONG_ALLOWED or lines <= LONG_MODULE, f"{name}: {lines} lines"


def test_no_test_helper_shadows_a_standard_library_module():
    """Scripts in tests/helpers run with that folder first on sys.path: a helper named like a
    standard module (numbers.py once) replaced it, and every booster fixture failed."""
    import sys
    from pathlib import Path

    folder = Path(__file__).resolve().parent / "helpers"
    shadowing = sorted(p.name for p in folder.glob("*.py") if p.stem in sys.stdlib_module_names)
    assert not shadowing, shadowing
