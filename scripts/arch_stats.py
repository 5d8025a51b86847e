"""Print the size and shape of the server and bot packages: modules, classes, import floors, cycles.

Used to show what a reorganisation changed (``python scripts/arch_stats.py``). Only imports between
modules of the same top-level package count; an import floor is a module's height in the import graph
once cycles are collapsed (a module importing nothing of its package is floor 1).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOTS = {"arena_server": Path("server/arena_server"), "arena_bots": Path("reference_bots/arena_bots")}


def module_name(package: str, root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([package, *parts])


def imports_of(tree: ast.AST, package: str, name: str, is_pkg: bool) -> set[str]:
    out: set[str] = set()
    base = name if is_pkg else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == package)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = base.split(".")
                target = ".".join(parts[: len(parts) - node.level + 1])
                mod = f"{target}.{node.module}" if node.module else target
            else:
                mod = node.module or ""
            if mod.split(".")[0] != package:
                continue
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)
    return out


def sccs(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    for v in graph:
        if v not in index:
            visit(v)
    return out


def analyse(package: str, root: Path) -> dict[str, object]:
    """Modules, sizes, classes, import floors and cycles of one package."""
    files = sorted(root.rglob("*.py"))
    modules: dict[str, tuple[Path, ast.AST, bool]] = {}
    for f in files:
        modules[module_name(package, root, f)] = (f, ast.parse(f.read_text()), f.name == "__init__.py")
    graph: dict[str, set[str]] = {}
    for name, (_f, tree, is_pkg) in modules.items():
        graph[name] = {d for d in imports_of(tree, package, name, is_pkg) if d in modules and d != name}
    comps = sccs(graph)
    comp_of = {v: i for i, c in enumerate(comps) for v in c}
    floor: dict[int, int] = {}
    for i, comp in enumerate(comps):  # Tarjan emits components in reverse topological order
        below = [floor[comp_of[w]] for v in comp for w in graph[v] if comp_of[w] != i]
        floor[i] = 1 + max(below, default=0)
    sizes = sorted(((len(f.read_text().splitlines()), str(f)) for f, _t, _p in modules.values()), reverse=True)
    classes = []
    for f, tree, _p in modules.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                classes.append((node.end_lineno - node.lineno + 1, f"{f}:{node.name}"))
    classes.sort(reverse=True)
    return {
        "modules": len(modules),
        "folders": len({str(f.parent) for f, _t, _p in modules.values()}),
        "sizes": sizes,
        "classes": classes,
        "floors": max(floor.values(), default=0),
        "cycles": [sorted(c) for c in comps if len(c) > 1],
    }


def report(package: str, root: Path) -> None:
    a = analyse(package, root)
    sizes: list[tuple[int, str]] = a["sizes"]  # type: ignore[assignment]
    classes: list[tuple[int, str]] = a["classes"]  # type: ignore[assignment]
    cycles: list[list[str]] = a["cycles"]  # type: ignore[assignment]
    print(f"== {package}: {a['modules']} modules in {a['folders']} folders, {sum(n for n, _ in sizes)} lines")
    print(f"largest modules: {', '.join(f'{p} ({n})' for n, p in sizes[:3])}")
    print(f"largest classes: {', '.join(f'{p} ({n})' for n, p in classes[:3])}")
    print(f"import floors: {a['floors']}")
    print(f"import cycles: {len(cycles)}" + "".join(f"\n  {' <-> '.join(c)}" for c in cycles))


def main() -> None:
    for package, root in ROOTS.items():
        report(package, root)


if __name__ == "__main__":
    main()
