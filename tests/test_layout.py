"""The shape of the code: no import cycles, packages that only re-export, and a wheel that ships what it needs."""
from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "packer"


def _modules() -> dict[str, Path]:
    """Every module of packer by dotted name."""
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The packer module an import of ``name`` loads (``packer.x.y`` of ``from packer.x.y import z``), or None."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _top_level_imports(path: Path) -> list[ast.AST]:
    """Import statements executed when the module is imported (not inside functions or ``if TYPE_CHECKING``)."""
    tree = ast.parse(path.read_text())
    found = []
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for sub in ast.walk(node) if not isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) else ():
            if isinstance(sub, (ast.Import, ast.ImportFrom)):
                found.append(sub)
    return found


def _edges(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the packer modules its import runs: those it names and, as Python does, their packages' ``__init__``
    (not the top package's, which re-exports lazily, nor the importer's own packages, already running)."""
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in _top_level_imports(path):
            targets = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] + [f"{node.module}.{a.name}" for a in node.names] if node.module else [])
            for target in targets:
                hit = _resolve(target, modules) if target.startswith("packer") else None
                if not hit:
                    continue
                parts = hit.split(".")
                for run in (".".join(parts[:i]) for i in range(2, len(parts) + 1)):
                    if run in modules and run != name and not name.startswith(run + "."):
                        graph[name].add(run)
    return graph


def test_no_import_cycles():
    graph = _edges(_modules())
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles[:5])


def test_no_function_level_imports_of_private_names():
    """A function-level import of another module's private name hides a cycle or a layering problem."""
    found = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("packer"):
                private = [a.name for a in node.names if a.name.startswith("_")]
                if private:
                    found.append(f"{name}: from {node.module} import {', '.join(private)}")
    assert not found, found


def test_packages_only_re_export():
    """A package's ``__init__`` holds imports, ``__all__`` and a docstring (packer's own adds lazy re-export)."""
    for init in PACKAGE.rglob("__init__.py"):
        tree = ast.parse(init.read_text())
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue
            if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) and t.id in ("__all__", "_EXPORTS") for t in node.targets):
                continue
            if init.parent == PACKAGE and isinstance(node, ast.FunctionDef) and node.name in ("__getattr__", "__dir__"):
                continue
            pytest.fail(f"{init.relative_to(ROOT)} line {node.lineno}: a package's __init__ only re-exports")


def test_the_wheel_lists_every_package_and_ships_the_models_and_the_sample():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = set(config["packages"])
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in PACKAGE.rglob("__init__.py")}
    assert packages - {"packer.models", "packer.sample"} == on_disk
    assert config["package-dir"] == {"packer.models": "models", "packer.sample": "traces/sample"}
    for package, patterns in config["package-data"].items():
        folder = ROOT / config["package-dir"][package]
        assert any(any(folder.glob(p)) for p in patterns), package


def test_shipped_files_are_found_from_a_checkout_and_installed():
    from packer.io.resources import models_dir, sample_trace

    assert (models_dir() / "fleet.toml").is_file() and (models_dir() / "presets.toml").is_file()
    assert (sample_trace() / "tasks.parquet").is_file()


def test_importing_packer_loads_no_solver_and_no_second_highs():
    """``import packer`` is light, and packer never imports highspy or SciPy's HiGHS (one HiGHS per process: OR-Tools')."""
    import subprocess
    import sys

    code = ("import sys, packer, packer.io.trace; "
            "print(any(m.startswith(('ortools', 'pulp')) for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout.strip()
    assert out == "False"
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        assert "import highspy" not in text and "from scipy" not in text and "import scipy" not in text, path
