"""Wrappers that fit clustergym envs to the RL trainers researchers already use (docs/recipes.md).

Gymnasium wrappers (single env, also per sub-env inside ``gym.vector.SyncVectorEnv``):

=============================  ===============================================================
:class:`FlattenWithStats`      Dict observation -> flat float32 vector (the observation already
                               carries the running statistics from public feedback, the learner's
                               estimates of the hidden means; what ``clustergym train`` feeds its
                               policies): ``gymnasium.wrappers.FlattenObservation`` by another name
:class:`RescaleBox`            Box actions in [min_action, max_action] (SB3 SAC, CleanRL
                               continuous PPO); unlike ``gymnasium.wrappers.RescaleAction`` it
                               accepts entries with low == high (clustergym's own Box actions
                               have none; a user's env may)
:class:`FlattenAction`         a Box of any shape as a 1-D Box (RLlib, most continuous trainers)
:class:`MultiBinaryAsMultiDiscrete`  MultiBinary(n) as MultiDiscrete([2] * n) (RLlib, Tianshou)
=============================  ===============================================================

PettingZoo wrapper:

=============================  ===============================================================
:class:`HomogeneousAgents`     every agent gets the same flat Box observation space and the same
                               action space (zero padding), as SuperSuit's
                               ``pettingzoo_env_to_vec_env_v1`` and parameter sharing require
=============================  ===============================================================

None of them changes the dynamics or what an agent may see: they reshape spaces (the statistics in the
observation are the env's own, computed from public feedback only).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from pettingzoo.utils.env import ParallelEnv

from clustergym.learning.pipeline import DRLObservation

__all__ = ["FlattenWithStats", "RescaleBox", "FlattenAction", "MultiBinaryAsMultiDiscrete", "HomogeneousAgents",
           "action_bounds"]


class FlattenWithStats(DRLObservation):
    """Flat float32 observation ``gymnasium.spaces.flatten(obs)``: the same vector as
    ``gymnasium.wrappers.FlattenObservation`` (cast to float32).

    The env's observation carries the statistics (per family: empirical mean realised utility and
    usage share per channel on P1, arrival share and mean reward per port on P2, mean work per used
    slot on P4, none on P3), updated by the env after each step from public feedback only — what a
    real scheduler sees, never ``info["metrics"]``. ``stats=False`` leaves the statistics keys out.
    ``layout="legacy"`` gives the vector of earlier versions (``clustergym.learning.pipeline``: the
    observation keys of then, then the statistics), what models trained then expect.
    ``time_cap``: the slot index is flattened as ``min(t, time_cap)`` (``clustergym.core.env.TIME_CAP`` for the
    flat MLPs ``clustergym train`` writes). This is the observation ``clustergym train`` and ``sb3:`` agents use.
    """

    def __init__(self, env: gym.Env, stats: bool = True, layout: str = "full", time_cap: float | None = None):
        super().__init__(env, stats=stats, layout=layout, time_cap=time_cap)


def action_bounds(env: gym.Env) -> tuple[np.ndarray, np.ndarray]:
    """Exact float64 bounds (low, high) of a Box action: the env's ``action_bounds()`` where it has
    one (P2: [0, a_l^k], eq. 3 — the float32 space bounds can round a up past the env's feasibility
    tolerance), else the space's bounds."""
    u = env.unwrapped
    if hasattr(u, "action_bounds"):
        lo, hi = u.action_bounds()
    else:
        box = env.action_space
        if not isinstance(box, spaces.Box):
            raise TypeError(f"Box action bounds asked of a {type(box).__name__} action space")
        lo, hi = box.low, box.high
    return np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)


