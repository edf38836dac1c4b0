"""The import graph of the core packages has no circles (runtime imports, at any depth;
imports for type hints only, under ``TYPE_CHECKING``, do not count), every module imports
only from its own layer or below (the layer map), and heavy optional backends are imported
only when used."""

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


# The layers, lowest first (DESIGN.md, "Layout"): a module imports from its own layer or
# below, never above. The longest prefix names a module's layer; a package's face (its
# __init__) stands as high as the highest thing it imports.
LAYERS = (
    ("cadence", "cadence._utils", "cadence.utils", "cadence._weights_board"),
    ("cadence.data",),
    ("cadence.checkpoint", "cadence.modules"),
    ("cadence.objectives", "cadence.envs"),
    ("cadence.envs.transforms", "cadence.envs.libs", "cadence.envs.custom", "cadence.envs.model_based"),
    ("cadence.collectors", "cadence.record", "cadence.render"),
    ("cadence.interop", "cadence.trainers", "cadence.cli", "cadence.__main__"),
)
# imports against the map that issue #32 removes (the replay buffer's transforms are the
# env transforms' classes); nothing may be added here
KNOWN_UPWARD_IMPORTS = {("cadence.data.replay_buffers.buffers", "cadence.envs.transforms.base")}


def _layer(name: str) -> int:
    matches = [
        (len(prefix), index)
        for index, prefixes in enumerate(LAYERS)
        for prefix in prefixes
        if name == prefix or name.startswith(prefix + ".")
    ]
    assert matches, f"{name} is in no layer of LAYERS: add it"
    return max(matches)[1]


def test_every_module_imports_from_its_layer_or_below() -> None:
    modules = _modules()
    graph = {name: _imports(path, modules) for name, path in modules.items()}
    faces = {name for name, path in modules.items() if path.name == "__init__.py"}
    face_layers: dict[str, int] = {}

    def layer_of(name: str) -> int:
        if name not in faces:
            return _layer(name)
        if name not in face_layers:
            face_layers[name] = _layer(name)  # while its imports are looked at (a face may import its own)
            face_layers[name] = max([_layer(name)] + [layer_of(target) for target in graph[name] if target != name])
        return face_layers[name]

    upward = sorted(
        (name, target)
        for name in graph
        if name not in faces
        for target in graph[name]
        if layer_of(target) > _layer(name)
    )
    unexpected = [f"{name} imports {target}" for name, target in upward if (name, target) not in KNOWN_UPWARD_IMPORTS]
    assert not unexpected, "imports from a higher layer: " + "; ".join(unexpected)
    gone = KNOWN_UPWARD_IMPORTS - set(upward)
    assert not gone, f"no longer imported, take them off KNOWN_UPWARD_IMPORTS: {sorted(gone)}"


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

