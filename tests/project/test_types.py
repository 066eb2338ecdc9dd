"""The typed API: mypy passes on the package, and the typed keys are the keys the envs return.

* ``mypy -p clustergym`` with ``[tool.mypy]`` of ``pyproject.toml`` exits 0. mypy reads one package folder, and
  clustergym's wings (``envs/``, ``agents/``, ``baselines/``) are mapped into the package by setuptools, so it
  runs on a copy of the package as installed (``tests.helpers.assemble``). It is run once more on a copy with
  a planted type error (a wrong ``info["feedback"]`` key), so the check is known to fail.
* Every family's observation ``TypedDict`` holds exactly the keys its env (padded or not) and native vector env
  return, and its feedback ``TypedDict`` the keys of ``info["feedback"]``.
"""

from __future__ import annotations

import importlib.util
import pathlib
import subprocess
import sys

import gymnasium as gym
import pytest

from clustergym.envs.approxjobs import ApproxFeedback, ApproxObservation
from clustergym.envs.multiserver.allocation import AllocationFeedback, AllocationObservation
from clustergym.envs.multiserver.channel import ChannelFeedback, ChannelObservation
from clustergym.envs.ringallreduce import RingFeedback, RingObservation
from tests.helpers import ROOT, assemble

# env id -> (observation TypedDict, feedback TypedDict, padding kwargs, kwargs of the native vector env)
TYPED = {
    "clustergym/MultiServerChannel-v0": (ChannelObservation, ChannelFeedback, {"max_edges": 200}, {}),
    "clustergym/MultiServerAllocation-v0": (AllocationObservation, AllocationFeedback, {"max_edges": 400}, {}),
    "clustergym/RingAllReduce-v0": (RingObservation, RingFeedback, {"max_racks": 20}, {"action_mode": "ring_size"}),
    "clustergym/ApproxJobs-v0": (ApproxObservation, ApproxFeedback, {}, {}),
}

needs_mypy = pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                                reason="mypy is not installed (pip install -e '.[dev]')")


def mypy(tree: pathlib.Path, cache: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                           "--cache-dir", str(cache), "-p", "clustergym"],
                          capture_output=True, text=True, cwd=tree, timeout=900)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("mypy-cache")


@needs_mypy
def test_mypy_passes_on_the_package(tmp_path, cache):
    r = mypy(assemble(tmp_path), cache)
    assert r.returncode == 0, f"mypy -p clustergym failed:\n{r.stdout}{r.stderr}"


@needs_mypy
def test_mypy_catches_a_wrong_feedback_key(tmp_path, cache):
    tree = assemble(tmp_path)
    env = tree / "clustergym" / "envs" / "multiserver" / "channel" / "env.py"
    text = env.read_text()
    planted = text.replace('"utilities": self._padded(utilities)}', '"utility": self._padded(utilities)}')
    assert planted != text, "the planted fault no longer applies: update this test"
    env.write_text(planted)
    r = mypy(tree, cache)
    assert r.returncode == 1 and "ChannelFeedback" in r.stdout, r.stdout + r.stderr


def keys_of(typed) -> tuple[frozenset, frozenset]:
    return typed.__required_keys__, typed.__optional_keys__


@pytest.mark.parametrize("env_id,padded", [(e, p) for e in sorted(TYPED) for p in (False, True) if TYPED[e][2] or not p],
                         ids=lambda v: ("padded" if v else "unpadded") if isinstance(v, bool) else v.split("/")[-1])
def test_typed_keys_are_the_keys_the_env_returns(env_id, padded):
    """Padded as well where the family has padding kwargs (P4 has none: its spaces never vary by instance)."""
    obs_t, fb_t, pad, _ = TYPED[env_id]
    env = gym.make(env_id, horizon=5, **(pad if padded else {}))
    obs, _ = env.reset(seed=0)
    required, optional = keys_of(obs_t)
    for o in (obs, env.step(env.action_space.sample())[0]):
        assert required <= set(o) <= required | optional, (set(o) ^ required)
        assert padded == bool(set(o) & optional) or not optional
    _, _, _, _, info = env.step(env.action_space.sample())
    assert set(info["feedback"]) == keys_of(fb_t)[0] and not keys_of(fb_t)[1]
    env.close()


@pytest.mark.parametrize("env_id", sorted(TYPED))
def test_typed_keys_of_the_native_vector_env(env_id):
    obs_t, fb_t, _, kw = TYPED[env_id]
    vec = gym.make_vec(env_id, num_envs=2, vectorization_mode="vector_entry_point", horizon=5, **kw)
    obs, _ = vec.reset(seed=0)
    required, optional = keys_of(obs_t)
    assert required <= set(obs) <= required | optional
    obs, _, _, _, info = vec.step(vec.action_space.sample())
    assert required <= set(obs) <= required | optional
    assert {k for k in info["feedback"] if not k.startswith("_")} == keys_of(fb_t)[0]
    vec.close()


PUBLIC_API = ("clustergym.envs", "clustergym.agents", "clustergym.baselines", "clustergym.core.agent", "clustergym.learning.wrappers",
              "clustergym.learning.policies")


def _matches(pattern: str, module: str) -> bool:
    """mypy's reading of an override's module pattern: ``a.b.*`` is ``a.b`` and everything under it."""
    if pattern.endswith(".*"):
        return module == pattern[:-2] or module.startswith(pattern[:-1])
    return module == pattern


def test_no_public_api_module_has_its_type_errors_ignored():
    import tomllib

    overrides = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["overrides"]
    ignored = [p for o in overrides if o.get("ignore_errors") for p in o["module"]]
    modules = [m for m in PUBLIC_API if not m.endswith(("envs", "agents", "baselines"))]
    for folder in ("envs", "agents", "baselines"):
        modules += [f"clustergym.{folder}." + ".".join(p.relative_to(ROOT / folder).with_suffix("").parts)
                    for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts]
    assert len(modules) > 40 and "clustergym.envs.ringallreduce.oracle" in modules
    assert _matches("clustergym.learning.*", "clustergym.learning.policies")  # the check reads patterns as mypy does
    found = sorted({m for m in modules for p in ignored if _matches(p, m)})
    assert not found, f"public modules whose type errors mypy ignores: {found}"
