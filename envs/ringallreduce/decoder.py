"""P3's hooks for the masked autoregressive decoder (``FamilySpec.decoder``; ``clustergym train --net
autoregressive``): in the ``"ring_size"`` action mode the decoder picks the workers of each visible job, oldest
first (the order the env's greedy placement places them in) or in a heuristic's priority order (``ORDERS``:
``"attained"``, least attained service first, the continuous LAS's; ``"remaining"``, shortest remaining budget
first, SRPT's; ``"density"``, ``srpt[row_value=30]``'s), from the cluster's GPUs. The network itself is
:class:`clustergym.learning.autoregressive.DecoderNet`.

The flat observation is read raw (``clustergym train`` turns ``VecNormalize``'s observation part off for this
net, as for the per-entity one): a job's largest count is column ``workers_cap`` of ``jobs`` (min(N_i, budget
left), 0 on an empty row) and the shared capacity is Σ_s C_s (column 0 of ``servers``). The features are
shares and logs of those raw values. Both the ``"full"`` and the ``"compact"`` layout are read (the compact one
has no ``job_mask``: a row holds a job exactly when its remaining budget is positive).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch as th

from clustergym.core.entity_features import log_time_feature, space_shape
from clustergym.envs.ringallreduce.env import JOB_FEATURES

__all__ = ["BUFFERS", "ORDERS", "layout", "features", "allocation"]

BUFFERS = {"job_index": "job_index", "server_index": "server_index"}
_COL = {k: i for i, k in enumerate(JOB_FEATURES)}


def _offsets(obs_space: gym.spaces.Dict, keys, columns: dict) -> tuple[dict, int]:
    """Offset of each key in the flat vector of a layout (keys with ``columns`` keep only those entries)."""
    off, pos = 0, {}
    for key in keys:
        pos[key] = off
        off += len(columns[key]) if key in columns else int(gym.spaces.flatdim(obs_space[key]))
    return pos, off


def layout(env: gym.Env) -> dict:
    """The layout of a training env (``make_train_env``) in the ``"ring_size"`` mode: per window row j the raw
    ``JOB_FEATURES`` columns, per server [C_s, rack, GPUs used last slot], and ``t``."""
    u: Any = env.unwrapped
    if u.action_mode != "ring_size":
        raise ValueError(f"net='autoregressive' on P3 needs action_mode='ring_size' (workers per job), not "
                         f"{u.action_mode!r}")
    pipe = env.get_wrapper_attr("pipeline")
    missing = [k for k in ("jobs", "servers", "t") if k not in pipe.keys]
    if missing:
        raise ValueError(f"net='autoregressive' on P3 needs the observation keys {missing}")
    space = u.observation_space
    pos, off = _offsets(space, pipe.keys, pipe.columns)
    if "jobs" in pipe.columns or "servers" in pipe.columns:
        raise ValueError("net='autoregressive' on P3 reads every column of jobs and servers")
    J, F = space_shape(space["jobs"])
    S, C = space_shape(space["servers"])
    jobs = pos["jobs"] + np.arange(J)[:, None] * F + np.arange(F)[None, :]
    servers = pos["servers"] + np.arange(S)[:, None] * C + np.arange(C)[None, :]
    return {"family": "ringallreduce", "num_inputs": int(off), "num_channels": int(J), "t_index": int(pos["t"]),
            "job_index": jobs.tolist(), "server_index": servers.tolist(), "levels": int(u.action_space.nvec[0])}


def allocation(net: Any, obs: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
    """(each visible job's largest worker count min(N_i, budget left) (B, J), 0 on an empty row; the cluster's
    GPUs Σ_s C_s (B,)), both rounded to integers (the observation is float32)."""
    r = obs[:, net.job_index]  # (B, J, F)
    cap = th.round(r[..., _COL["workers_cap"]]).clamp_min(0).long()
    cap = th.where(r[..., _COL["remaining"]] > 0.5, cap, th.zeros_like(cap))
    pool = th.round(obs[:, net.server_index][..., 0].sum(dim=1)).long()
    return cap, pool


def features(net: Any, obs: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
    """Per window row: [present, cap / workers_max, log budget left, log attained, log ζ, b / 5 Gbps, λ1 / 100, λ2,
    log λ3, share of λ3 attained (ζ z / λ3, at most 3), log age, last workers / workers_max, position in the
    window] (0 on empty rows); global: log GPUs, mean C_s / 8, the share of occupied rows, the visible demand
    Σ cap / GPUs (at most 4), last slot's GPU use, and log(1 + min(t, TIME_CAP)) / 10."""
    r = obs[:, net.job_index]  # (B, J, F) raw
    present = r[..., _COL["remaining"]] > 0.5
    wmax = float(net.levels - 1)
    c = {k: r[..., i].clamp_min(0.0) for k, i in _COL.items()}
    J = r.shape[1]
    pos = th.arange(J, dtype=r.dtype, device=r.device).expand(r.shape[0], J) / J
    x = th.stack([present.to(r.dtype), c["workers_cap"] / wmax, th.log1p(c["remaining"]) / 5.0,
                  th.log1p(c["attained"]) / 5.0, th.log1p(c["zeta"]) / 6.0, c["bw"] / 5.0, c["lambda1"] / 100.0,
                  c["lambda2"], th.log1p(c["lambda3"]) / 8.0,
                  (c["zeta"] * c["attained"] / c["lambda3"].clamp_min(1.0)).clamp(max=3.0) / 3.0,
                  th.log1p(c["age"]) / 5.0, c["last_workers"] / wmax, pos], dim=-1)
    x = x * present.unsqueeze(-1).to(x.dtype)
    srv = obs[:, net.server_index]  # (B, S, 3)
    gpus = srv[..., 0].sum(dim=1, keepdim=True).clamp_min(1.0)
    demand = (c["workers_cap"] * present.to(r.dtype)).sum(dim=1, keepdim=True)
    t = obs[:, net.t_index:net.t_index + 1]
    glob = th.cat([th.log1p(gpus) / 5.0, srv[..., 0].mean(dim=1, keepdim=True) / 8.0,
                   present.to(r.dtype).mean(dim=1, keepdim=True), (demand / gpus).clamp(max=4.0) / 4.0,
                   srv[..., 2].sum(dim=1, keepdim=True) / gpus, log_time_feature(t)], dim=1)
    return x, present, glob


