"""P4's per-entity network hooks (``FamilySpec.entity``; ``clustergym train --net entity``): one entity per
window slot in the ``"job"`` action mode (S + 1 level logits per slot); the network itself is
:class:`clustergym.learning.entity.EntityNet`. The features are shares and logs, never t / T, so one
``state_dict`` gives the same outputs at any horizon; the observation is not normalised (the rewards are,
in training)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch as th

from clustergym.core.entity_features import log_time_feature, positions, space_shape

__all__ = ["BUFFERS", "p4_layout", "layout", "features"]

BUFFERS = {"entity_index": "ent_index", "pool_index": "pool_index"}


def p4_layout(obs_space: gym.spaces.Dict, keys: tuple[str, ...], levels: int) -> dict:
    """The index layout of P4's flat observation in the ``"job"`` action mode: per window slot j the raw
    columns [job_mask_j, arrival, deadline, budget, spent, value, β, work] (``JOB_FEATURES`` without the id),
    per machine i [machine_rate, machine_share, last_executed, last_work], and ``t``."""
    need = ("job_mask", "jobs", "t", "machine_rate", "machine_share", "last_executed", "last_work")
    missing = [k for k in need if k not in keys]
    if missing:
        raise ValueError(f"net='entity' on P4 needs the observation keys {missing} (the 'full' layout)")
    pos, off = positions(obs_space, keys)
    J, F = space_shape(obs_space["jobs"])
    j = np.arange(J)
    cols = [pos["job_mask"] + j] + [pos["jobs"] + j * F + c for c in range(1, F)]  # column 0 is the job id
    M = space_shape(obs_space["machine_rate"])[0]
    m = np.arange(M)
    mach = np.stack([pos[k] + m for k in ("machine_rate", "machine_share", "last_executed", "last_work")], axis=1)
    return {"family": "approxjobs", "num_inputs": int(off), "num_channels": int(J),
            "entity_index": np.stack(cols, axis=1).tolist(), "pool_index": mach.tolist(),
            "t_index": int(pos["t"]), "logits_per_entity": int(levels) + 1}


def layout(env: gym.Env) -> dict:
    """The layout of a training env (``make_train_env``: flat observation + statistics) in the ``"job"`` mode."""
    u: Any = env.unwrapped  # the family's env
    mode = getattr(u.problem, "action_mode", None) or getattr(u, "action_mode", None)
    if mode != "job":
        raise ValueError(f"net='entity' on P4 needs action_mode='job' (one level per job), not {mode!r}")
    return p4_layout(u.observation_space, env.get_wrapper_attr("pipeline").keys, int(u.action_space.nvec[0]) - 1)


def features(net: Any, obs: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
    """P4, per window slot: [present, share of the job's window left, log time left, share of its budget left,
    log budget, log value, β, log work, log age, share of its budget spent] (0 on empty slots); global: mean
    and max over machines of [rate, share, last executed, last work], the share of occupied slots, and
    log(1 + min(t, TIME_CAP)) / 10 (:func:`clustergym.core.entity_features.log_time_feature`). Scale-free (shares and
    logs, never t / T) and bounded: a job's times are read relative to its own window, so every feature stays
    in its training range at any horizon."""
    r = obs[:, net.ent_index]  # (B, J, 8): mask, a, d, B, spent, v, β, X
    t = obs[:, net.t_index:net.t_index + 1]  # (B, 1)
    present = r[..., 0] > 0.5
    a, d, bud, spent, v, beta, work = (r[..., k] for k in range(1, 8))
    left = (d - t).clamp_min(0.0)
    safe_b = bud.clamp_min(1e-9)
    x = th.stack([present.to(r.dtype), left / (d - a).clamp_min(1.0), th.log1p(left) / 5.0,
                  ((bud - spent) / safe_b).clamp(0.0, 1.0), th.log1p(bud.clamp_min(0.0)) / 5.0,
                  th.log1p(v.clamp_min(0.0)) / 5.0, beta, th.log1p(work.clamp_min(0.0)) / 5.0,
                  th.log1p((t - a).clamp_min(0.0)) / 5.0, (spent / safe_b).clamp(0.0, 1.0)], dim=-1)
    x = x * present.unsqueeze(-1).to(x.dtype)
    m = obs[:, net.pool_index]  # (B, M, 4)
    glob = th.cat([m.mean(dim=1), m.amax(dim=1), present.to(r.dtype).mean(dim=1, keepdim=True),
                   log_time_feature(t)], dim=1)
    return x, present, glob
