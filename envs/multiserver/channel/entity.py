"""P1's per-entity network hooks (``FamilySpec.entity``; ``clustergym train --net entity``): one entity per
channel, the network itself is :class:`clustergym.learning.entity.EntityNet`.

* **Per-channel features** x_e (gathered from the same flat observation the MLP sees, the flattened
  Dict observation + the empirical statistics of :class:`clustergym.learning.pipeline.ObsPipeline`,
  with integer index arrays): ``[present_e, arrival_e, v̂_e, n_e/t, a_1^e/c_1, …, a_K^e/c_K]`` —
  ``edge_present``, ``edge_arrival`` (its port has a job: the action mask), the statistics' mean
  realised utility and share of slots used, and ``edge_demand``. All lie in [0, 1], so the network
  needs no observation normalisation (``clustergym train`` turns ``VecNormalize``'s observation part
  off for this net: its per-position statistics would tie the model to one ``max_edges``; rewards are
  still normalised in training).
* **Global features** g: ``min(t, 199) / 200`` (:func:`clustergym.core.entity_features.time_feature`; 200 slots is the
  training horizon of the shipped models: the feature stops growing there, so a longer run stays in its
  training range; earlier versions read ``t / T_train``, which reaches 10 at slot 2,000: :func:`check` refuses
  such a layout), the mean over ports of this slot's arrivals and of the share of slots with a job, the share
  of present channels that are active (present and with a job), and the load Σ_{e active} a_k^e / c_k per
  device type k (how far the active channels exceed the capacity; eq. 2).
* **Outputs** (``SELECT``): one binary "select" logit per channel; padding channels get ``PAD_LOGIT``, so
  they are never chosen, with or without a mask (the network's logit layout, ``[0, ψ_e]`` per channel for
  MaskablePPO's masked head).

The parameter count depends on f = 4 + K and h only, not on |E|, ``max_edges`` or L: the same
``state_dict`` loads into the policy of any P1 instance size (the index arrays are non-persistent
buffers, rebuilt from the layout).

Ports: a channel's port identity is not in the observation (only its port's job flag, ``edge_arrival``),
so there is no per-port pooling. P1's slots are independent given the statistics (capacity is per slot,
eq. 2; nothing carries over but what the statistics summarise), so the per-slot decision needs the
channel's own estimate, its demand and the slot's load, which the features hold.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch as th

from clustergym.core.entity_features import positions, space_shape, time_feature
from clustergym.core.env import TIME_CAP

__all__ = ["CHANNEL_FEATURES", "BUFFERS", "SELECT", "p1_layout", "layout", "check", "features"]

CHANNEL_FEATURES = ("present", "arrival", "mean_utility", "use_share")  # then the K demand columns
BUFFERS = {"channel_index": "chan_index", "arrivals_index": "arr_index", "jobs_index": "jobs_index"}
SELECT = True  # one binary "select" logit per channel


def p1_layout(obs_space: gym.spaces.Dict, num_ports: int, keys: tuple[str, ...]) -> dict:
    """The index layout of P1's flat observation: the observation keys ``keys`` flattened one after the other
    (``clustergym.learning.pipeline.ObsPipeline.keys``; e.g. the ``"legacy"`` layout of earlier versions,
    [flatten(arrivals, edge_*, t), v̂ (P), n/t (P), jobs/t (L)]).

    ``obs_space``: the padded env's Dict observation space (``edge_present``, ``edge_arrival``,
    ``edge_demand`` present). The statistics are the keys ``utility_mean`` (v̂), ``channel_share`` (n/t)
    and ``arrival_share`` (jobs/t). Returns plain ints/floats."""
    need = ("arrivals", "t", "edge_present", "edge_arrival", "edge_demand")
    missing = [k for k in need if k not in obs_space.spaces]
    if missing:
        raise ValueError(f"net='entity' needs the padded P1 observation (max_edges set); missing keys {missing}")
    missing = [k for k in ("utility_mean", "channel_share", "arrival_share") if k not in keys]
    if missing:
        raise ValueError(f"net='entity' needs the statistics in the observation; missing keys {missing}")
    pos, off = positions(obs_space, keys)
    P, K = space_shape(obs_space["edge_demand"])
    L = int(num_ports)
    e = np.arange(P)
    cols = [pos["edge_present"] + e, pos["edge_arrival"] + e, pos["utility_mean"] + e, pos["channel_share"] + e]
    cols += [pos["edge_demand"] + e * K + k for k in range(K)]
    chan = np.stack(cols, axis=1)
    return {"family": "multiserver-channel", "num_inputs": int(off), "num_channels": int(P),
            "num_device_types": int(K), "channel_index": [[int(v) for v in row] for row in chan],
            "t_index": int(pos["t"]), "t_scale": 1.0 / (TIME_CAP + 1),
            "arrivals_index": [int(pos["arrivals"] + i) for i in range(L)],
            "jobs_index": [int(pos["arrival_share"] + i) for i in range(L)]}


def layout(env: gym.Env) -> dict:
    """The layout of a training env (``make_train_env``: flat observation + statistics)."""
    u: Any = env.unwrapped  # the family's env
    return p1_layout(u.observation_space, u.problem.num_ports, env.get_wrapper_attr("pipeline").keys)


def check(lay: dict) -> None:
    """ValueError for a layout of an earlier version, whose time feature was the linear t / T_train."""
    if abs(float(lay["t_scale"]) * (TIME_CAP + 1) - 1.0) > 1e-9:
        raise ValueError(f"this per-entity model reads the time feature t / {1.0 / float(lay['t_scale']):g} "
                         "of an earlier version, which leaves its training range on longer runs; this "
                         f"version reads min(t, {TIME_CAP}) / {TIME_CAP + 1}: train the model again")


def features(net: Any, obs: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
    """Flat observations (B, N) -> channel features (B, P, 4 + K), present (B, P) bool, global features
    (B, 4 + K) (module docstring)."""
    x = obs[:, net.chan_index]  # (B, P, f)
    present = x[..., 0] > 0.5
    active = (present & (x[..., 1] > 0.5)).to(x.dtype)
    n_present = present.to(x.dtype).sum(dim=1).clamp_min(1.0)
    glob = th.cat([time_feature(obs[:, net.t_index:net.t_index + 1]),
                   obs[:, net.arr_index].mean(dim=1, keepdim=True),
                   obs[:, net.jobs_index].mean(dim=1, keepdim=True),
                   (active.sum(dim=1) / n_present).unsqueeze(1),
                   (x[..., len(CHANNEL_FEATURES):] * active.unsqueeze(-1)).sum(dim=1)], dim=1)
    return x, present, glob
