"""A new problem family is one folder and one registration line.

The toy family of ``examples/toyfam/`` (a 2-machine env, its FamilySpec, two agents, its learning hooks and its
hyperparameter file) is copied into ``tmp_path``, registered with ``clustergym.register_family`` (in-process) or
``CLUSTERGYM_PLUGINS`` (the command line), and shown listed, checked by ``clustergym.runner.testing``, trained
(with its own hyperparameters and a parameter pool from its ranges), tuned against its reference agent, benched
and evaluated through ``clustergym run`` — with no edit to clustergym. docs/extending.md gives its size, which a
test here counts.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import shutil
import subprocess
import sys

import gymnasium as gym
import pytest

import clustergym
from clustergym.core import agent as agent_mod
from clustergym.core import family as family_mod
from clustergym.runner import testing
from tests.helpers import ROOT as REPO_ROOT

ROOT = str(REPO_ROOT)
TOY_ID = "toyfam/TwoMachine-v0"

# The whole family: one folder, examples/toyfam/ (a package outside clustergym and outside envs/).
TOY_SOURCE = REPO_ROOT / "examples" / "toyfam"


@pytest.fixture
def toy_pkg(tmp_path, monkeypatch):
    """The toy family folder on sys.path; every registry is restored afterwards."""
    shutil.copytree(TOY_SOURCE, tmp_path / "toyfam", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.syspath_prepend(str(tmp_path))
    # the built-in agents load lazily: load them before the copy, or the restore would leave an empty
    # registry marked as loaded (every later test in this process would see no agents)
    agent_mod._load_builtins()
    families = dict(family_mod._FAMILIES)
    agents = copy.deepcopy(family_mod._AGENTS)
    yield tmp_path
    family_mod._FAMILIES.clear()
    family_mod._FAMILIES.update(families)
    family_mod._AGENTS.clear()
    family_mod._AGENTS.update(agents)
    gym.registry.pop(TOY_ID, None)
    for name in [m for m in sys.modules if m == "toyfam" or m.startswith("toyfam.")]:
        sys.modules.pop(name)


def _cli(args: list[str], cwd, plugins: str | None = "toyfam") -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(cwd), ROOT]), "MPLBACKEND": "Agg"}
    env.pop(family_mod.PLUGINS_ENV_VAR, None)
    if plugins:
        env[family_mod.PLUGINS_ENV_VAR] = plugins
    return subprocess.run([sys.executable, "-m", "clustergym", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def test_one_line_registers_a_family_in_process(toy_pkg):
    import toyfam

    assert TOY_ID not in clustergym.env_ids()
    clustergym.register_family(toyfam.FAMILY)  # the one line
    assert TOY_ID in clustergym.env_ids() and TOY_ID in gym.registry
    assert clustergym.list_agents(TOY_ID) == ["greedy", "random"]
    assert agent_mod.env_family(TOY_ID) == "toy-two-machine"
    clustergym.register_family(toyfam.FAMILY)  # idempotent
    with pytest.raises(ValueError, match="already registered"):
        clustergym.register_family(family_mod.FamilySpec(name="toy-two-machine", number="T1", paper="x", envs=(),
                                                         scenario="toyfam.env:make_scenario"))
    with pytest.raises(ValueError, match="already belongs"):
        clustergym.register_family(family_mod.FamilySpec(name="other", number="T2", paper="x",
                                                         envs=toyfam.FAMILY.envs, scenario="toyfam.env:make_scenario"))
    assert toyfam.FAMILY.scenario_factory()("paper", 0).truth["rates"].max() == pytest.approx(0.8)
    # the shipped checkers, unchanged, on the new family
    testing.check_env(TOY_ID, steps=60)
    testing.check_agent("random", TOY_ID, steps=30)
    res = clustergym.evaluate(TOY_ID, ["random"], seeds=[0, 1], horizon=15, progress=False)
    assert [r.steps for r in res.runs] == [15, 15] and all(r.regret is not None for r in res.runs)


def test_cli_lists_trains_and_runs_a_plugin_family(toy_pkg):
    cwd = toy_pkg
    out = _cli(["list"], cwd)
    assert out.returncode == 0, out.stderr
    assert f"{TOY_ID}\n    agents: greedy, random" in out.stdout and "clustergym/MultiServerChannel-v0" in out.stdout
    assert TOY_ID not in _cli(["list"], cwd, plugins=None).stdout  # registered only through the plugin variable

    pytest.importorskip("stable_baselines3")
    tr = _cli(["train", TOY_ID, "--algo", "ppo", "--timesteps", "64", "--n-envs", "1", "--hp", "n_steps=32",
               "--hp", "batch_size=16", "--eval-freq", "32", "--eval-episodes", "1", "--no-progress",
               "--out", "ppo"], cwd)
    assert tr.returncode == 0, tr.stderr
    meta = json.loads((cwd / "ppo" / "clustergym.json").read_text())
    assert meta["family"] == "toy-two-machine" and meta["timesteps_trained"] == 64

    run = _cli(["run", TOY_ID, "--agents", "random,sb3:ppo/model.zip", "--seeds", "0-1", "--horizon", "20",
                "--workers", "2", "--no-progress", "--no-plots", "--out", "eval"], cwd)
    assert run.returncode == 0, run.stderr
    res = json.loads((cwd / "eval" / "results.json").read_text())
    assert res["env_id"] == TOY_ID
    assert sorted((r["agent"], r["seed"]) for r in res["runs"]) == [
        ("random", 0), ("random", 1), ("sb3:ppo/model.zip", 0), ("sb3:ppo/model.zip", 1)]
    assert all(r["steps"] == 20 and r["regret"] is not None for r in res["runs"])


def test_a_broken_plugin_is_one_line_exit_2(toy_pkg):
    out = _cli(["list"], toy_pkg, plugins="no_such_family_pkg")
    err = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(err) == 1 and "no_such_family_pkg" in err[0], out.stderr


def test_an_installed_family_registers_through_its_entry_point(toy_pkg):
    """A pip-installed family declares ``[project.entry-points."clustergym.families"] toy = "toyfam:FAMILY"``:
    here the dist-info such an install writes, beside the package."""
    info = toy_pkg / "toyfam-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toyfam\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[clustergym.families]\ntoy = toyfam:FAMILY\n")
    out = _cli(["list"], toy_pkg, plugins=None)
    assert out.returncode == 0, out.stderr
    assert f"{TOY_ID}\n    agents: greedy, random" in out.stdout


def test_checkers_take_env_objects_and_catch_a_broken_env(toy_pkg):
    """``check_env`` on an env object (deep copies of it), and a toy env that draws from numpy's global RNG
    instead of ``self.np_random`` fails the same-seed check."""
    import numpy as np
    import toyfam

    clustergym.register_family(toyfam.FAMILY)
    testing.check_env(gym.make(TOY_ID, horizon=30), steps=40)

    class GlobalRNG(toyfam.env.TwoMachineEnv):
        def step(self, action):
            obs, r, term, trunc, info = super().step(action)
            return obs, r + float(np.random.random()), term, trunc, info

    with pytest.raises(AssertionError, match="same seed"):
        testing.check_determinism(lambda: GlobalRNG(horizon=30), steps=20)
    with pytest.raises(AssertionError, match="same seed"):
        testing.check_env(GlobalRNG(horizon=30), steps=20)


def test_cli_trains_with_the_family_hyperparameters_and_ranges_then_tunes(toy_pkg):
    """``clustergym train`` reads the family's own hyperparameter file (no --hp) and draws a parameter pool from
    its ``PARAM_RANGES``; ``clustergym tune`` scores against its ``TUNING_REFERENCE``."""
    pytest.importorskip("stable_baselines3")
    pytest.importorskip("optuna")
    cwd = toy_pkg
    tr = _cli(["train", TOY_ID, "--timesteps", "128", "--param-draws", "2", "--no-progress", "--out", "pool"], cwd)
    assert tr.returncode == 0, tr.stderr
    meta = json.loads((cwd / "pool" / "clustergym.json").read_text())
    assert meta["n_envs"] == 2 and meta["hyperparams"]["n_steps"] == 32 and meta["hyperparams"]["gamma"] == 0.0
    assert meta["param_pool"]["ranges"] == {"fast": [0.6, 0.9]}
    assert all(0.6 <= s["fast"] <= 0.9 for s in meta["param_pool"]["settings"])

    tu = _cli(["tune", TOY_ID, "--trials", "2", "--timesteps", "64", "--instances", "900-901", "--horizon", "10",
               "--train-seeds", "1", "--n-envs", "2", "--no-progress", "--out", "tune"], cwd)
    assert tu.returncode == 0, tu.stderr
    rec = json.loads((cwd / "tune" / "tuning.json").read_text())
    assert rec["reference"] == "greedy" and len(rec["trials"]) == 2
    assert all(t["state"] == "COMPLETE" and math.isfinite(t["value"]) for t in rec["trials"])


def test_the_bench_times_the_family_training(toy_pkg):
    """The family's ``BENCH_THROUGHPUT`` hook gives it a "PPO training, env-steps/s" row, labelled by its number."""
    pytest.importorskip("stable_baselines3")
    import toyfam
    from clustergym.bench.throughput import throughput_envs, throughput_rows

    clustergym.register_family(toyfam.FAMILY)
    mine = [r for r in throughput_envs() if r[1] == TOY_ID]
    assert mine == [("T1", TOY_ID, {}, "auto")]
    assert [r[0] for r in throughput_envs()][:4] == ["P1", "P1", "P2", "P3"]  # the shipped rows come first
    rows = throughput_rows(quick=True, n_envs_list=(2,), envs=mine, rollout=64)
    assert [r.what.split(":")[1].split()[0] for r in rows] == ["CartPole-v1", "T1"] and rows[1].measured > 0


def _files(folder) -> dict[str, int]:
    return {str(p.relative_to(folder)): len(p.read_text().splitlines()) for p in sorted(folder.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


def test_the_family_is_one_folder_of_the_size_the_docs_give():
    """docs/extending.md states how many files and lines the toy family has; all of it is in its folder."""
    files = _files(TOY_SOURCE)
    assert set(files) == {"__init__.py", "env.py", "agents.py", "drl_hooks.py", "hyperparams/ppo.yml"}
    text = (REPO_ROOT / "docs" / "extending.md").read_text()
    stated = re.search(r"the toy family is (\d+) files and (\d+) lines", text)
    assert stated, "docs/extending.md no longer states the toy family's size"
    assert (int(stated[1]), int(stated[2])) == (len(files), sum(files.values())), files
