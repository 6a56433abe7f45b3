"""The daemon's rooms (its subpackages: sources, convert, stores, runtime, ...) depend one way.

Issue 39: no two rooms import each other, directly or around a longer loop of rooms, and no
module circle lives inside a room unless it is listed below with its reason. Every import
counts: at the top of a module, inside a function, and under ``TYPE_CHECKING`` (a type named
across a wall is a dependency as much as a call is; where only a type was needed, a protocol in
the lower room serves). A module at the top of the package (``errors``, ``models``,
``priority``) is a room of its own. Pure ``ast`` over ``daemon/``: nothing is imported.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

PACKAGE = "ragd.daemon"
ROOT = Path(__file__).resolve().parents[1] / "daemon"

# Module circles left inside a room on purpose: the modules -> why (one line). None now.
ALLOWED_CIRCLES: dict[frozenset[str], str] = {}

Edge = tuple[str, str, int]  # importer, imported, line


def modules(root: Path, package: str) -> dict[str, Path]:
    """Every module under ``root`` by its dotted name (a package by its ``__init__``)."""
    out: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join([package, *parts])] = path
    return out


def _known(name: str, known: Mapping[str, Path]) -> str | None:
    """``name``, or the nearest package above it that is one of ``known``."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(name: str, path: Path, known: Mapping[str, Path]) -> Iterator[tuple[str, int]]:
    """The modules of ``known`` that module ``name`` imports, anywhere in it, with the line."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    here = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = here
                for _ in range(node.level - 1):
                    up = up.rpartition(".")[0]
                base = f"{up}.{base}" if base else up
            # ``from pkg import mod`` imports the module; ``from pkg import name``, the package.
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                       for alias in node.names]
        else:
            continue
        for target in targets:
            found = _known(target, known)
            if found is not None and found != name:
                yield found, node.lineno


def import_graph(root: Path = ROOT, package: str = PACKAGE) -> list[Edge]:
    known = modules(root, package)
    return sorted({(name, target, line) for name, path in known.items()
                   for target, line in imports(name, path, known)})


def room(module: str, package: str = PACKAGE) -> str:
    """The subpackage a module lies in, or the module itself at the top of the package."""
    rel = module[len(package) + 1:] if module != package else "__init__"
    return rel.partition(".")[0]


def circles(edges: Iterable[tuple[str, str]]) -> list[set[str]]:
    """The strongly connected sets of more than one node (Tarjan)."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def room_loops(edges: list[Edge], package: str = PACKAGE) -> list[str]:
    """One message per loop of rooms, naming every module edge that makes it."""
    between = [(room(a, package), room(b, package), a, b, line) for a, b, line in edges
               if room(a, package) != room(b, package)]
    out = []
    for group in circles((ra, rb) for ra, rb, *_ in between):
        lines = [f"  {ra} -> {rb}: {a} -> {b} (line {line})"
                 for ra, rb, a, b, line in between if ra in group and rb in group]
        out.append(f"rooms {', '.join(sorted(group))} import each other:\n" + "\n".join(lines))
    return out


def module_circles(edges: list[Edge]) -> list[frozenset[str]]:
    return [frozenset(g) for g in circles((a, b) for a, b, _ in edges)]


@functools.cache
def daemon_graph() -> list[Edge]:
    return import_graph()


def test_no_two_rooms_import_each_other() -> None:
    loops = room_loops(daemon_graph())
    assert not loops, ("a room imports one that imports it back; move the shared part to "
                       "the lower room, or hand the upper one in:\n" + "\n".join(loops))


def test_no_module_circle_inside_a_room_but_the_listed_ones() -> None:
    edges = daemon_graph()
    found = module_circles(edges)
    new = [sorted(c) for c in found if c not in ALLOWED_CIRCLES]
    gone = [sorted(c) for c in ALLOWED_CIRCLES if c not in found]
    assert not new, "modules that import each other: " + "; ".join(
        ", ".join(c) + " [" + ", ".join(f"{a} -> {b}" for a, b, _ in edges
                                        if a in c and b in c) + "]" for c in new)
    assert not gone, f"no longer a circle, take it off ALLOWED_CIRCLES: {gone}"


def test_a_new_circle_is_caught(tmp_path: Path) -> None:
    """The checks themselves, on a small tree with a loop of rooms through a function's import
    and a circle inside a room through ``TYPE_CHECKING`` (the kinds they must not miss)."""
    files = {
        "__init__.py": "",
        "errors.py": "",
        "low/__init__.py": "",
        "low/parts.py": "from pkg import errors\n",
        "low/kind.py": "def f():\n    from pkg.high.registry import KINDS\n",
        "high/__init__.py": "",
        "high/registry.py": "from ..low import parts\nfrom pkg.low.kind import f\nKINDS = ()\n",
        "mid/__init__.py": "",
        "mid/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n",
        "mid/b.py": "from pkg.mid import a\nB = 1\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    edges = import_graph(tmp_path, "pkg")
    assert ("pkg.low.parts", "pkg.errors", 1) in edges
    [loop] = room_loops(edges, "pkg")
    assert loop.startswith("rooms high, low import each other:")
    assert "low -> high: pkg.low.kind -> pkg.high.registry (line 2)" in loop
    assert "high -> low: pkg.high.registry -> pkg.low.kind (line 2)" in loop
    assert sorted(map(sorted, module_circles(edges))) == [
        ["pkg.high.registry", "pkg.low.kind"], ["pkg.mid.a", "pkg.mid.b"]]
