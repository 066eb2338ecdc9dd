"""The training envs of ``clustergym train``: one env's wrapper chain, the instance pool, the normaliser.

The training env is ``gym.make`` + Monitor + :class:`clustergym.learning.wrappers.FlattenWithStats` (+
:class:`clustergym.learning.wrappers.RescaleBox` to [-1, 1] for Box actions): the public wrappers, so a user's own
chain can match training exactly. :func:`training_envs` resolves the instance pool and the padding that makes
one model fit every instance (:mod:`clustergym.learning.instances`); :func:`normalizer` is SB3's
``VecNormalize`` as training uses it, :func:`save_normalization` its statistics as plain arrays.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import gymnasium as gym
import numpy as np

from clustergym.runner.episode import scenario_fingerprint
from clustergym.runner.evaluation import check_size
from clustergym.core.family import env_family, family_spec
from clustergym.learning.algos import NORM_FILE
from clustergym.learning.privileged import OracleShaping, PrivilegedObs
from clustergym.learning.instances import (DEFAULT_EVAL_INSTANCES, DEFAULT_TRAIN_INSTANCES,
                                           DEFAULT_VALIDATION_INSTANCES, padding_for)

__all__ = ["ParamPool", "SlimInfo", "check_pipeline", "int_arg", "make_train_env", "normalizer",
           "save_normalization", "training_envs"]


def int_arg(name: str, value, lo: int) -> int:
    """An integer argument ``>= lo`` (no floats, bools or strings), else a ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lo:
        raise ValueError(f"{name}={value!r} is invalid: expected an integer >= {lo}")
    return int(value)


class SlimInfo(gym.Wrapper):
    """Pass on only the info keys SB3 reads during training (``episode`` from Monitor, ``TimeLimit.truncated``,
    ``is_success``). SB3's ``DummyVecEnv`` deep-copies every sub-env's info at every step, and P3's and P4's infos
    hold the job window, feedback arrays and metrics (docs/drl.md, training throughput: P3 0.44x -> 0.47x)."""

    KEEP = ("episode", "TimeLimit.truncated", "is_success")

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, {k: info[k] for k in self.KEEP if k in info}

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return obs, {k: info[k] for k in self.KEEP if k in info}


class ParamPool(gym.Wrapper):
    """One env over several generator settings (one env per setting, equal spaces): each episode runs in a
    setting drawn uniformly (a training pool with randomised generator parameters, :mod:`clustergym.learning.pools`).

    The draws are seeded like the instance pool's: a seeded ``reset(seed=s)`` restarts the stream from ``s``
    (and gives each setting's env its first seed from it); an unseeded reset continues the stream, and a
    setting's env is reset unseeded after its first episode, so its own instance stream continues. ``setting``
    is the index of the current episode's setting."""

    def __init__(self, envs: Sequence[gym.Env]):
        envs = list(envs)
        if not envs:
            raise ValueError("ParamPool needs at least one env")
        for e in envs[1:]:
            if e.observation_space != envs[0].observation_space or e.action_space != envs[0].action_space:
                raise ValueError("ParamPool: the settings' envs have different spaces; pad them to common maxima "
                                 "(pool_padding)")
        super().__init__(envs[0])
        self._envs = envs
        self._rng: np.random.Generator | None = None
        self._first: dict[int, int] = {}
        self.setting = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None or self._rng is None:
            self._rng = np.random.default_rng(np.random.SeedSequence(seed))
            self._first = {j: int(s) for j, s in enumerate(self._rng.integers(2**31 - 1, size=len(self._envs)))}
        self.setting = int(self._rng.integers(len(self._envs)))
        self.env = self._envs[self.setting]
        return self.env.reset(seed=self._first.pop(self.setting, None), options=options)

    def close(self):
        for e in self._envs:
            e.close()


def make_train_env(env_id: str, env_kwargs: dict | None = None, *, algo: str = "ppo", stats: bool = True,
                   monitor_dir: str | None = None, rank: int = 0, layout: str = "full", slim_info: bool = False,
                   settings: list[dict] | None = None, time_cap: float | None = None, privileged: str = "none",
                   shaping: str = "none") -> gym.Env:
    """``gym.make`` + Monitor + ``clustergym.learning.wrappers.FlattenWithStats`` (+ ``clustergym.learning.wrappers.RescaleBox``
    to [-1, 1] for Box actions): the public wrappers, so a user's own chain can match training exactly.
    ``layout``: the flat observation layout (``clustergym.learning.pipeline``; ``"legacy"`` for a model
    trained by an earlier version); ``time_cap``: the slot index's bound (``clustergym.learning.pipeline``). ``settings``: generator parameters, one env each, behind one
    :class:`clustergym.learning.pools.ParamPool` (a training pool with randomised parameters). ``privileged="critic"``
    appends the privileged features, ``shaping="oracle"`` shapes the reward (training only,
    :mod:`clustergym.learning.privileged`)."""
    from stable_baselines3.common.monitor import Monitor

    from clustergym.learning.wrappers import FlattenWithStats, RescaleBox

    kw = {"oracle": False, **(env_kwargs or {}), **({"oracle": True} if shaping == "oracle" else {})}
    if settings:
        env = ParamPool([gym.make(env_id, **{**kw, **p}) for p in settings])
    else:
        env = gym.make(env_id, **kw)
    env = Monitor(env, os.path.join(monitor_dir, str(rank)) if monitor_dir else None)
    if shaping == "oracle":  # after Monitor: the episode returns it records stay the env's
        env = OracleShaping(env)
    env = FlattenWithStats(env, stats=stats, layout=layout, time_cap=time_cap)
    if privileged == "critic":
        env = PrivilegedObs(env)
    if isinstance(env.action_space, gym.spaces.Box):
        env = RescaleBox(env)
    if slim_info:  # the training VecEnv: SB3 reads a few info keys and deep-copies the whole info every step
        env = SlimInfo(env)
    return env


