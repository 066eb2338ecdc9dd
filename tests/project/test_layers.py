"""The import structure of the package: layers, no cycles, internal imports at module top.

* The layers contract lives in ``pyproject.toml`` (``[tool.importlinter]``): a module imports only from its own
  layer or the layers below it (docs/architecture.md, "Layers"), with no import ignored. import-linter checks it.
* No import cycle among the package's modules, whatever the layers allow: grimp's import graph (function-level
  imports included) has no strongly connected component of more than one module.
* clustergym-internal imports sit at module top. A function-local one is only for a module that imports an
  optional heavy third-party package at its top (torch, SB3, matplotlib, ...), which it then keeps lazy, or one
  of :data:`ALLOWED`, each with its reason.

import-linter and grimp read one package folder, and clustergym's wings (``envs/``, ``agents/``, ``baselines/``)
are mapped into the package by setuptools, so the checks run on a copy of the package as it is installed,
assembled in a temporary folder. Each check is run once on a copy with a planted fault, so it is known to fail.
"""

from __future__ import annotations

import ast
import json
import os
import pathlib
import subprocess
import sys
import textwrap
import tomllib

import pytest

from tests.helpers import ROOT, WINGS, assemble

# Third-party packages that are optional or slow to import: a module importing one at its top is loaded lazily.
HEAVY = ("torch", "stable_baselines3", "sb3_contrib", "matplotlib", "ray", "pettingzoo", "optuna", "scipy.optimize",
         "tensorboard", "pygame", "supersuit", "tianshou", "torchrl")

# (importing module, imported module) -> why the import stays inside a function.
ALLOWED = {
    ("clustergym.envs.approxjobs.scenario", "clustergym.envs.traces.philly"):
        "the Philly loader, read only by the trace scenario; hoist with the family's next change",
}


def _run(code: str, tree: pathlib.Path, *args: str) -> subprocess.CompletedProcess:
    """``python -c code`` with the assembled copy first on the path (it hides the installed package)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=tree,
                          timeout=600)


LINT = textwrap.dedent("""
    import sys
    from importlinter.cli import lint_imports
    sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True))
""")

CYCLES = textwrap.dedent("""
    import json, sys
    import grimp
    g = grimp.build_graph("clustergym", include_external_packages=False)
    sys.setrecursionlimit(100000)
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
        for w in g.find_modules_directly_imported_by(v):
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))
    for m in sorted(g.modules):
        if m not in index:
            visit(m)
    print(json.dumps({"modules": len(g.modules), "cycles": [c for c in out if len(c) > 1]}))
