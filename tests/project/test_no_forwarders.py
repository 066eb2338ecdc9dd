"""Every name is imported from the module that defines it: no module of the package only re-exports another.

A *forwarder* is a module whose top level is nothing but a docstring, imports, ``__all__`` and plain aliases
(``a = b``, ``a, b = c, d``): it adds no code of its own, only a second name for someone else's. The package
has none, and no module but a package's ``__init__`` answers attribute lookups with a module-level
``__getattr__``. Package ``__init__`` files (a package's public names) and ``__main__`` are not checked.

The modules are read from the source files of the installed package, the wings (``clustergym.envs``,
``clustergym.agents``, ``clustergym.baselines``) included, wherever they are installed from.
"""

from __future__ import annotations

import ast
import importlib.util
import os

import pytest

PACKAGES = ("clustergym", "clustergym.envs", "clustergym.agents", "clustergym.baselines")
EXEMPT = ("__init__.py", "__main__.py")


def installed_modules() -> dict[str, str]:
    """Module name -> source file of every ``.py`` module of the installed package."""
    out: dict[str, str] = {}
    seen: set[str] = set()
    for pkg in PACKAGES:
        spec = importlib.util.find_spec(pkg)
        assert spec is not None and spec.submodule_search_locations, pkg
        for root in spec.submodule_search_locations:
            for folder, dirs, files in os.walk(root):
                dirs[:] = sorted(d for d in dirs if d != "__pycache__")
                for f in sorted(files):
                    path = os.path.realpath(os.path.join(folder, f))
                    if not f.endswith(".py") or path in seen:
                        continue
                    seen.add(path)
                    rel = os.path.relpath(os.path.join(folder, f), root)[:-3].split(os.sep)
                    out[".".join([pkg, *rel])] = path
    return out


def _is_all(target: ast.expr) -> bool:
    return isinstance(target, ast.Name) and target.id == "__all__"


def _names_only(node: ast.expr) -> bool:
    if isinstance(node, ast.Tuple):
        return all(isinstance(e, ast.Name) for e in node.elts)
    return isinstance(node, ast.Name)


def _forwards(stmt: ast.stmt) -> bool:
    """An import, an ``__all__`` or a plain alias, or an ``if`` / ``try`` made only of those."""
    if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Pass)):
        return True
    if isinstance(stmt, ast.Assign):
        return any(_is_all(t) for t in stmt.targets) or (
            all(_names_only(t) for t in stmt.targets) and _names_only(stmt.value))
    if isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        return _is_all(stmt.target)
    if isinstance(stmt, ast.If):
        return all(_forwards(s) for s in stmt.body + stmt.orelse)
    if isinstance(stmt, ast.Try):
        return all(_forwards(s) for s in [*stmt.body, *stmt.orelse, *stmt.finalbody]
                   + [s for h in stmt.handlers for s in h.body])
    return False


def problems(source: str) -> list[str]:
    """Why a (non-``__init__``) module's source is not allowed: it only forwards, or has a ``__getattr__``."""
    body = ast.parse(source).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]  # the docstring
    found = []
    imports = any(isinstance(n, (ast.Import, ast.ImportFrom)) for s in body for n in ast.walk(s))
    if imports and all(_forwards(s) for s in body):
        found.append("only re-exports other modules' names (import them from where they are defined)")
    if any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == "__getattr__" for s in body):
        found.append("has a module-level __getattr__ (import the names from where they are defined)")
    return found


@pytest.mark.parametrize("source, expected", [
    ('"""Names that live elsewhere."""\nfrom clustergym.runner.evaluation import evaluate\n__all__ = ["evaluate"]\n', 1),
    ("from __future__ import annotations\nfrom a import b as _b\nb, c = _b, _b\n__all__ = ['b']\n__all__ += ['c']\n",
     1),
    ("try:\n    from a import b\nexcept ImportError:\n    b = None\n", 0),  # a fallback value is code
    ("try:\n    from a import b\nexcept ImportError:\n    from c import b\n", 1),
    ("def __getattr__(name):\n    raise AttributeError(name)\n", 1),
    ("from a import b\n\n\ndef __getattr__(name):\n    return b\n", 1),
    ('"""Only a docstring."""\n', 0),
    ("from a import b\n\nLIMIT = 3\n", 0),
    ("from a import b\n\n\ndef f():\n    return b()\n", 0),
])
def test_the_check_tells_a_forwarder_from_a_module(source, expected):
    assert len(problems(source)) == expected, problems(source)


def test_no_module_only_forwards_names():
    modules = installed_modules()
    assert {"clustergym.runner.evaluation", "clustergym.envs.ringallreduce.env", "clustergym.agents.esdp",
            "clustergym.baselines.ringallreduce"} <= set(modules)  # the wings are walked too
    bad = []
    for name, path in sorted(modules.items()):
        if os.path.basename(path) in EXEMPT:
            continue
        with open(path, encoding="utf-8") as f:
            bad += [f"{name} ({path}): {why}" for why in problems(f.read())]
    assert not bad, "\n".join(bad)
