"""The house's shape: no import circle among optnet's modules (imports inside functions count,
``if TYPE_CHECKING:`` blocks do not: they never run), and no private name imported across
modules. Anyone can rerun the measurement: ``python -m pytest tests/test_imports.py``; the
failure message lists each circle's edges."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

PACKAGE = Path(__file__).resolve().parent.parent / "optnet"


def _modules() -> dict[str, Path]:
    out = {}
    for p in PACKAGE.rglob("*.py"):
        parts = p.relative_to(PACKAGE.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def _imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement outside ``if TYPE_CHECKING:`` blocks."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Import | ast.ImportFrom) and id(n) not in skip
    ]


def _targets(module: str, node: ast.Import | ast.ImportFrom, mods: dict[str, Path]) -> list:
    """(optnet module imported, names taken from it) for one statement."""
    if isinstance(node, ast.Import):
        names = [(a.name, []) for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            pkg = module.split(".")
            pkg = pkg if mods[module].name == "__init__.py" else pkg[:-1]
            base = ".".join(pkg[: len(pkg) - node.level + 1] + ([base] if base else []))
        names = [
            (f"{base}.{a.name}", []) if f"{base}.{a.name}" in mods else (base, [a.name])
            for a in node.names
        ]
    out = []
    for target, taken in names:
        while target and target not in mods:
            target = target.rpartition(".")[0]
        if target and target != module and not module.startswith(target + "."):
            out.append((target, taken))
    return out


def _graph() -> tuple[nx.DiGraph, list[str]]:
    mods = _modules()
    g = nx.DiGraph()
    private = []
    for name, path in mods.items():
        g.add_node(name)
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            for target, taken in _targets(name, node, mods):
                g.add_edge(name, target)
                private += [
                    f"{name} imports {target}.{t}"
                    for t in taken
                    if t.startswith("_") and not t.startswith("__")
                ]
    return g, private


def test_no_import_circle():
    g, _ = _graph()
    assert len(g) > 50  # the walk found the package
    circles = [sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1]
    detail = [
        f"{' <-> '.join(c)}: " + ", ".join(f"{a}->{b}" for a, b in g.subgraph(c).edges())
        for c in circles
    ]
    assert circles == [], "\n".join(detail)


def test_no_private_name_is_imported_across_modules():
    _, private = _graph()
    assert private == []


#: The pipeline's stage functions, each short enough to read whole (issue 17).
STAGES = {
    "evaluate.py": "evaluate",
    "instance.py": "build_instance",
    "model/data.py": "model_data",
    "decode.py": "decode",
}


def test_stage_functions_fit_on_a_screen():
    lengths = {}
    for rel, name in STAGES.items():
        tree = ast.parse((PACKAGE / rel).read_text(encoding="utf-8"))
        node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
        lengths[name] = node.end_lineno - node.lineno + 1
    assert all(n < 80 for n in lengths.values()), lengths
