"""Shared test helpers: rollouts and deep equality of observations/infos."""

from __future__ import annotations

import numpy as np


def deep_equal(a, b) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(deep_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(deep_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)
    return a == b


def valid_random_action(env, info, rng):
    """A random action; for masked envs, only allowed entries are set."""
    space = env.action_space
    a = space.sample()
    mask = info.get("action_mask")
    if mask is not None and np.shape(mask) == np.shape(a):
        a = np.where(mask, a, 0).astype(a.dtype)
    return a


def rollout(env, seed: int, steps: int, action_seed: int = 0):
    rng = np.random.default_rng(action_seed)
    env.action_space.seed(action_seed)
    obs, info = env.reset(seed=seed)
    traj = [(obs, info)]
    for _ in range(steps):
        a = valid_random_action(env, info, rng)
        obs, r, term, trunc, info = env.step(a)
        traj.append((obs, r, term, trunc, info))
        if term or trunc:
            obs, info = env.reset()
            traj.append((obs, info))
    return traj
