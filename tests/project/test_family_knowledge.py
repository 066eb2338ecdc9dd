"""Everything about a problem family lives in its folder: the generic layers name no family.

The core, the runner, the learning stack, the bench helpers and the command line (``clustergym/core``,
``runner``, ``learning``, ``bench``, ``cli``) must work for any registered family, the shipped ones and a user's,
so their code never names one: no family name, env id or family package in a string or an import. What they need
to know about a family they ask its :class:`~clustergym.core.family.FamilySpec` (and the modules it names). The
experiments (``clustergym/experiments``) are per paper by design and may name their family. Docstrings are
prose and may name families as examples.
"""

from __future__ import annotations

import ast

from clustergym.core.family import family_specs
from tests.helpers import ROOT

GENERIC = ("core", "runner", "learning", "bench", "cli")


def _markers() -> dict[str, tuple[str, ...]]:
    """Per shipped family: its name, its env names (``MultiServerChannel`` of ``clustergym/MultiServerChannel-v0``)
    and its package (``clustergym.envs.multiserver.channel``)."""
    out = {}
    for spec in family_specs():
        names = tuple(e.id.split("/")[-1].rsplit("-v", 1)[0] for e in spec.envs)
        package = spec.scenario.partition(":")[0].rsplit(".", 1)[0]
        out[spec.name] = (spec.name, *names, package)
    return out


def _docstrings(tree: ast.AST) -> set[int]:
    """Strings that are statements of their own: docstrings of modules, classes and functions, and attribute
    docstrings (prose, never read by the code)."""
    return {id(node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)}


def family_mentions(source: str, markers: dict[str, tuple[str, ...]]) -> set[str]:
    """The families a module's code names (string constants other than docstrings, imported module names)."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    texts = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            texts.append(node.value)
        elif isinstance(node, ast.ImportFrom) and node.module:
            texts.append(node.module)
        elif isinstance(node, ast.Import):
            texts.extend(a.name for a in node.names)
    return {fam for fam, keys in markers.items() for t in texts if any(k in t for k in keys)}


def test_the_generic_layers_name_no_family():
    markers = _markers()
    assert len(markers) >= 4
    hits = {}
    for layer in GENERIC:
        for path in sorted((ROOT / "clustergym" / layer).rglob("*.py")):
            found = family_mentions(path.read_text(), markers)
            if found:
                hits[str(path.relative_to(ROOT))] = sorted(found)
    assert not hits, hits


def test_the_scan_finds_a_family_named_in_code():
    markers = _markers()
    assert family_mentions('ENVS = ("clustergym/ApproxJobs-v0",)\n', markers) == {"approxjobs"}
    assert family_mentions("from clustergym.envs.ringallreduce.topology import Topology\n", markers) == {"ringallreduce"}
    assert family_mentions('def f():\n    """On MultiServerChannel-v0, say."""\n', markers) == set()
