"""The import graph of the core packages has no circles (runtime imports, at any depth;
imports for type hints only, under ``TYPE_CHECKING``, do not count), and heavy optional
backends are imported only when used."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1] / "cadence"
CORE = ("cadence.data", "cadence.envs", "cadence.collectors", "cadence.modules", "cadence.objectives")


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        name = ".".join(("cadence", *path.relative_to(ROOT).with_suffix("").parts))
        out[name.removesuffix(".__init__")] = path
    return out


def _imports(path: pathlib.Path, modules: dict[str, pathlib.Path]) -> set[str]:
    tree = ast.parse(path.read_text())
    type_only = {
        id(child) for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test) for child in ast.walk(node)
    }
    found = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("cadence"):
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                found.add(child if child in modules else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("cadence"))
    return found & set(modules)


def test_the_core_packages_import_without_circles() -> None:
    modules = _modules()
    graph = {name: _imports(path, modules) for name, path in modules.items() if name.startswith(CORE)}
    circles = []
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for target in sorted(graph.get(name, ())):
            if target not in graph:
                continue
            if state.get(target) == 1:
                circles.append(path[path.index(target):] + [target])
            elif target not in state:
                visit(target, path + [target])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not circles, "import circles: " + "; ".join(" -> ".join(circle) for circle in circles)


# Backends that a module may import only inside the function that uses them: importing
# Cadence (its collectors, buffers, RLlib layer) must not start importing them.
IMPORTED_WHEN_USED = ("ray",)


def _module_level_imports(tree: ast.Module) -> set[str]:
    """Top-level names of the modules imported when the module runs (not inside a def)."""
    found: set[str] = set()
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
        pending.extend(ast.iter_child_nodes(node))
    return found


def test_optional_backends_are_imported_only_when_used() -> None:
    offenders = [
        f"{name} imports {backend} at module level"
        for name, path in sorted(_modules().items())
        for backend in sorted(_module_level_imports(ast.parse(path.read_text())) & set(IMPORTED_WHEN_USED))
    ]
    assert not offenders, "; ".join(offenders)


def test_the_weights_board_starts_without_torch() -> None:
    # its Ray actor starts beside the collector actors: it must not compete with their imports
    path = ROOT / "_weights_board.py"
    assert _module_level_imports(ast.parse(path.read_text())) <= {"__future__", "typing"}