class RescaleBox(gym.ActionWrapper):
    """Box actions in ``[min_action, max_action]`` mapped affinely to the env's ``[low, high]``.

    ``gymnasium.wrappers.RescaleAction`` divides by ``high - low`` and so returns NaN for entries
    with ``low == high``; here such entries map to ``low`` whatever the agent sends (they carry no
    choice). Actions outside the range are clipped first, as SB3 and CleanRL expect.
    """

    def __init__(self, env: gym.Env, min_action: float = -1.0, max_action: float = 1.0):
        if not isinstance(env.action_space, spaces.Box):
            raise ValueError(f"RescaleBox needs a Box action space, got {env.action_space}")
        if not (np.isfinite(min_action) and np.isfinite(max_action) and min_action < max_action):
            raise ValueError(f"RescaleBox needs finite min_action < max_action, got {min_action}, {max_action}")
        super().__init__(env)
        self._low, self._high = action_bounds(env)
        self._min, self._max = float(min_action), float(max_action)
        self.action_space = spaces.Box(self._min, self._max, shape=env.action_space.shape, dtype=np.float32)

    def action(self, action):
        a = np.clip(np.asarray(action, dtype=np.float64), self._min, self._max)
        return self._low + (a - self._min) / (self._max - self._min) * (self._high - self._low)


class FlattenAction(gym.ActionWrapper):
    """A Box action of any shape as a 1-D Box (P2's (|E|, K) allocation as |E|·K numbers)."""

    def __init__(self, env: gym.Env):
        if not isinstance(env.action_space, spaces.Box):
            raise ValueError(f"FlattenAction needs a Box action space, got {env.action_space}")
        super().__init__(env)
        self._shape = env.action_space.shape
        sp = env.action_space
        self.action_space = spaces.Box(sp.low.reshape(-1), sp.high.reshape(-1), dtype=sp.dtype)

    def action(self, action):
        return np.asarray(action).reshape(self._shape)


class MultiBinaryAsMultiDiscrete(gym.ActionWrapper):
    """``MultiBinary(n)`` as ``MultiDiscrete([2] * n)`` (same values; ``action_masks()`` unchanged:
    sb3-contrib already reads a MultiBinary mask per value, two entries per channel)."""

    def __init__(self, env: gym.Env):
        sp = env.action_space
        if not isinstance(sp, spaces.MultiBinary) or len(sp.shape) != 1:
            raise ValueError(f"MultiBinaryAsMultiDiscrete needs a 1-D MultiBinary action space, got {sp}")
        super().__init__(env)
        self.action_space = spaces.MultiDiscrete(np.full(sp.n, 2, dtype=np.int64))

    def action(self, action):
        return np.asarray(action).astype(np.int8)

    def action_masks(self) -> np.ndarray:
        return getattr(self.env.unwrapped, "action_masks")()


# -- PettingZoo ------------------------------------------------------------------------------------
def _pad(x: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n, dtype=np.float32)
    out[:x.size] = x
    return out


