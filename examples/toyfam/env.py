"""The toy family's scenario (public problem: 2 machines; hidden truth: their rates) and env."""

import numpy as np
from gymnasium import spaces

from clustergym.core.env import ClusterEnv, InstanceSource
from clustergym.core.scenario import Scenario, check_real


def make_scenario(name="paper", seed=0, fast=0.8):
    """One machine serves at rate ``fast``, the other at 30-70% of it; the share and the order are drawn from
    ``seed``."""
    if name != "paper":
        raise ValueError(f"scenario={name!r} is invalid: expected 'paper'")
    fast = check_real("fast", fast, 0.0, 1.0)
    rng = np.random.default_rng(seed)
    rates = np.array([fast, fast * rng.uniform(0.3, 0.7)])[rng.permutation(2)]  # (2,) hidden
    return Scenario(name=name, problem={"num_machines": 2}, truth={"rates": rates}, params={"fast": fast})


class TwoMachineEnv(ClusterEnv):
    """Action Discrete(2): the machine to run; reward: its work, uniform in [0, 2 x rate].

    ``instances`` (scenario seeds, one drawn at each reset: the training pool of ``clustergym train``) and the
    scenario parameter ``fast`` (what ``--param-draws`` varies within the family's ``PARAM_RANGES``) come with
    clustergym's :class:`~clustergym.core.env.InstanceSource`."""

    family = "toy-two-machine"

    def __init__(self, scenario="paper", scenario_seed=0, horizon=20, oracle=True, infeasible="repair",
                 render_mode=None, instances=None, **params):
        super().__init__(horizon=horizon, infeasible=infeasible, render_mode=render_mode, oracle=oracle)
        self._source = InstanceSource(scenario, params, make_scenario, ("paper",), scenario_seed, instances)
        self.action_space, self.observation_space = self._spaces(self._source.first.problem, scenario_seed)
        self._load(self._source.first)
        self._t, self._last = 0, None

    def _spaces(self, problem, k):
        return spaces.Discrete(2), spaces.Dict({"t": spaces.Box(0.0, 1.0, (1,), np.float32)})

    def _load(self, scenario):
        self.scenario = scenario
        self.problem = scenario.problem

    def _obs(self):
        return {"t": np.array([self._t / self.horizon], dtype=np.float32)}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._begin_instance(seed, options)  # options["scenario_seed"], or a draw from `instances`
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