def _least_attained_first(net: Any, obs: th.Tensor) -> th.Tensor:
    """(B, J) the decoding key of ``order="attained"``: each job's attained service z_i (worker-slots, column
    ``attained``), empty rows last. A stable sort keeps the window order (oldest first) among equal z_i: the
    continuous LAS's priority, increasing z_i with ties by arrival (``clustergym.baselines.ringallreduce.LAS``)."""
    r = obs[:, net.job_index]
    z = r[..., _COL["attained"]].clamp_min(0.0)
    return th.where(r[..., _COL["remaining"]] > 0.5, z, th.full_like(z, float("inf")))


def _shortest_remaining_first(net: Any, obs: th.Tensor) -> th.Tensor:
    """(B, J) the decoding key of ``order="remaining"``: each job's remaining budget B_i − z_i (column
    ``remaining``), empty rows last; ties keep the window order (SRPT's priority, ties by arrival:
    ``clustergym.baselines.ringallreduce.SRPT``)."""
    r = obs[:, net.job_index]
    left = r[..., _COL["remaining"]]
    return th.where(left > 0.5, left, th.full_like(left, float("inf")))


ROW_VALUE = 30.0  # the row worth c of order "density": srpt[row_value=30]'s (chosen on validation instances)


def _value_density_first(net: Any, obs: th.Tensor) -> th.Tensor:
    """(B, J) the decoding key of ``order="density"``: −(λ1 − μ_i(ζ_i z_i) + c) / (B_i − z_i) with c =
    :data:`ROW_VALUE`, empty rows last; ties keep the window order (``srpt[row_value=30]``'s priority)."""
    r = obs[:, net.job_index].double()
    c = {k: r[..., i] for k, i in _COL.items()}
    left = c["remaining"]
    mu = c["lambda1"] * th.sigmoid(c["lambda2"] * (c["zeta"] * c["attained"] - c["lambda3"]))  # §VI's sigmoid
    key = -(c["lambda1"] - mu + ROW_VALUE) / left.clamp_min(1.0)
    return th.where(left > 0.5, key, th.full_like(key, float("inf")))


# the decoder's ``order`` options besides "window"
ORDERS = {"attained": _least_attained_first, "remaining": _shortest_remaining_first, "density": _value_density_first}
