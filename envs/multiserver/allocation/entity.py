"""P2's per-entity network hooks (``FamilySpec.entity``; ``clustergym train --net entity``): one entity per
port in the ``"port"`` action mode (one Gaussian mean per port, ``logits_per_entity`` = 1); the network
itself is :class:`clustergym.learning.entity.EntityNet`. Every port is present. The features are shares and
signed logs, so the observation is not normalised (the rewards are, in training)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch as th

from clustergym.core.entity_features import log_time_feature, positions, slog, space_shape

__all__ = ["BUFFERS", "p2_layout", "layout", "features"]

BUFFERS = {"entity_index": "ent_index", "global_index": "glob_index"}


def p2_layout(obs_space: gym.spaces.Dict, keys: tuple[str, ...]) -> dict:
    """The index layout of P2's flat observation in the ``"port"`` action mode: per port l the raw columns
    [arrivals_l, arrival_share_l, port_reward_mean_l, last_port_reward_l], the cost weights β (global) and
    ``t``. Every port is an entity (the action has one fraction per port)."""
    need = ("arrivals", "arrival_share", "port_reward_mean", "last_port_reward", "beta", "t")
    missing = [k for k in need if k not in keys]
    if missing:
        raise ValueError(f"net='entity' on P2 needs the observation keys {missing} (the 'compact' or 'full' "
                         "layout)")
    pos, off = positions(obs_space, keys)
    L = space_shape(obs_space["arrivals"])[0]
    port = np.arange(L)
    cols = [pos[k] + port for k in ("arrivals", "arrival_share", "port_reward_mean", "last_port_reward")]
    K = space_shape(obs_space["beta"])[0]
    return {"family": "multiserver-allocation", "num_inputs": int(off), "num_channels": int(L),
            "entity_index": np.stack(cols, axis=1).tolist(), "global_index": [int(pos["beta"] + k) for k in range(K)],
            "t_index": int(pos["t"]), "logits_per_entity": 1}


def layout(env: gym.Env) -> dict:
    """The layout of a training env (``make_train_env``: flat observation + statistics) in the ``"port"`` mode."""
    u: Any = env.unwrapped  # the family's env
    mode = getattr(u.problem, "action_mode", None) or getattr(u, "action_mode", None)
    if mode != "port":
        raise ValueError(f"net='entity' on P2 needs action_mode='port' (one fraction per port), not {mode!r}")
    return p2_layout(u.observation_space, env.get_wrapper_attr("pipeline").keys)


def features(net: Any, obs: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
    """P2, per port: [job this slot, share of slots with a job, log mean realised reward, log last reward];
    global: log β, the share of ports with a job, log(1 + min(t, TIME_CAP)) / 10
    (:func:`clustergym.core.entity_features.log_time_feature`). Every port is present."""
    r = obs[:, net.ent_index]  # (B, L, 4)
    t = obs[:, net.t_index:net.t_index + 1]
    x = th.stack([r[..., 0], r[..., 1], slog(r[..., 2]), slog(r[..., 3])], dim=-1)
    present = th.ones(r.shape[:2], dtype=th.bool, device=r.device)
    glob = th.cat([slog(obs[:, net.glob_index]), r[..., 0].mean(dim=1, keepdim=True),
                   log_time_feature(t)], dim=1)
    return x, present, glob
