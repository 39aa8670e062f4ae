"""The house's layout, read from the code's own imports (docs/architecture.md).

- Every import of a blksim room names the package (``blksim.block``, never a bare
  ``block``), so the code imports the same way from a clone, an editable install
  and a wheel.
- The rooms stand on each other in one order (``LEVELS``, lowest first): a module
  imports only from its own room and the rooms below it; the three rooms of the
  devices, the elevators and the traces share a floor and may use each other.
- No module reads or writes a private name (``x._name``) that only another room
  defines, nor imports one.
- No two modules import each other, directly or round a longer circle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# room -> floor; a module may import its own room and any room on a lower floor (or the
# same floor, for the three lower rooms that share one).
LEVELS = {
    "blksim._compat": 0, "blksim.common": 0,
    "blksim.block": 1,
    "blksim.schedulers": 2, "blksim.disk_models": 2, "blksim.traces": 2,
    "blksim.hostio": 3,
    "blksim.apps": 4,
    "blksim.sim": 5,
    "blksim.api": 6,
    "blksim.experiments": 7,
    "blksim.cli": 8, "blksim.__main__": 9,
}
ROOMS = tuple(r.split(".")[1] for r in LEVELS if not r.split(".")[1].startswith("_"))
SHARED_FLOOR = 2


def _package_modules() -> dict[str, Path]:
    """Every module of the package, by dotted name."""
    mods = {"blksim": ROOT / "__init__.py", "blksim.__main__": ROOT / "__main__.py",
            "blksim._compat": ROOT / "_compat.py"}
    for room in ROOMS:
        if (ROOT / f"{room}.py").exists():
            mods[f"blksim.{room}"] = ROOT / f"{room}.py"
            continue
        for path in (ROOT / room).rglob("*.py"):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = ["blksim", *rel.parts]
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join(parts)] = path
    return mods


MODULES = _package_modules()


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, dotted module) of every import in ``path``, at any depth."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
            # `from blksim.x import y` may import the submodule blksim.x.y
            out.extend((node.lineno, f"{node.module}.{a.name}") for a in node.names
                       if f"{node.module}.{a.name}" in MODULES)
    return out


def _blksim_deps(name: str) -> set[str]:
    return {m for _, m in _imports(MODULES[name]) if m in MODULES and m != name}


def test_every_import_of_a_room_names_the_package():
    files = [*MODULES.values(), *ROOT.glob("tests/*.py"), *ROOT.glob("benchmarks/*.py")]
    bare = [f"{p.relative_to(ROOT)}:{line}: import {mod}"
            for p in files for line, mod in _imports(p) if mod.split(".")[0] in ROOMS]
    assert not bare, "\n".join(bare)


def room_of(module: str) -> str | None:
    """The room (a key of LEVELS) a dotted blksim module belongs to."""
    for room in LEVELS:
        if module == room or module.startswith(room + "."):
            return room
    return None


def _upward(name: str, mod: str) -> bool:
    """Whether module ``name`` importing ``mod`` goes up (or across a floor)."""
    src, dst = room_of(name), room_of(mod)
    if src is None or dst is None or src == dst:
        return False
    if LEVELS[dst] < LEVELS[src]:
        return False
    return not (LEVELS[dst] == LEVELS[src] == SHARED_FLOOR)


def test_every_module_belongs_to_a_room():
    lost = [n for n in MODULES if n not in ("blksim",) and room_of(n) is None]
    assert not lost, lost


def test_no_room_imports_a_room_above_it():
    bad = [f"{path.relative_to(ROOT)}:{line}: {mod}"
           for name, path in MODULES.items() if name != "blksim"
           for line, mod in _imports(path) if mod in MODULES and _upward(name, mod)]
    assert not bad, "\n".join(bad)


def test_the_floor_rule_catches_an_upward_import():
    assert _upward("blksim.block.request", "blksim.sim.engine")
    assert _upward("blksim.schedulers.cfq", "blksim.hostio.fileio")
    assert not _upward("blksim.schedulers.cfq", "blksim.block.request")
    assert not _upward("blksim.disk_models.drive", "blksim.traces.records")
    assert not _upward("blksim.cli.app", "blksim.experiments.heads")


def _private_names_defined(tree: ast.AST) -> set[str]:
    """Private names a module defines: functions, classes, attributes it assigns."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def private_reaches(sources: dict[str, str] | None = None) -> list[str]:
    """Every ``x._name`` (x not self or cls) and ``from M import _name`` in a module whose
    own room does not define ``_name`` while another room does. ``sources``: dotted
    module name -> its code (default: the package's modules)."""
    if sources is None:
        sources = {name: path.read_text(encoding="utf-8") for name, path in MODULES.items()}
    trees = {name: ast.parse(code) for name, code in sources.items()}
    defined: dict[str, set[str]] = {}
    for name, tree in trees.items():
        defined.setdefault(room_of(name) or "blksim", set()).update(_private_names_defined(tree))
    bad = []
    for name, tree in trees.items():
        room = room_of(name) or "blksim"
        own = defined[room]
        others = set().union(*(v for k, v in defined.items() if k != room))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                    and not node.attr.startswith("__") \
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                if node.attr not in own and node.attr in others:
                    bad.append(f"{name}:{node.lineno}: .{node.attr}")
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("blksim") \
                    and room_of(node.module) != room:
                bad.extend(f"{name}:{node.lineno}: {node.module}.{a.name}"
                           for a in node.names if a.name.startswith("_") and not a.name.startswith("__"))
    return bad


def test_no_module_reaches_into_another_rooms_private_names():
    bad = private_reaches()
    assert not bad, "\n".join(bad)


def test_the_private_name_rule_catches_a_reach_and_an_import():
    sources = {
        "blksim.block.legacy_queue": "class Q:\n    def _add(self):\n        self._count = 1\n",
        "blksim.traces.recorder": "def tap(q):\n    q._add = None\n    return q._count\n",
        "blksim.sim.engine": "from blksim.block.legacy_queue import _helper\n",
        "blksim.sim.host": "def f(q):\n    return q._own\nclass H:\n    def _own(self):\n        pass\n",
    }
    assert private_reaches(sources) == [
        "blksim.traces.recorder:2: ._add", "blksim.traces.recorder:3: ._count",
        "blksim.sim.engine:1: blksim.block.legacy_queue._helper"]


def find_circles(graph: dict[str, set[str]]) -> list[str]:
    """Every circle a depth-first walk of ``graph`` (module -> modules it imports) meets."""
    state: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                circles.append(" -> ".join(stack[stack.index(dep):] + [dep]))
            elif dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return circles


def test_no_import_circles():
    graph = {name: _blksim_deps(name) for name in MODULES}
    # A package's __init__ may re-export its submodules; a submodule importing a name
    # from its own package's __init__ is not counted as the other half of a circle.
    for name in graph:
        graph[name] = {d for d in graph[name] if not name.startswith(d + ".")}
    circles = find_circles(graph)
    assert not circles, "\n".join(circles)


def test_the_circle_finder_finds_circles():
    assert find_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a -> b -> c -> a"]
    assert find_circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_tomllib_is_reached_through_the_compatibility_module():
    """``tomllib`` is 3.11's; blksim also runs on PyPy 3.9, where ``tomli`` stands in."""
    files = [*MODULES.values(), *ROOT.glob("tests/*.py"), *ROOT.glob("benchmarks/*.py")]
    direct = [f"{p.relative_to(ROOT)}:{line}" for p in files if p.name != "_compat.py"
              for line, mod in _imports(p) if mod in ("tomllib", "tomli")]
    assert not direct, "\n".join(direct)
