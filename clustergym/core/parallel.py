"""Base class of the PettingZoo ``ParallelEnv`` versions: one core, two interfaces.

A :class:`ClusterParallelEnv` *holds one single-agent env* (``single_env``, built from the same
kwargs) and drives it: every ``step`` joins the agents' actions into the single env's joint
action, calls ``single_env.step`` once, and splits what comes back (observation, reward, info)
into per-agent pieces. Dynamics, arrivals, the reward and the repair of infeasible actions all
stay in the single env; a family's subclass only says how actions join and how the results split
(``envs/<family>/*parallel.py``). See docs/multiagent.md.

Conventions shared by every family:

* ``reset(seed, options)`` takes the single env's options (``{"scenario_seed": k}`` switches to
  instance k; unknown keys raise, except ``"options"``, the key PettingZoo's own api tests probe
  with, which is ignored); with the ``instances`` kwarg each reset draws an instance as the single
  env does. ``possible_agents`` and the per-agent spaces are fixed for the env's lifetime: an
  instance whose agents or spaces differ is a ValueError naming the padding kwargs.
* ``possible_agents`` are fixed by the instance's shape; ``agents`` is the full list from
  ``reset`` until the episode ends (truncation at the horizon, or termination where the problem
  itself ends), then empty. All agents end together.
* ``observation_space(agent)`` / ``action_space(agent)`` return the same cached object for the
  lifetime of the env; ``state_space`` is a Box and ``state()`` the single env's (public)
  observation flattened — the global view for centralised training.
* Observations and ``state()`` hold public information only (never the scenario's hidden truth).
* ``infos[agent]`` carries ``"feedback"`` (the agent's slice of the single env's feedback),
  ``"t"``, ``"action_mask"`` where the single env has masks, and ``"metrics"``: the single env's
  evaluation-only metrics dict (the same object for every agent), computed with the hidden truth;
  learners must not read it.
* ``step`` needs an action for every live agent; a missing or unknown agent, or an action of the
  wrong shape, raises ValueError naming the agent and its space (the single env then validates
  values and handles infeasible actions by its ``infeasible`` mode; a rejected action changes
  nothing).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np
from pettingzoo import ParallelEnv

from clustergym.core.env import ClusterEnv

__all__ = ["ClusterParallelEnv"]


class ClusterParallelEnv(ParallelEnv):
    """Common plumbing of the clustergym ParallelEnvs; subclasses implement the ``_``-hooks below."""

    metadata = {"render_modes": ["ansi", "rgb_array"], "name": "clustergym_parallel", "is_parallelizable": True}

    def __init__(self, single_env: ClusterEnv, agents: list[str],
                 observation_spaces: Mapping[str, gymnasium.spaces.Space],
                 action_spaces: Mapping[str, gymnasium.spaces.Space], state_space: gymnasium.spaces.Box):
        self.single_env = single_env  # the one simulator core this env drives
        self.problem = single_env.problem  # public problem (what agents may know)
        self.render_mode = single_env.render_mode
        self.possible_agents = list(agents)
        self._observation_spaces = dict(observation_spaces)
        self._action_spaces = dict(action_spaces)
        self.state_space = state_space
        self.agents: list[str] = []
        self._obs = None  # the single env's latest observation (public)

    # -- spaces (fixed, cached: the same object every call) -------------------------------------
    def observation_space(self, agent: str) -> gymnasium.spaces.Space:
        return self._observation_spaces[agent]

    def action_space(self, agent: str) -> gymnasium.spaces.Space:
        return self._action_spaces[agent]

    # -- PettingZoo API ------------------------------------------------------------------------
    def reset(self, seed: int | None = None, options: dict | None = None):
        if isinstance(options, dict) and "options" in options:
            # PettingZoo's own api tests probe reset with options={"options": 1}: that key alone is ignored.
            options = {k: v for k, v in options.items() if k != "options"}
        self.agents = []
        obs, info = self.single_env.reset(seed=seed, options=options)
        self._on_instance()
        self.agents = list(self.possible_agents)
        self._obs = obs
        self._on_reset(obs, info)
        return self._observe(obs, info), self._infos(info, None)

    def step(self, actions: dict[str, Any]):
        if not self.agents:
            raise RuntimeError("the episode is over (or reset() was never called): call reset() before step()")
        joint = self.joint_action(actions)
        obs, reward, terminated, truncated, info = self.single_env.step(joint)  # the one core acts
        rewards = self._split_reward(float(reward), info)
        self._obs = obs
        observations = self._observe(obs, info)
        infos = self._infos(info, rewards)
        terms = dict.fromkeys(self.agents, bool(terminated))
        truncs = dict.fromkeys(self.agents, bool(truncated))
        if terminated or truncated:
            self.agents = []
        return observations, rewards, terms, truncs, infos

    def state(self) -> np.ndarray:
        """The global observation (the single env's public observation, flattened) for centralised training."""
        if self._obs is None:
            raise RuntimeError("call reset() before state()")
        return self._state(self._obs)

    def render(self):
        return self.single_env.render()

    def close(self) -> None:
        self.single_env.close()

    # -- joint actions -------------------------------------------------------------------------
    def joint_action(self, actions: dict[str, Any]) -> np.ndarray:
        """The single env's joint action made of one action per agent (ValueError if one is missing/misshapen)."""
        if not isinstance(actions, dict):
            raise ValueError(f"actions must be a dict agent -> action, got {type(actions).__name__}")
        missing = [a for a in self.possible_agents if a not in actions]
        unknown = [a for a in actions if a not in self._action_spaces]
        if missing or unknown:
            parts = []
            if missing:
                parts.append(f"missing action(s) for {', '.join(map(str, missing[:5]))}{' ...' if len(missing) > 5 else ''}")
            if unknown:
                parts.append(f"unknown agent(s) {', '.join(map(str, unknown[:5]))}")
            raise ValueError(f"{'; '.join(parts)} (every live agent must act; agents: {self.possible_agents[0]} ... "
                             f"{self.possible_agents[-1]})")
        vals = []
        for agent in self.possible_agents:
            try:
                v = np.asarray(actions[agent])
            except Exception as exc:  # pragma: no cover - exotic objects
                raise ValueError(f"action of {agent} is not array-like: {exc}") from None
            space = self._action_spaces[agent]
            if v.shape != space.shape:
                raise ValueError(f"action of {agent} has shape {v.shape}, expected {space.shape} ({space})")
            vals.append(v)
        return self._join(vals)

    def split_action(self, joint: Any) -> dict[str, np.ndarray]:
        """Inverse of :meth:`joint_action`: each agent's part of a joint action of the single env."""
        return self._split(np.asarray(joint))

    # -- hooks for subclasses ------------------------------------------------------------------
    def _on_instance(self) -> None:
        """After the single env's reset: follow an instance switch (``problem`` and per-agent structures)."""
        self.problem = self.single_env.problem

    def _rebuild(self, problem: Any, T: float) -> None:
        """Adopt another instance's agents and spaces (``_build``), which must equal this env's (the spaces
        are fixed for the env's lifetime); else ValueError naming the padding kwargs. Restores the old
        index arrays on failure."""
        saved = dict(self.__dict__)
        agents, obs_spaces, act_spaces, state_space = self._build(problem, T)
        same = (agents == self.possible_agents and state_space == self.state_space
                and all(obs_spaces[a] == self._observation_spaces[a] and act_spaces[a] == self._action_spaces[a]
                        for a in agents))
        if not same:
            self.__dict__.clear()
            self.__dict__.update(saved)
            u = self.single_env
            pads = ", ".join(getattr(u, "pad_kwargs", ())) or "none"
            raise ValueError(f"instance scenario_seed={u.scenario_seed} has other agents or per-agent spaces than "
                             f"this ParallelEnv (they are fixed for its lifetime); build it with the padding "
                             f"kwarg(s) {pads} for fixed per-agent spaces across instances")
        self.problem = problem

    def _on_reset(self, obs: dict, info: dict) -> None:
        """Per-episode bookkeeping (optional)."""

    def _join(self, vals: list[np.ndarray]) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _split(self, joint: np.ndarray) -> dict[str, np.ndarray]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _observe(self, obs: dict, info: dict) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _infos(self, info: dict, rewards: dict[str, float] | None) -> dict[str, dict]:  # pragma: no cover
        raise NotImplementedError

    def _split_reward(self, reward: float, info: dict) -> dict[str, float]:  # pragma: no cover - abstract
        """Per-agent rewards of the slot just played; called before ``self._obs`` moves to the next slot."""
        raise NotImplementedError

    def _state(self, obs: dict) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError
