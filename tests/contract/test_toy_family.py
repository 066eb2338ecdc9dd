"""A new problem family is one folder and one registration line.

The test writes a tiny family package (a 2-machine env, its FamilySpec and a random agent) into
``tmp_path``, registers it with ``clustergym.register_family`` (in-process) or ``CLUSTERGYM_PLUGINS``
(the command line), and shows it listed, checked by ``clustergym.runner.testing``, trained with PPO for a few
steps and evaluated through ``clustergym run`` — with no edit to clustergym.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import textwrap

import gymnasium as gym
import pytest

import clustergym
from clustergym.core import agent as agent_mod
from clustergym.core import family as family_mod
from clustergym.runner import testing
from tests.helpers import ROOT as REPO_ROOT

ROOT = str(REPO_ROOT)
TOY_ID = "toyfam/TwoMachine-v0"

# The whole family: one folder (here one file, toyfam/__init__.py). Everything a family needs, nothing more.
TOY_FAMILY = textwrap.dedent('''
    """Toy family: two machines with hidden mean service rates; each slot the scheduler picks one."""
    import numpy as np
    from gymnasium import spaces

    from clustergym.core.agent import BaseAgent
    from clustergym.core.scenario import Scenario, check_real
    from clustergym.core.env import ClusterEnv
    from clustergym.core.family import EnvEntry, FamilySpec


    def make_scenario(name="paper", seed=0, fast=0.8):
        """Public problem: 2 machines; hidden truth: their mean service rates (one fast, one slow)."""
        if name != "paper":
            raise ValueError(f"scenario={name!r} is invalid: expected 'paper'")
        fast = check_real("fast", fast, 0.0, 1.0)
        rng = np.random.default_rng(seed)
        rates = np.array([fast, fast / 2])[rng.permutation(2)]  # (2,) hidden
        return Scenario(name=name, problem={"num_machines": 2}, truth={"rates": rates}, params={"fast": fast})


    class TwoMachineEnv(ClusterEnv):
        """Action Discrete(2): the machine to run; reward: its work, uniform in [0, 2 x rate]."""

        family = "toy-two-machine"

        def __init__(self, scenario="paper", scenario_seed=0, horizon=20, oracle=True, infeasible="repair",
                     render_mode=None, fast=0.8):
            super().__init__(horizon=horizon, infeasible=infeasible, render_mode=render_mode, oracle=oracle)
            self.scenario = make_scenario(scenario, scenario_seed, fast=fast)
            self.problem = self.scenario.problem
            self.observation_space = spaces.Dict({"t": spaces.Box(0.0, 1.0, (1,), np.float32)})
            self.action_space = spaces.Discrete(2)
            self._t, self._last = 0, None

        def _obs(self):
            return {"t": np.array([self._t / self.horizon], dtype=np.float32)}

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self._t, self._last = 0, None
            return self._obs(), {"t": 0}

        def step(self, action):
            a = int(self._as_int_action(action, (), "Discrete(2)"))
            if a not in (0, 1):
                raise ValueError(f"action {a} is out of range, expected Discrete(2)")
            rates = self.scenario.truth["rates"]
            work = float(self.np_random.uniform(0.0, 2.0 * rates[a]))
            self._t += 1
            self._last = a
            metrics = {"expected_reward": float(rates[a]), "repaired": 0}
            if self.oracle:
                metrics.update(oracle_reward=float(rates.max()), regret=float(rates.max() - rates[a]))
            info = {"feedback": {"machine": a, "work": work}, "metrics": metrics, "t": self._t}
            return self._obs(), work, False, self._t >= self.horizon, info

        def render(self):
            if self.render_mode == "ansi":
                return f"slot {self._t}: machine {self._last}"
            if self.render_mode == "rgb_array":
                img = np.zeros((8, 16, 3), dtype=np.uint8)
                img[:, 8 * (self._last or 0):8 * (self._last or 0) + 8] = 255
                return img


    class RandomToy(BaseAgent):
        name = "random"
        families = ("toy-two-machine",)

        def act(self, obs, info):
            return int(self.rng.integers(2))


    FAMILY = FamilySpec(
        name="toy-two-machine", number="T1", paper="toy",
        envs=(EnvEntry(id="toyfam/TwoMachine-v0", entry_point="toyfam:TwoMachineEnv"),),
        scenario="toyfam:make_scenario",
        agents=(("random", "toyfam:RandomToy"),),
    )
''')


@pytest.fixture
def toy_pkg(tmp_path, monkeypatch):
    """The toy family folder on sys.path; every registry is restored afterwards."""
    pkg = tmp_path / "toyfam"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(TOY_FAMILY)
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
    sys.modules.pop("toyfam", None)


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
    assert clustergym.list_agents(TOY_ID) == ["random"]
    assert agent_mod.env_family(TOY_ID) == "toy-two-machine"
    clustergym.register_family(toyfam.FAMILY)  # idempotent
    with pytest.raises(ValueError, match="already registered"):
        clustergym.register_family(family_mod.FamilySpec(name="toy-two-machine", number="T1", paper="x", envs=(),
                                                         scenario="toyfam:make_scenario"))
    with pytest.raises(ValueError, match="already belongs"):
        clustergym.register_family(family_mod.FamilySpec(name="other", number="T2", paper="x",
                                                         envs=toyfam.FAMILY.envs, scenario="toyfam:make_scenario"))
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
    assert f"{TOY_ID}\n    agents: random" in out.stdout and "clustergym/MultiServerChannel-v0" in out.stdout
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
    assert f"{TOY_ID}\n    agents: random" in out.stdout


def test_checkers_take_env_objects_and_catch_a_broken_env(toy_pkg):
    """``check_env`` on an env object (deep copies of it), and a toy env that draws from numpy's global RNG
    instead of ``self.np_random`` fails the same-seed check."""
    import numpy as np
    import toyfam

    clustergym.register_family(toyfam.FAMILY)
    testing.check_env(gym.make(TOY_ID, horizon=30), steps=40)

    class GlobalRNG(toyfam.TwoMachineEnv):
        def step(self, action):
            obs, r, term, trunc, info = super().step(action)
            return obs, r + float(np.random.random()), term, trunc, info

    with pytest.raises(AssertionError, match="same seed"):
        testing.check_determinism(lambda: GlobalRNG(horizon=30), steps=20)
    with pytest.raises(AssertionError, match="same seed"):
        testing.check_env(GlobalRNG(horizon=30), steps=20)
