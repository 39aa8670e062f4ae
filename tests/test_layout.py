"""The house's layout, read from the code's own imports.

- Every import of a blksim room names the package (``blksim.sim``, never a bare
  ``sim``), so the code imports the same way from a clone, an editable install
  and a wheel.
- The lower rooms (schedulers, disk_models, traces) import nothing from the
  command line or experiments, and from the engine only the data types every
  room shares (bios and requests, the dispatch list).
- Nothing but the command line itself (and ``python -m blksim``) imports the
  command line.
- No two modules import each other, directly or round a longer circle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ROOMS = ("sim", "schedulers", "disk_models", "traces", "experiments")
LOWER = ("schedulers", "disk_models", "traces")
SHARED_TYPES = {"blksim.sim.request", "blksim.sim.dispatch_queue"}


def _package_modules() -> dict[str, Path]:
    """Every module of the package, by dotted name."""
    mods = {"blksim": ROOT / "__init__.py", "blksim.__main__": ROOT / "__main__.py",
            "blksim._compat": ROOT / "_compat.py"}
    for room in ROOMS:
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


@pytest.mark.parametrize("room", LOWER)
def test_lower_rooms_import_no_engine_cli_or_experiments(room):
    bad = []
    for name, path in MODULES.items():
        if not name.startswith(f"blksim.{room}"):
            continue
        for line, mod in _imports(path):
            if mod.startswith(("blksim.sim", "blksim.experiments")) and mod not in SHARED_TYPES \
                    and mod != "blksim.sim":
                bad.append(f"{path.relative_to(ROOT)}:{line}: {mod}")
    assert not bad, "\n".join(bad)


def test_only_the_command_line_imports_the_command_line():
    bad = [f"{path.relative_to(ROOT)}:{line}: {mod}"
           for name, path in MODULES.items()
           if not name.startswith("blksim.sim.cli") and name != "blksim.__main__"
           for line, mod in _imports(path) if mod.startswith("blksim.sim.cli")]
    assert not bad, "\n".join(bad)


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
