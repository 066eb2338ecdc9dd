"""Which source files a module's code can reach: the modules of clustergym (its wings included) and of the
module's own package that it imports, directly or through each other, found by reading their ``import``
statements (nothing is imported). The run store keys a task's runs by them (:mod:`clustergym.runner.runstore`)."""

from __future__ import annotations

import ast
import importlib.util
import os
import sys

__all__ = ["WINGS", "reachable_sources"]

_IMPORTS: dict[str, set[str]] = {}  # a source file -> the modules its import statements name (parsed once)
WINGS = ("clustergym.envs", "clustergym.agents", "clustergym.baselines")


def _roots(top: str = "") -> list[tuple[str, str]]:
    """``(dotted name, folder)`` of the clustergym package and its wings, and of the package ``top`` (a task
    module's own top-level package, if it is one), the longest name first."""
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the clustergym package (this file: runner/)
    out = [("clustergym", pkg)]
    for name in WINGS:
        spec = importlib.util.find_spec(name)
        out += [(name, os.path.abspath(d)) for d in ((spec.submodule_search_locations or []) if spec else [])]
    if top and top != "clustergym":
        out += [(top, os.path.abspath(d)) for d in (getattr(sys.modules.get(top), "__path__", None) or [])]
    return sorted(out, key=lambda r: -len(r[0]))


def _module_file(name: str, roots: list[tuple[str, str]]) -> str | None:
    """The source file of module ``name`` under ``roots`` (a package: its ``__init__.py``), None outside them."""
    for prefix, folder in roots:
        if name == prefix or name.startswith(prefix + "."):
            base = os.path.join(folder, *name[len(prefix) + 1:].split(".")) if name != prefix else folder
            for p in (os.path.join(base, "__init__.py"), base + ".py"):
                if os.path.isfile(p):
                    return os.path.realpath(p)
    return None


def _imported(path: str, name: str) -> set[str]:
    """Every module an ``import`` or ``from ... import`` statement of ``path`` (module ``name``) names, anywhere in
    it (functions included), with the packages above each (importing a module runs its packages' ``__init__``)."""
    if path not in _IMPORTS:
        with open(path, "rb") as fh:
            tree = ast.parse(fh.read(), filename=path)
        package = name if os.path.basename(path) == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                parts = package.split(".") if node.level else []
                base = ".".join(parts[:len(parts) - node.level + 1] if node.level else [])
                mod = ".".join(x for x in (base, node.module or "") if x)
                found.add(mod)
                found.update(f"{mod}.{a.name}" for a in node.names)  # kept where it is a module
        _IMPORTS[path] = {".".join(m.split(".")[:i]) for m in found if m for i in range(1, m.count(".") + 2)}
    return _IMPORTS[path]


def reachable_sources(name: str) -> dict[str, str]:
    """``{module: source file}`` of module ``name`` and of every module of the clustergym package, its wings and
    ``name``'s own top-level package that it imports, directly or through each other (an AST scan of the
    import statements: the code a task function of ``name`` can call)."""
    top = name.partition(".")[0]
    roots = _roots(top)
    own = _module_file(name, roots) or getattr(sys.modules.get(name), "__file__", None)
    if not own or not os.path.isfile(own):
        return {}
    seen, todo = {name: os.path.realpath(own)}, [name]
    for parent in (name.rsplit(".", k)[0] for k in range(1, name.count(".") + 1)):  # run when it is imported
        path = _module_file(parent, roots)
        if path is not None:
            seen[parent] = path
            todo.append(parent)
    while todo:
        mod = todo.pop()
        for dep in sorted(_imported(seen[mod], mod)):
            path = None if dep in seen else _module_file(dep, roots)
            if path is not None:
                seen[dep] = path
                todo.append(dep)
    return seen
