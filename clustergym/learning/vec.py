"""An SB3 ``VecEnv`` over clustergym's native vector envs: N sub-envs stepped as arrays in one call.

``clustergym train --vec native`` uses it where a family has a native vector env (P1, P2, P3 with
``action_mode="ring_size"``, and P4):
``gym.make_vec(id, num_envs=N, vectorization_mode="vector_entry_point")`` steps every sub-env in one
batched kernel, where SB3's ``DummyVecEnv`` calls N single envs and N wrapper chains one after another.
The adapter gives SB3 exactly what ``DummyVecEnv`` over ``make_train_env`` gives:

* observations: the Dict observation of every sub-env flattened as ``gymnasium.spaces.flatten`` does
  (:func:`clustergym.learning.pipeline.flatten_batch`, one array operation per key), i.e. what
  :class:`clustergym.learning.wrappers.FlattenWithStats` gives the single env (with ``stats=False``, without the
  statistics keys);
* actions: Box actions in [-1, 1] are mapped to the env's exact bounds per sub-env, as
  :class:`clustergym.learning.wrappers.RescaleBox` does; discrete actions are passed as they come;
* episode ends: SB3 resets a finished sub-env within the same step and puts the last observation in
  ``info["terminal_observation"]`` (``"TimeLimit.truncated"`` on a horizon end, so PPO bootstraps),
  while Gymnasium's native vector envs reset at the next step. The adapter resets the finished
  sub-envs at once with ``reset(options={"reset_mask": done})`` — the same seedless reset the native
  autoreset performs — so sub-env i seeded ``seed + i`` replays the single env of ``DummyVecEnv``'s
  sub-env i step for step (tested);
* masks: ``env_method("action_masks")`` gives the vector env's per-sub-env masks (sb3-contrib's
  MaskablePPO).

Per-episode returns for SB3's logger and ``monitor/`` come from SB3's ``VecMonitor`` around it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.envs.registration import load_env_creator
from stable_baselines3.common.vec_env.base_vec_env import VecEnv

from clustergym.core.env import env_padding
from clustergym.learning.pipeline import box_bounds, flat_size, flatten_batch, layout_columns, layout_keys, time_caps

__all__ = ["NativeVecEnv", "has_native_vector", "native_vector_gap"]


def native_vector_gap(env_id: str, env_kwargs: dict | None = None) -> str | None:
    """Why ``env_id`` with ``env_kwargs`` cannot be stepped by a native vector env, or None when it can: the id
    registers none (``vector_entry_point``), or its vector env's ``unsupported(env_kwargs)`` names a kwarg it
    does not step (P3's runs ``action_mode="ring_size"`` only)."""
    spec = gym.spec(env_id)
    if spec.vector_entry_point is None:
        return "has no native vector env"
    cls = spec.vector_entry_point
    cls = load_env_creator(cls) if isinstance(cls, str) else cls
    check = getattr(cls, "unsupported", None)
    return None if check is None else check({**spec.kwargs, **(env_kwargs or {})})


def has_native_vector(env_id: str, env_kwargs: dict | None = None) -> bool:
    """Whether ``env_id`` registers a native vector env (``vector_entry_point``) that steps ``env_kwargs``."""
    return native_vector_gap(env_id, env_kwargs) is None


def _make_native(env_id: str, n_envs: int, env_kwargs: dict):
    why = native_vector_gap(env_id, env_kwargs)
    if why is not None:
        raise ValueError(f"{env_id} {why}: use vec='dummy' or vec='subproc'")
    return gym.make_vec(env_id, num_envs=n_envs, vectorization_mode="vector_entry_point", **env_kwargs)


class NativeVecEnv(VecEnv):
    """SB3 ``VecEnv`` over ``gym.make_vec(env_id, num_envs=n_envs, vectorization_mode="vector_entry_point",
    **env_kwargs)`` (module docstring). ``rescale``: map Box actions from [-1, 1] (None: when the
    action is a Box)."""

    def __init__(self, env_id: str, n_envs: int, env_kwargs: dict | None = None, *, stats: bool = True,
                 rescale: bool | None = None, layout: str = "full", time_cap: float | None = None):
        self.env_id = env_id
        self.venv = _make_native(env_id, int(n_envs), dict(env_kwargs or {}))
        v = self.venv
        self._single_obs = v.single_observation_space
        # the keys FlattenWithStats(stats=stats) concatenates (without the statistics when stats is False)
        self._keys = layout_keys(v.family, self._single_obs, layout, stats)
        self._columns = layout_columns(v.family, self._single_obs, layout)
        self._caps = time_caps(self._keys, time_cap)
        act = v.single_action_space
        self._box = isinstance(act, spaces.Box) if rescale is None else bool(rescale)
        flat = flat_size(self._single_obs, self._keys, self._columns)
        obs_space = spaces.Box(-np.inf, np.inf, shape=(flat,), dtype=np.float32)
        if self._box:
            act = spaces.Box(-1.0, 1.0, shape=act.shape, dtype=np.float32)
        super().__init__(v.num_envs, obs_space, act)
        self._seed: int | None = None
        self._actions = None
        self._bounds_of: tuple | None = None  # (instances the bounds were computed for, low, high)
        self._started = False

    # -- the VecEnv interface ----------------------------------------------------------------
    def seed(self, seed: int | None = None) -> Sequence[None]:
        self._seed = seed  # used by the next reset: sub-env i gets seed + i (DummyVecEnv's rule)
        return [None] * self.num_envs

    def reset(self):
        seed, self._seed = self._seed, None
        obs, _ = self.venv.reset(seed=seed)
        self._started = True
        return self._flat(obs)

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self):
        a = self._to_env(self._actions)
        obs, rew, term, trunc, _ = self.venv.step(a)
        done = np.logical_or(term, trunc)
        flat = self._flat(obs)
        infos: list[dict] = [{} for _ in range(self.num_envs)]
        if done.any():
            last = flat
            new, _ = self.venv.reset(options={"reset_mask": done})  # the native autoreset, done now
            flat = self._flat(new)
            for i in np.flatnonzero(done):
                infos[i]["terminal_observation"] = last[i]
                infos[i]["TimeLimit.truncated"] = bool(trunc[i] and not term[i])
        return flat, np.asarray(rew, dtype=np.float32), done, infos

    def close(self) -> None:
        self.venv.close()

    def get_attr(self, attr_name: str, indices=None) -> list:
        return [getattr(self.venv, attr_name)] * len(self._indices(indices))

    def set_attr(self, attr_name: str, value: Any, indices=None) -> None:
        raise AttributeError("the sub-envs of a native vector env share their attributes")

    def env_method(self, method_name: str, *method_args, indices=None, **method_kwargs) -> list:
        idx = self._indices(indices)
        if method_name == "action_masks":
            m = self.venv.action_masks()
            return [m[i] for i in idx]
        out = getattr(self.venv, method_name)(*method_args, **method_kwargs)
        return [out] * len(idx)

    def env_is_wrapped(self, wrapper_class, indices=None) -> list[bool]:
        return [False] * len(self._indices(indices))

    def has_attr(self, attr_name: str) -> bool:
        return hasattr(self.venv, attr_name)

    def get_images(self):  # pragma: no cover - the native vector envs do not render
        return [None] * self.num_envs

    def action_masks(self) -> np.ndarray:
        return self.venv.action_masks()

    # -- helpers -----------------------------------------------------------------------------
    def _flat(self, obs) -> np.ndarray:
        return flatten_batch(self._single_obs, obs, self._keys, self._columns, self._caps)

    def _to_env(self, actions: np.ndarray) -> np.ndarray:
        if not self._box:
            return actions
        lo, hi = self._bounds()
        a = np.clip(np.asarray(actions, dtype=np.float64), -1.0, 1.0)
        return lo + (a + 1.0) * 0.5 * (hi - lo)

    def _bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(N, ...) exact bounds of every sub-env's Box action (its instance's; RescaleBox's values)."""
        v = self.venv.unwrapped if hasattr(self.venv, "unwrapped") else self.venv
        inst = tuple(int(k) for k in v.scenario_seeds)
        if self._bounds_of is None or self._bounds_of[0] != inst:
            pad = env_padding(v._single)
            cache: dict[int, tuple] = {}
            rows_lo, rows_hi = [], []
            for i, k in enumerate(inst):
                if k not in cache:
                    pb = v.problems[i]
                    mode = getattr(v._single.problem, "action_mode", None)
                    if mode is not None and getattr(pb, "action_mode", mode) != mode:
                        pb = dataclasses.replace(pb, action_mode=mode)  # as the single env's problem says
                    cache[k] = box_bounds(v.family, pb, v.single_action_space, pad=pad or None)
                rows_lo.append(cache[k][0])
                rows_hi.append(cache[k][1])
            self._bounds_of = (inst, np.stack(rows_lo), np.stack(rows_hi))
        return self._bounds_of[1], self._bounds_of[2]

    def _indices(self, indices) -> list[int]:
        if indices is None:
            return list(range(self.num_envs))
        if isinstance(indices, int):
            return [indices]
        return list(indices)
