"""Helpers for a family's per-entity network hooks (``FamilySpec.entity``, ``clustergym train --net entity``).

A family's hooks module (e.g. ``clustergym.envs.approxjobs.entity``) gives the index layout of its flat
observation and builds its entities' features from it; the network itself (φ / ρ / ψ, the same for every
family) is :class:`clustergym.learning.entity.EntityNet`. What the families share is here: the offsets of
the observation keys in the flat vector and their shapes (:func:`positions`, :func:`space_shape`) and the
transforms that keep a feature in its training range at any horizon and any scale (:func:`time_feature`,
:func:`log_time_feature`, :func:`slog`).

This module imports torch: only the hooks modules import it, and they are loaded by the learning stack on
first use (``import clustergym`` and the envs never load it).
"""

from __future__ import annotations

import gymnasium as gym
import torch as th

from clustergym.core.env import TIME_CAP

__all__ = ["positions", "space_shape", "time_feature", "log_time_feature", "slog"]


def positions(obs_space: gym.spaces.Dict, keys) -> tuple[dict, int]:
    """Offset of each key in the flat observation (the keys flattened one after the other), and its size."""
    off, pos = 0, {}
    for key in keys:
        pos[key] = off
        off += int(gym.spaces.flatdim(obs_space[key]))
    return pos, off


def space_shape(space: gym.Space) -> tuple[int, ...]:
    """The shape of an observation key's space (a ``Box``); ValueError for a space without one."""
    if space.shape is None:
        raise ValueError(f"the observation space {space} has no shape")
    return tuple(space.shape)


def slog(x: th.Tensor) -> th.Tensor:
    """sign(x) log(1 + |x|): rewards and budgets of any scale into a range a tanh network takes."""
    return th.sign(x) * th.log1p(th.abs(x))


def time_feature(t: th.Tensor) -> th.Tensor:
    """P1's time feature min(t, TIME_CAP) / (TIME_CAP + 1) in [0, 0.995]: it grows over the first 200 slots and
    then stays, so a run of any length reads values the network met in training
    (:data:`clustergym.core.env.TIME_CAP`)."""
    return t.clamp(0.0, float(TIME_CAP)) / float(TIME_CAP + 1)


def log_time_feature(t: th.Tensor) -> th.Tensor:
    """P2's and P4's time feature log(1 + min(t, TIME_CAP)) / 10, in [0, 0.54]
    (:data:`clustergym.core.env.TIME_CAP`)."""
    return th.log1p(t.clamp(0.0, float(TIME_CAP))) / 10.0