class HomogeneousAgents(ParallelEnv):
    """A PettingZoo ``ParallelEnv`` whose agents all have the same spaces (zero padding).

    SuperSuit's ``pettingzoo_env_to_vec_env_v1`` (one shared policy over all agents) needs every
    agent to have one observation space and one action space; its own ``pad_action_space_v0``
    handles only Discrete and Box, and ``flatten_v0`` no Dict. Here:

    * observations: ``gymnasium.spaces.flatten`` of the agent's own observation (a float32 vector),
      zero-padded to the longest agent's length; ``infos[agent]["obs_size"]`` is the unpadded one;
    * actions: all ``Discrete(n_i)`` -> ``Discrete(max n_i)`` (a value >= n_i is the agent's
      action 0, idle); all ``MultiBinary(n_i)`` -> ``MultiDiscrete([2] * max n_i)`` (same values;
      entries past n_i are ignored; SB3 emits float MultiBinary actions, which SuperSuit's
      ``concat_vec_envs_v1`` cannot cast into an int8 batch); any Box (the P2 servers' (|R-edges|, K) allocations) -> flat ``Box`` of the longest
      length, entries past the agent's own size ignored, bounds of the padding [0, 0];
    * ``infos[agent]["action_mask"]`` (int8) padded with zeros (padded entries never allowed).

    Rewards, dynamics and the per-agent feedback are the wrapped env's.
    """

    def __init__(self, env: Any):
        self.env = env
        self.possible_agents = list(env.possible_agents)
        self.metadata = {**getattr(env, "metadata", {}), "name": env.metadata.get("name", "clustergym") + "_homogeneous"}
        self.render_mode = getattr(env, "render_mode", None)
        ag = self.possible_agents
        self._obs_in = {a: env.observation_space(a) for a in ag}
        self._act_in = {a: env.action_space(a) for a in ag}
        n_obs = max(int(spaces.flatdim(s)) for s in self._obs_in.values())
        self._obs_space = spaces.Box(-np.inf, np.inf, shape=(n_obs,), dtype=np.float32)
        acts = list(self._act_in.values())
        self._act_space: spaces.Space
        if all(isinstance(s, spaces.Discrete) for s in acts):
            self._kind = "discrete"
            self._act_space = spaces.Discrete(max(int(s.n) for s in acts))
        elif all(isinstance(s, spaces.MultiBinary) and len(s.shape) == 1 for s in acts):
            self._kind = "multibinary"
            # MultiDiscrete([2] * n), not MultiBinary(n): SB3 emits float MultiBinary actions, which
            # SuperSuit's concat_vec_envs_v1 cannot cast into a MultiBinary (int8) batch.
            self._act_space = spaces.MultiDiscrete(np.full(max(int(s.n) for s in acts), 2, dtype=np.int64))
        elif all(isinstance(s, spaces.Box) for s in acts):
            self._kind = "box"
            n = max(int(np.prod(s.shape)) for s in acts)
            lo, hi = np.zeros(n, np.float32), np.zeros(n, np.float32)
            lo_all = np.stack([_pad(s.low.reshape(-1), n) for s in acts])
            hi_all = np.stack([_pad(s.high.reshape(-1), n) for s in acts])
            lo, hi = lo_all.min(axis=0), hi_all.max(axis=0)
            self._act_space = spaces.Box(lo, hi, dtype=np.float32)
        else:
            raise ValueError(f"HomogeneousAgents: agents' action spaces must all be Discrete, all MultiBinary "
                             f"or all Box, got {sorted({type(s).__name__ for s in acts})}")

    # -- spaces ----------------------------------------------------------------------------------
    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs_space

    def action_space(self, agent: str) -> spaces.Space:
        return self._act_space

    @property
    def agents(self) -> list[str]:
        return self.env.agents

    @property
    def num_agents(self) -> int:
        return len(self.env.agents)

    @property
    def max_num_agents(self) -> int:
        return len(self.possible_agents)

    @property
    def unwrapped(self):
        return self.env.unwrapped if hasattr(self.env, "unwrapped") else self.env

    # -- conversion ------------------------------------------------------------------------------
    def _obs(self, obs: dict) -> dict:
        n = self._obs_space.shape[0]
        return {a: _pad(np.asarray(spaces.flatten(self._obs_in[a], o)).astype(np.float32), n) for a, o in obs.items()}

    def _infos(self, infos: dict) -> dict:
        out = {}
        space = self._act_space
        n_act = int(space.n) if isinstance(space, spaces.Discrete) else int(np.prod(space.shape or ()))
        for a, i in infos.items():
            d = dict(i)
            d["obs_size"] = int(spaces.flatdim(self._obs_in[a]))
            if "action_mask" in d:
                m = np.zeros(n_act, dtype=np.int8)
                src = np.asarray(d["action_mask"]).reshape(-1)
                m[:src.size] = src
                d["action_mask"] = m
            out[a] = d
        return out

    def _action(self, agent: str, action: Any):
        sp = self._act_in[agent]
        if self._kind == "discrete":
            v = int(np.asarray(action).reshape(()))
            return v if v < sp.n else 0
        a = np.asarray(action).reshape(-1)
        size = int(np.prod(sp.shape))
        a = a[:size]
        if self._kind == "multibinary":
            return a.astype(np.int8)
        return a.reshape(sp.shape).astype(sp.dtype)

    # -- API -------------------------------------------------------------------------------------
    def reset(self, seed: int | None = None, options: dict | None = None):
        obs, infos = self.env.reset(seed=seed, options=options)
        return self._obs(obs), self._infos(infos)

    def step(self, actions: dict):
        act = {a: self._action(a, v) for a, v in actions.items()}
        obs, rew, term, trunc, infos = self.env.step(act)
        return self._obs(obs), rew, term, trunc, self._infos(infos)

    def state(self) -> np.ndarray:
        return self.env.state()

    @property
    def state_space(self):
        return self.env.state_space

    def render(self):
        return self.env.render()

    def close(self) -> None:
        self.env.close()
