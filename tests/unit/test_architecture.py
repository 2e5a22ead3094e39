"""The house's shape (docs/architecture.md): no import circle, lazy, type-hint-only or not, between modules or
sub-packages; imports run one way, down each package's declared layers; no folder of more than ~15 modules and
no module over ~400 lines is left unexplained."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("topologies", "workloads", "simulator", "experiments")  # lowest first
# Each package's sub-packages, lowest layer first; a set is one layer whose members do not import each other.
LAYERS = {
    "workloads": ["ops", "schedules", "dispatchers", "specs", "ep", "recipes", "graph", "inputs"],
    "simulator": [{"costs", "memory"}, "streams", "engine", "fast", "report", "outputs"],
    "experiments": ["common", {"search", "validation"}, "beyond", "paper", "cli"],
}
MAX_MODULES_PER_FOLDER = 15
MAX_LINES = 440  # "about 400"


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def _imports(modules: dict[str, Path]) -> nx.DiGraph:
    """Every import between the project's modules: top-level, inside functions, under TYPE_CHECKING."""
    graph = nx.DiGraph()
    for name, path in modules.items():
        graph.add_node(name)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: up (level - 1) packages from this one
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
            for target in targets:
                if target in modules and target != name:
                    graph.add_edge(name, target)
    return graph


MODULES = _modules()


@cache
def import_graph() -> nx.DiGraph:
    """The project's import graph, built when a test here first needs it (not as each xdist worker collects)."""
    return _imports(MODULES)


def _unit(module: str) -> str:
    """The sub-package a module belongs to (``workloads.ops`` is a layer of its own)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 and parts[0] in LAYERS else parts[0]


def _rank(unit: str) -> tuple[int, int]:
    top, _, sub = unit.partition(".")
    layers = LAYERS.get(top, [])
    for index, layer in enumerate(layers):
        if sub == layer or (isinstance(layer, set) and sub in layer):
            return PACKAGES.index(top), index
    return PACKAGES.index(top), -1


def test_no_module_circle() -> None:
    circles = [sorted(c) for c in nx.strongly_connected_components(import_graph()) if len(c) > 1]
    assert circles == []


def test_no_subpackage_circle() -> None:
    units = nx.DiGraph((_unit(a), _unit(b)) for a, b in import_graph().edges if _unit(a) != _unit(b))
    assert [sorted(c) for c in nx.strongly_connected_components(units) if len(c) > 1] == []


def test_imports_run_down_the_layers() -> None:
    upward = []
    for importer, imported in import_graph().edges:
        a, b = _unit(importer), _unit(imported)
        if a == b or a in PACKAGES:  # within a sub-package; a package's own __init__ may name its parts
            continue
        if _rank(b) >= _rank(a):
            upward.append(f"{importer} -> {imported}")
    assert upward == []


def test_every_subpackage_is_a_declared_layer_with_a_docstring() -> None:
    for top, layers in LAYERS.items():
        names = {n for layer in layers for n in (layer if isinstance(layer, set) else {layer})}
        found = {p.parent.name for p in (ROOT / top).glob("*/__init__.py")} | {"ops"} & names
        assert found <= names | {"ops"}, f"{top}: {sorted(found - names)} not in LAYERS"
        for sub in found - {"ops"}:
            assert ast.get_docstring(ast.parse((ROOT / top / sub / "__init__.py").read_text())), f"{top}.{sub}"


def test_folders_and_files_stay_small() -> None:
    for package in PACKAGES:
        for folder in [ROOT / package, *(p.parent for p in (ROOT / package).glob("*/__init__.py"))]:
            modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
            assert len(modules) <= MAX_MODULES_PER_FOLDER, folder
    long = {name: n for name, path in MODULES.items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_every_function_the_map_names_exists() -> None:
    """docs/architecture.md names where each answer is computed: every dotted name in it resolves."""
    import importlib
    import re

    text = (ROOT / "docs" / "architecture.md").read_text()
    names = set(re.findall(r"`((?:topologies|workloads|simulator|experiments)(?:\.\w+)+)`", text))
    assert len(names) > 15
    broken = []
    for name in sorted(names):
        parts = name.split(".")
        cut = max(i for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in MODULES)
        target = importlib.import_module(".".join(parts[:cut]))
        for attribute in parts[cut:]:
            target = getattr(target, attribute, None)
        broken += [name] if target is None else []
    assert broken == []