""")


def lint(tree: pathlib.Path) -> subprocess.CompletedProcess:
    return _run(LINT, tree, str(ROOT / "pyproject.toml"))


def cycles(tree: pathlib.Path) -> dict:
    r = _run(CYCLES, tree)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return assemble(tmp_path_factory.mktemp("pkg"))


@pytest.fixture
def planted(tmp_path):
    """A copy where the core imports the evaluation: an upward import that closes a cycle."""
    t = assemble(tmp_path)
    core = t / "clustergym" / "core" / "scenario.py"
    core.write_text(core.read_text() + "\n\nfrom clustergym.runner.evaluation import evaluate  # noqa: E402,F401\n")
    return t


def test_the_layers_contract_holds(tree):
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    assert not [c["id"] for c in contracts if c.get("ignore_imports")]  # every import is held to the layers
    r = lint(tree)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    assert "1 kept, 0 broken" in r.stdout, r.stdout[-3000:]


def test_no_import_cycle_among_the_modules(tree):
    found = cycles(tree)
    assert found["modules"] == len(_modules())  # the wings are in the graph, not only clustergym/
    assert not found["cycles"], "\n".join(" <-> ".join(c) for c in found["cycles"])


def test_both_checks_fail_on_a_planted_upward_import(planted):
    r = lint(planted)
    assert r.returncode != 0 and "clustergym.core.scenario -> clustergym.runner.evaluation" in r.stdout, r.stdout[-3000:]
    found = cycles(planted)
    assert any("clustergym.core.scenario" in c and "clustergym.runner.evaluation" in c for c in found["cycles"]), found["cycles"]


# -- internal imports at module top ------------------------------------------------------------------------

def _modules() -> dict[str, tuple[pathlib.Path, bool]]:
    out = {}
    for folder, sub in WINGS.items():
        base = "clustergym" + ("." + sub if sub else "")
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            init = parts[-1] == "__init__"
            out[".".join([base, *(parts[:-1] if init else parts)])] = (path, init)
    return out


def _targets(node: ast.Import | ast.ImportFrom, module: str, init: bool) -> list[str]:
    """The modules an import statement names (relative imports resolved; ``from M import x`` gives M and M.x)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        pkg = (module if init else module.rpartition(".")[0]).split(".")
        base = ".".join(pkg[: len(pkg) - node.level + 1] + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    return [base] + [f"{base}.{a.name}" for a in node.names]


def local_imports(source: str, module: str, init: bool = False) -> list[tuple[int, str]]:
    """(line, imported module) of every clustergym-internal import inside a function body."""
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
                names = _targets(child, module, init)
                if names[0].startswith("clustergym"):
                    found.append((child.lineno, names[0]))
            visit(child, inner)

    visit(ast.parse(source), False)
    return found


def heavy_modules(modules: dict) -> set[str]:
    """Internal modules that import a :data:`HEAVY` package at their top, directly or through another such module."""
    tops = {}
    for name, (path, init) in modules.items():
        tops[name] = [t for n in ast.parse(path.read_text()).body if isinstance(n, (ast.Import, ast.ImportFrom))
                      for t in _targets(n, name, init)]
    heavy = {m for m, ts in tops.items() if any(t == h or t.startswith(h + ".") for t in ts for h in HEAVY)}
    while True:
        more = {m for m, ts in tops.items() if m not in heavy and any(t in heavy for t in ts)}
        if not more:
            return heavy
        heavy |= more


@pytest.mark.parametrize("source, expected", [
    ("def f():\n    from clustergym.runner.evaluation import evaluate\n", [(2, "clustergym.runner.evaluation")]),
    ("def f():\n    from .oracle import x\n", [(2, "clustergym.envs.demo.oracle")]),
    ("def f():\n    import numpy as np\n", []),
    ("from clustergym.runner.evaluation import evaluate\n", []),
    ("class A:\n    def f(self):\n        import clustergym.core.family\n", [(3, "clustergym.core.family")]),
])
def test_the_scan_finds_function_local_internal_imports(source, expected):
    assert local_imports(source, "clustergym.envs.demo.env") == expected


def test_internal_imports_sit_at_module_top():
    modules = _modules()
    assert {"clustergym.envs", "clustergym.agents", "clustergym.baselines", "clustergym.learning"} <= set(modules)
    heavy = heavy_modules(modules)
    assert "clustergym.learning.heads" in heavy and "clustergym.runner.evaluation" not in heavy
    bad = []
    for name, (path, init) in modules.items():
        for line, target in local_imports(path.read_text(), name, init):
            if target in heavy or (name, target) in ALLOWED:
                continue
            bad.append(f"{path.relative_to(ROOT)}:{line}: import of {target} inside a function (move it to the "
                       "module top; a cycle it would close is a module in the wrong place)")
    assert not bad, "\n".join(bad)


def test_every_allowed_local_import_is_still_there():
    """An allow-list entry whose import is gone (hoisted, or the module moved) must go too."""
    modules = _modules()
    present = {(name, t) for name, (path, init) in modules.items() for _, t in local_imports(path.read_text(), name, init)}
    stale = [f"{a} -> {b}" for a, b in ALLOWED if (a, b) not in present]
    assert not stale, stale
