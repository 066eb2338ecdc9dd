"""The observation pipeline shared by training and evaluation (SPEC §8), and the family DRL hooks.

A saved model must see at evaluation exactly the observations it was trained on, so both sides use
:class:`ObsPipeline`:

* :class:`EmpiricalStats` — the statistics a learner needs but the raw observation lacks, updated
  only from what a real scheduler sees (observations and ``info["feedback"]``, never metrics); each
  family's ``drl_hooks.Stats`` (named by its ``FamilySpec``) computes them:

  =========================  =====================================================================
  family                     statistics appended (all in [0, 1] or means of observed quantities)
  =========================  =====================================================================
  multiserver-channel (P1)   per channel: mean realised utility v̂_e (0 if untried) and the share
                             of slots it was used n_e / t; per port: share of slots with a job
  multiserver-allocation     per port: share of slots with a job (the hidden ρ_l, eq. 1);
  (P2)                       per port: mean realised reward x_l q_l when it had a job
  ringallreduce (P3)         none: the observation already holds jobs, servers and links; what is
                             hidden is future arrivals only
  approxjobs (P4)            per machine: mean work per used slot (the hidden service rate,
                             §III) and the share of slots it was used
  =========================  =====================================================================

* :class:`ObsPipeline` — flattens the Dict observation (``gymnasium.spaces.flatten``) and appends
  the statistics. :class:`DRLObservation` is the Gymnasium wrapper around it (training, and the
  public :class:`clustergym.wrappers.FlattenWithStats`); :class:`clustergym.learning.agent.SB3Agent`
  uses the same pipeline when it acts in ``clustergym run`` (evaluation).

No torch or SB3 here: importing this module is cheap.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["EmpiricalStats", "ObsPipeline", "DRLObservation", "sb3_mask", "unscale_action", "box_bounds", "hook"]


def hook(family: str, name: str):
    """The family's DRL hook ``name`` (``FamilySpec.drl_hooks``), or None (no hook, or an unknown family)."""
    from clustergym.family import FAMILIES

    spec = FAMILIES.get(family)
    return None if spec is None else spec.hook(name)


class EmpiricalStats:
    """Running statistics from observations and feedback only (see the module docstring).

    The family's ``drl_hooks.Stats`` holds and updates them; a family without it appends nothing.
    """

    def __init__(self, family: str, problem: Any, pad: dict | None = None):
        self.family = family
        self.problem = problem
        cls = hook(family, "Stats")
        # pad: the env's padding kwargs (clustergym.env.env_padding), for fixed-size statistics across instances
        self._impl = None if cls is None else (cls(problem, pad=pad) if pad else cls(problem))
        self.size = 0 if self._impl is None else int(self._impl.size)
        self.reset()

    def reset(self) -> None:
        self.t = 0
        if self._impl is not None:
            self._impl.reset()

    def update(self, obs: dict, info: dict) -> None:
        """After a step: ``obs`` is the *previous* observation (the slot just played), ``info`` its
        step info (only ``feedback`` is read)."""
        fb = info.get("feedback", {})
        self.t += 1
        if self._impl is not None:
            self._impl.update(obs, fb)

    def vector(self) -> np.ndarray:
        if self.size == 0:
            return np.zeros(0, dtype=np.float32)
        t = max(self.t, 1)
        return np.concatenate(self._impl.parts(t)).astype(np.float32)


class ObsPipeline:
    """Dict observation -> flat float32 vector [flatten(obs), statistics]."""

    def __init__(self, family: str, problem: Any, obs_space: gym.spaces.Space, stats: bool = True,
                 pad: dict | None = None):
        self.obs_space = obs_space
        self.problem = problem
        self.stats = EmpiricalStats(family, problem, pad) if stats else None
        self.size = int(gym.spaces.flatdim(obs_space)) + (self.stats.size if self.stats else 0)
        self.space = gym.spaces.Box(-np.inf, np.inf, shape=(self.size,), dtype=np.float32)
        self._last = None

    def reset(self, obs) -> np.ndarray:
        if self.stats is not None:
            self.stats.reset()
        return self.observe(obs)

    def update(self, info: dict) -> None:
        if self.stats is not None:
            self.stats.update(self._last, info)

    def observe(self, obs) -> np.ndarray:
        self._last = obs
        flat = gym.spaces.flatten(self.obs_space, obs).astype(np.float32)
        if self.stats is None or self.stats.size == 0:
            return flat
        return np.concatenate([flat, self.stats.vector()])


class DRLObservation(gym.Wrapper):
    """Flattened observation plus empirical statistics (:class:`ObsPipeline`)."""

    def __init__(self, env: gym.Env, stats: bool = True):
        super().__init__(env)
        from clustergym.env import env_padding

        u = env.unwrapped
        self._stats_on = stats
        self.pipeline = ObsPipeline(u.family, u.problem, env.observation_space, stats, pad=env_padding(u))
        self.observation_space = self.pipeline.space

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        u = self.env.unwrapped
        if u.problem is not self.pipeline.problem:  # another instance (same spaces): statistics of its problem
            from clustergym.env import env_padding

            self.pipeline = ObsPipeline(u.family, u.problem, self.env.observation_space, self._stats_on,
                                        pad=env_padding(u))
        return self.pipeline.reset(obs), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.pipeline.update(info)
        return self.pipeline.observe(obs), reward, terminated, truncated, info


def unscale_action(a: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """[-1, 1] -> [low, high] per entry (entries with low == high map to low; see ``clustergym.wrappers.RescaleBox``)."""
    a = np.clip(np.asarray(a, dtype=np.float64), -1.0, 1.0)
    return low + (a + 1.0) * 0.5 * (high - low)


def box_bounds(family: str, problem, space=None, pad: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Exact (float64) bounds of a Box action: the family's ``box_bounds`` hook (P2's [0, a_l^k] of eq. 3: the
    float32 space bounds can round a up by more than the env's feasibility tolerance; on a padded env, ``pad``,
    the fractions [0, 1]), else the space's."""
    bounds = hook(family, "box_bounds")
    if bounds is not None:
        return bounds(problem, pad=pad) if pad else bounds(problem)
    if space is None:
        raise ValueError(f"no Box action bounds known for family {family!r}")
    return space.low.astype(np.float64), space.high.astype(np.float64)


def sb3_mask(family: str, info: dict) -> np.ndarray | None:
    """The flat per-value action mask sb3-contrib expects, from public ``info["action_mask"]``.

    The family's ``drl_hooks.sb3_mask`` maps it; equals ``env.action_masks()`` (tested): P1 gives a
    per-channel mask (|E|,) -> per channel [0 allowed, 1 allowed]; P4's info mask is already per machine
    [idle, slot 1..J].
    """
    m = info.get("action_mask")
    if m is None:
        return None
    m = np.asarray(m, dtype=bool)
    fn = hook(family, "sb3_mask")
    if fn is None:
        raise ValueError(f"no MaskablePPO mask for family {family!r}")
    return fn(m)
