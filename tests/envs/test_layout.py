"""Structure of the env modules: no module reaches into another module's private names.

Every env module talks to another one through public names only: the P2 vector env steps the single
env's public ``dynamics`` object instead of borrowing its plan and buffers, the P1 vector env calls
``channel.dynamics.infeasible_message`` instead of the single env's private method, and so on.
"""

import ast

import pytest
from tests.helpers import ROOT as REPO_ROOT

ENVS = REPO_ROOT / "envs"
# Underscore names that are public API of namedtuples (``SlotPlan._fields``, ``x._replace(...)``).
NAMEDTUPLE_API = {"_replace", "_fields", "_asdict", "_make", "_field_defaults"}


def private_reaches(source: str, filename: str = "<string>") -> list[str]:
    """Imports of an underscore name from a clustergym module, and attribute reads ``X._name`` where X
    is not ``self``, ``cls`` or ``super()`` (dunders and the namedtuple API are allowed)."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("clustergym")):
            found += [f"{filename}:{node.lineno}: from {node.module} import {a.name}"
                      for a in node.names if a.name.startswith("_")]
        elif (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
              and node.attr not in NAMEDTUPLE_API):
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
                continue
            found.append(f"{filename}:{node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("source, expected", [
    ("from clustergym.envs.multiserver.allocation.env import _BLOCK", 1),
    ("from .env import _TOL, MultiServerAllocationEnv", 1),
    ("args = single._plan", 1),
    ("self._single._infeasible_message(y)", 1),
    ("self._plan; cls._cache; super()._x; SlotPlan._fields; obj.__class__", 0),
    ("from numpy import _core", 0),  # not a clustergym module
])
def test_checker_flags_private_reaches(source, expected):
    assert len(private_reaches(source)) == expected, private_reaches(source)


def test_env_modules_use_only_public_names_of_other_modules():
    files = sorted(ENVS.rglob("*.py"))
    assert len(files) > 30  # every family folder is scanned
    found = [hit for path in files for hit in private_reaches(path.read_text(), str(path.relative_to(ENVS)))]
    assert not found, "\n".join(found)