def normalizer(venv, *, gamma: float, norm_obs: bool = True, training: bool = True):
    """SB3's ``VecNormalize`` as training uses it. Rewards are divided by the running std of the discounted
    return, so the discount must be the algorithm's: with SB3's default (0.99) under an algorithm trained at
    ``gamma=0`` the critic's targets are scaled by a return the algorithm never optimises."""
    from stable_baselines3.common.vec_env import VecNormalize

    return VecNormalize(venv, training=training, norm_obs=norm_obs, norm_reward=training, clip_obs=10.0,
                        gamma=float(gamma))


def check_pipeline(model, venv) -> None:
    """ValueError if the training pipeline disagrees with the algorithm: reward normalisation discounting with
    another gamma than the algorithm's."""
    from stable_baselines3.common.vec_env import VecNormalize

    v = venv
    while v is not None:
        if isinstance(v, VecNormalize) and v.norm_reward and abs(float(v.gamma) - float(model.gamma)) > 1e-12:
            raise ValueError(f"VecNormalize discounts with gamma={v.gamma} but the algorithm with gamma={model.gamma}")
        v = getattr(v, "venv", None)


def training_envs(env_id: str, env_kwargs: dict, instances=None, *, net: str = "mlp") -> tuple[dict, dict, list | None, str]:
    """(the model's env kwargs as recorded, the training sub-envs' kwargs, the pool or None, a note on it).

    The pool (:func:`_training_pool`) is drawn from per episode; families with padding kwargs are padded to the
    maxima over the pool and the default evaluation instances, so one model fits every instance."""
    env_kwargs = dict(env_kwargs)
    gym.make(env_id, **env_kwargs).close()  # bad kwargs fail here, before anything is written
    pool, pool_note = _training_pool(env_id, env_kwargs, instances)
    train_kwargs = dict(env_kwargs)  # the sub-envs' kwargs: + padding maxima, + the pool
    if pool is not None:
        covered = sorted(set(pool) | set(DEFAULT_EVAL_INSTANCES) | set(DEFAULT_VALIDATION_INSTANCES))
        env_kwargs.update(padding_for(env_id, env_kwargs, covered))  # recorded: the model's fixed shape
        train_kwargs = {**env_kwargs, "scenario_seed": int(pool[0]), "instances": tuple(pool)}
        gym.make(env_id, **train_kwargs).close()
    pads = family_spec(env_family(env_id)).pad_kwargs
    if net == "entity" and not any(n in env_kwargs for n in pads):  # one instance: padded to its own size

        env_kwargs.update(padding_for(env_id, env_kwargs, [int(env_kwargs.get("scenario_seed", 0))]))
        train_kwargs = {**train_kwargs, **env_kwargs}
    return env_kwargs, train_kwargs, pool, pool_note


def _training_pool(env_id: str, env_kwargs: dict, instances) -> tuple[list[int] | None, str]:
    """(the training pool or None for one instance, a note saying which and why)."""
    if "scenario_seed" in env_kwargs:
        if instances is not None:
            raise ValueError("instances (--instances) and env_kwargs['scenario_seed'] (--set scenario_seed=K) cannot be "
                             "combined: scenario_seed pins one instance")
        return None, f"one instance: scenario_seed={env_kwargs['scenario_seed']}"
    given = instances is not None
    probe = gym.make(env_id, **{**env_kwargs, "oracle": False})
    switches = getattr(probe.unwrapped, "instance_source", None) is not None  # the env has the instances kwarg
    probe.close()
    if not switches:
        if given:
            raise ValueError(f"{env_id} cannot switch instances (its env has no instances kwarg): drop --instances")
        return None, "one instance: the env does not switch instances"
    if given:
        check_size("instances", instances)  # range(0, 10**15) would be iterated for hours
    pool = list(dict.fromkeys(int_arg("instances", k, 0) for k in (instances if given else DEFAULT_TRAIN_INSTANCES)))
    if not pool:
        raise ValueError("instances is empty")
    if len(pool) > 1:
        kw = {k: v for k, v in env_kwargs.items() if k != "horizon"}
        fp = [scenario_fingerprint(env_id, 1, {**kw, "scenario_seed": k}) for k in pool[:2]]
        if fp[0] is not None and fp[0] == fp[1]:
            if given:
                raise ValueError("this scenario does not depend on scenario_seed (a trace preset or fixed scenario), "
                                 "so a pool of instances would repeat one instance: drop --instances")
            return None, "one instance: the scenario does not depend on scenario_seed"
    return pool, ("the given pool" if given else "the default training pool") + " (one instance drawn per episode)"


def save_normalization(venv, out: str) -> str:
    """Save a ``VecNormalize``'s observation statistics as plain arrays (``vecnormalize.npz``), which the
    ``sb3:`` agent reads with ``allow_pickle=False`` (a pickled VecNormalize could carry code)."""
    rms = venv.obs_rms
    path = os.path.join(out, NORM_FILE)
    np.savez(path, mean=np.asarray(rms.mean, dtype=np.float64), var=np.asarray(rms.var, dtype=np.float64),
             count=np.float64(rms.count), clip_obs=np.float64(venv.clip_obs), epsilon=np.float64(venv.epsilon))
    return path
