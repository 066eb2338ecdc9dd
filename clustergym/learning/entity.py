"""A per-entity policy network (``clustergym train --net entity``): per channel on P1 MultiServerChannel, as
described below; per port on P2 (``"port"`` action mode) and per window slot on P4 (``"job"`` mode) with the
same φ / ρ / ψ structure and the features of ``_p2_features`` / ``_p4_features``.

The flat MLP (``net="mlp"``) maps the whole padded observation to |E| logits with weights per input
position, so its parameter count grows with ``max_edges`` and channel e's weights are learnt from
channel e alone. This network uses **one set of weights for every channel** (a Deep-Sets / PointNet
style network, pooling over channels):

* **Per-channel features** x_e (gathered from the same flat observation the MLP sees, the flattened
  Dict observation + the empirical statistics of :class:`clustergym.learning.pipeline.ObsPipeline`,
  with integer index arrays): ``[present_e, arrival_e, v̂_e, n_e/t, a_1^e/c_1, …, a_K^e/c_K]`` —
  ``edge_present``, ``edge_arrival`` (its port has a job: the action mask), the statistics' mean
  realised utility and share of slots used, and ``edge_demand``. All lie in [0, 1], so the network
  needs no observation normalisation (``clustergym train`` turns ``VecNormalize``'s observation part
  off for this net: its per-position statistics would tie the model to one ``max_edges``; rewards are
  still normalised in training).
* **Global features** g: ``min(t, 199) / 200`` (:func:`time_feature`; 200 slots is the training horizon of
  the shipped models: the feature stops growing there, so a longer run stays in its training range; earlier
  versions read ``t / T_train``, which reaches 10 at slot 2,000), the mean over ports of this slot's arrivals and of the share of slots with a job, the share of
  present channels that are active (present and with a job), and the load Σ_{e active} a_k^e / c_k per
  device type k (how far the active channels exceed the capacity; eq. 2).
* φ(x_e): a shared MLP (f → h → h, tanh; h = ``hidden``, default 64). Context c = [mean_e φ(x_e), max_e
  φ(x_e), g] with mean and max over **present channels only** (``edge_present``; padding channels never
  enter the context), ρ(c) an MLP (→ h). Channel logit ψ([φ(x_e), ρ(c)]) = w·tanh(A φ(x_e) + C ρ(c) + b) + b'
  (2h → h → 1, the first layer split so C ρ(c) is computed once per observation), the same ψ for every
  channel. The critic
  has its own φ and ρ (SB3's default MLP policy also keeps actor and critic apart) and a value
  ``Linear(h, 1)`` on ρ_v(c).
* **Logit layout.** PPO / A2C on ``MultiBinary(P)`` use SB3's ``BernoulliDistribution``: one logit per
  channel, (B, P). MaskablePPO uses the fast masked head (:mod:`clustergym.learning.heads`, or
  sb3-contrib's with ``head="sb3"``), whose flat logits are (B, 2P) laid out per channel as
  ``[logit(x_e=0), logit(x_e=1)]``; the network gives ``[0, ψ_e]`` (a categorical over two choices only
  depends on the difference). Padding channels get ``PAD_LOGIT`` for "select", so they are never chosen,
  with or without a mask.

The parameter count depends on f = 4 + K and h only, not on |E|, ``max_edges`` or L: the same
``state_dict`` loads into the policy of any P1 instance size (the index arrays are non-persistent
buffers, rebuilt from the layout). The layout is plain JSON ints (``policy_kwargs["entity"]``), so SB3's
saved ``data`` JSON holds it and the no-pickle loader (:func:`clustergym.learning.agent.safe_load`)
rebuilds the policy from it.

Ports: a channel's port identity is not in the observation (only its port's job flag, ``edge_arrival``),
so there is no per-port pooling. P1's slots are independent given the statistics (capacity is per slot,
eq. 2; nothing carries over but what the statistics summarise), so the per-slot decision needs the
channel's own estimate, its demand and the slot's load, which the features hold.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch as th
from torch import nn

from clustergym.core.env import TIME_CAP
from clustergym.learning.algos import NETS
from clustergym.learning.grouped import PAD_LOGIT
from clustergym.learning.heads import FastActorCriticPolicy
from clustergym.learning.pipeline import layout_keys

try:
    from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy

    from clustergym.learning.heads import FastMaskableActorCriticPolicy
except ImportError:  # pragma: no cover - exercised only without the [contrib] extra
    MaskableActorCriticPolicy = FastMaskableActorCriticPolicy = None

__all__ = ["ENTITY_FAMILIES", "ENTITY_ALGOS", "p1_layout", "entity_layout", "check_net", "entity_policy", "EntityNet",
           "EntityActorCriticPolicy", "EntityMaskableActorCriticPolicy"]

# families with a per-entity layout: P1 (channels), P2 in the "port" action mode (ports), P4 in the "job" mode (jobs)
ENTITY_FAMILIES = ("multiserver-channel", "multiserver-allocation", "approxjobs")
ENTITY_ALGOS = ("ppo", "a2c", "maskable_ppo")
DEFAULT_HIDDEN = 64  # h; train() writes it into policy_kwargs, so a saved model never depends on this default
CHANNEL_FEATURES = ("present", "arrival", "mean_utility", "use_share")  # then the K demand columns


def check_net(net: str, family: str, algo: str, stats: bool = True) -> None:
    """ValueError unless ``net`` can be trained for ``family`` with ``algo``."""
    if net not in NETS:
        raise ValueError(f"net={net!r} is invalid: expected one of {', '.join(NETS)}")
    if net == "mlp":
        return
    if family not in ENTITY_FAMILIES:
        raise ValueError(f"net='entity' supports the families {', '.join(ENTITY_FAMILIES)} (P1, P2, P4), not "
                         f"{family!r}")
    if algo not in ENTITY_ALGOS:
        raise ValueError(f"net='entity' supports the algorithms {', '.join(ENTITY_ALGOS)}, not {algo!r}")
    if not stats:
        raise ValueError("net='entity' needs the empirical statistics (its channel features): drop --no-stats")


def p1_layout(obs_space: gym.spaces.Dict, num_ports: int, keys: tuple[str, ...] | None = None) -> dict:
    """The index layout of P1's flat observation: the observation keys ``keys`` flattened one after the other
    (``clustergym.learning.pipeline.ObsPipeline.keys``; default: the ``"legacy"`` layout of earlier versions,
    [flatten(arrivals, edge_*, t), v̂ (P), n/t (P), jobs/t (L)]).

    ``obs_space``: the padded env's Dict observation space (``edge_present``, ``edge_arrival``,
    ``edge_demand`` present). The statistics are the keys ``utility_mean`` (v̂), ``channel_share`` (n/t)
    and ``arrival_share`` (jobs/t). Returns plain ints/floats."""
    need = ("arrivals", "t", "edge_present", "edge_arrival", "edge_demand")
    missing = [k for k in need if k not in obs_space.spaces]
    if missing:
        raise ValueError(f"net='entity' needs the padded P1 observation (max_edges set); missing keys {missing}")
    if keys is None:
        keys = layout_keys("multiserver-channel", obs_space, "legacy")
    missing = [k for k in ("utility_mean", "channel_share", "arrival_share") if k not in keys]
    if missing:
        raise ValueError(f"net='entity' needs the statistics in the observation; missing keys {missing}")
    off, pos = 0, {}
    for key in keys:
        pos[key] = off
        off += int(gym.spaces.flatdim(obs_space[key]))
    P, K = obs_space["edge_demand"].shape
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


def _positions(obs_space: gym.spaces.Dict, keys) -> tuple[dict, int]:
    """Offset of each key in the flat observation (the keys flattened one after the other), and its size."""
    off, pos = 0, {}
    for key in keys:
        pos[key] = off
        off += int(gym.spaces.flatdim(obs_space[key]))
    return pos, off


def p4_layout(obs_space: gym.spaces.Dict, keys: tuple[str, ...], levels: int) -> dict:
    """The index layout of P4's flat observation in the ``"job"`` action mode: per window slot j the raw
    columns [job_mask_j, arrival, deadline, budget, spent, value, β, work] (``JOB_FEATURES`` without the id),
    per machine i [machine_rate, machine_share, last_executed, last_work], and ``t``."""
    need = ("job_mask", "jobs", "t", "machine_rate", "machine_share", "last_executed", "last_work")
    missing = [k for k in need if k not in keys]
    if missing:
        raise ValueError(f"net='entity' on P4 needs the observation keys {missing} (the 'full' layout)")
    pos, off = _positions(obs_space, keys)
    J, F = obs_space["jobs"].shape
    j = np.arange(J)
    cols = [pos["job_mask"] + j] + [pos["jobs"] + j * F + c for c in range(1, F)]  # column 0 is the job id
    M = obs_space["machine_rate"].shape[0]
    m = np.arange(M)
    mach = np.stack([pos[k] + m for k in ("machine_rate", "machine_share", "last_executed", "last_work")], axis=1)
    return {"family": "approxjobs", "num_inputs": int(off), "num_channels": int(J),
            "entity_index": np.stack(cols, axis=1).tolist(), "pool_index": mach.tolist(),
            "t_index": int(pos["t"]), "logits_per_entity": int(levels) + 1}


def p2_layout(obs_space: gym.spaces.Dict, keys: tuple[str, ...]) -> dict:
    """The index layout of P2's flat observation in the ``"port"`` action mode: per port l the raw columns
    [arrivals_l, arrival_share_l, port_reward_mean_l, last_port_reward_l], the cost weights β (global) and
    ``t``. Every port is an entity (the action has one fraction per port)."""
    need = ("arrivals", "arrival_share", "port_reward_mean", "last_port_reward", "beta", "t")
    missing = [k for k in need if k not in keys]
    if missing:
        raise ValueError(f"net='entity' on P2 needs the observation keys {missing} (the 'compact' or 'full' "
                         "layout)")
    pos, off = _positions(obs_space, keys)
    L = obs_space["arrivals"].shape[0]
    port = np.arange(L)
    cols = [pos[k] + port for k in ("arrivals", "arrival_share", "port_reward_mean", "last_port_reward")]
    K = obs_space["beta"].shape[0]
    return {"family": "multiserver-allocation", "num_inputs": int(off), "num_channels": int(L),
            "entity_index": np.stack(cols, axis=1).tolist(), "global_index": [int(pos["beta"] + k) for k in range(K)],
            "t_index": int(pos["t"]), "logits_per_entity": 1}


def entity_layout(env: gym.Env) -> dict:
    """The layout of a training env (``make_train_env``: flat observation + statistics) for the entity net."""
    u = env.unwrapped
    if u.family not in ENTITY_FAMILIES:
        raise ValueError(f"net='entity' supports the families {', '.join(ENTITY_FAMILIES)} (P1, P2, P4), not "
                         f"{u.family!r}")
    keys = env.get_wrapper_attr("pipeline").keys
    mode = getattr(u.problem, "action_mode", None) or getattr(u, "action_mode", None)
    if u.family == "approxjobs":
        if mode != "job":
            raise ValueError(f"net='entity' on P4 needs action_mode='job' (one level per job), not {mode!r}")
        layout = p4_layout(u.observation_space, keys, int(u.action_space.nvec[0]) - 1)
    elif u.family == "multiserver-allocation":
        if mode != "port":
            raise ValueError(f"net='entity' on P2 needs action_mode='port' (one fraction per port), not {mode!r}")
        layout = p2_layout(u.observation_space, keys)
    else:
        layout = p1_layout(u.observation_space, u.problem.num_ports, keys)
    n = int(np.prod(env.observation_space.shape))
    if n != layout["num_inputs"]:
        raise ValueError(f"net='entity': the observation has {n} entries, the P1 layout expects "
                         f"{layout['num_inputs']} (are the statistics on?)")
    return layout


def _mlp(sizes, out_act: bool = True) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if out_act or i < len(sizes) - 2:
            layers.append(nn.Tanh())
    return nn.Sequential(*layers)


class _SetEncoder(nn.Module):
    """φ over channels and ρ over the pooled context (one for the actor, one for the critic)."""

    def __init__(self, f: int, g: int, hidden: int):
        super().__init__()
        self.phi = _mlp([f, hidden, hidden])
        self.rho = _mlp([2 * hidden + g, hidden])

    def forward(self, x: th.Tensor, present: th.Tensor, glob: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        """x (B, P, f), present (B, P) bool, glob (B, g) -> (φ (B, P, h), ρ(c) (B, h))."""
        phi = self.phi(x)
        w = present.unsqueeze(-1).to(phi.dtype)
        count = w.sum(dim=1).clamp_min(1.0)
        mean = (phi * w).sum(dim=1) / count
        neg = th.tensor(-1e9, dtype=phi.dtype, device=phi.device)
        mx = th.where(present.unsqueeze(-1), phi, neg).amax(dim=1)
        mx = th.where(present.any(dim=1, keepdim=True), mx, th.zeros_like(mx))  # no present channel: 0
        return phi, self.rho(th.cat([mean, mx, glob], dim=1))


def _slog(x: th.Tensor) -> th.Tensor:
    """sign(x) log(1 + |x|): rewards and budgets of any scale into a range a tanh network takes."""
    return th.sign(x) * th.log1p(th.abs(x))


def time_feature(t: th.Tensor) -> th.Tensor:
    """P1's time feature min(t, TIME_CAP) / (TIME_CAP + 1) in [0, 0.995]: it grows over the first 200 slots and
    then stays, so a run of any length reads values the network met in training (``clustergym.learning.pipeline``)."""
    return t.clamp(0.0, float(TIME_CAP)) / float(TIME_CAP + 1)


def log_time_feature(t: th.Tensor) -> th.Tensor:
    """P2's and P4's time feature log(1 + min(t, TIME_CAP)) / 10, in [0, 0.54] (``clustergym.learning.pipeline``)."""
    return th.log1p(t.clamp(0.0, float(TIME_CAP))) / 10.0


def _p4_features(net: "EntityNet", obs: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
    """P4, per window slot: [present, share of the job's window left, log time left, share of its budget left,
    log budget, log value, β, log work, log age, share of its budget spent] (0 on empty slots); global: mean
    and max over machines of [rate, share, last executed, last work], the share of occupied slots, and
    log(1 + min(t, TIME_CAP)) / 10 (:func:`log_time_feature`). Scale-free (shares and logs, never t / T) and bounded:
    a job's times are read relative to its own window, so every feature stays in its training range at any
    horizon."""
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


def _p2_features(net: "EntityNet", obs: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
    """P2, per port: [job this slot, share of slots with a job, log mean realised reward, log last reward];
    global: log β, the share of ports with a job, log(1 + min(t, TIME_CAP)) / 10 (:func:`log_time_feature`).
    Every port is present."""
    r = obs[:, net.ent_index]  # (B, L, 4)
    t = obs[:, net.t_index:net.t_index + 1]
    x = th.stack([r[..., 0], r[..., 1], _slog(r[..., 2]), _slog(r[..., 3])], dim=-1)
    present = th.ones(r.shape[:2], dtype=th.bool, device=r.device)
    glob = th.cat([_slog(obs[:, net.glob_index]), r[..., 0].mean(dim=1, keepdim=True),
                   log_time_feature(t)], dim=1)
    return x, present, glob


_FEATURES = {"approxjobs": _p4_features, "multiserver-allocation": _p2_features}


class EntityNet(nn.Module):
    """The per-entity actor and critic (module docstring); plays the role of SB3's ``mlp_extractor``:
    ``forward_actor`` returns the action logits themselves (the policy's ``action_net`` is the identity).

    The entities are P1's channels, P2's ports (``"port"`` action mode: one Gaussian mean per port) or P4's
    window slots (``"job"`` mode: S + 1 logits per slot, the levels); the layout (:func:`entity_layout`) says
    which, and ``_p2_features`` / ``_p4_features`` build their features from the raw observation."""

    def __init__(self, layout: dict, hidden: int = DEFAULT_HIDDEN, logits_per_channel: int = 1):
        super().__init__()
        self.family = layout.get("family", "multiserver-channel")
        self.t_index = int(layout["t_index"])
        if self.family == "multiserver-channel":
            chan = th.as_tensor(np.asarray(layout["channel_index"], dtype=np.int64))
            self.register_buffer("chan_index", chan, persistent=False)  # (P, f): not in the state_dict
            self.register_buffer("arr_index", th.as_tensor(np.asarray(layout["arrivals_index"], dtype=np.int64)),
                                 persistent=False)
            self.register_buffer("jobs_index", th.as_tensor(np.asarray(layout["jobs_index"], dtype=np.int64)),
                                 persistent=False)
            if abs(float(layout["t_scale"]) * (TIME_CAP + 1) - 1.0) > 1e-9:  # an earlier version's linear t / T_train
                raise ValueError(f"this per-entity model reads the time feature t / {1.0 / float(layout['t_scale']):g} "
                                 "of an earlier version, which leaves its training range on longer runs; this "
                                 f"version reads min(t, {TIME_CAP}) / {TIME_CAP + 1}: train the model again")
            self.P, f = chan.shape
            self.K = f - len(CHANNEL_FEATURES)
            g = 4 + self.K
            self.logits_per_channel = int(logits_per_channel)
            n_out = 1
        else:
            if self.family not in _FEATURES:
                raise ValueError(f"no entity features for the family {self.family!r}")
            self._features = _FEATURES[self.family]
            ent = th.as_tensor(np.asarray(layout["entity_index"], dtype=np.int64))
            self.register_buffer("ent_index", ent, persistent=False)
            self.register_buffer("pool_index", th.as_tensor(np.asarray(layout.get("pool_index", [[0]]),
                                                                       dtype=np.int64)), persistent=False)
            self.register_buffer("glob_index", th.as_tensor(np.asarray(layout.get("global_index", []),
                                                                       dtype=np.int64)), persistent=False)
            self.P = int(ent.shape[0])
            n_out = self.logits_per_channel = int(layout["logits_per_entity"])
            x, _, glob = self._features(self, th.zeros(1, int(layout["num_inputs"])))
            f, g = int(x.shape[-1]), int(glob.shape[-1])
        self.actor = _SetEncoder(f, g, hidden)
        # ψ([φ_e, ρ]) = w · tanh(A φ_e + C ρ + b) + b': the first layer split so C ρ is computed once per row,
        # not once per channel (the same function class as a Linear on the concatenation, fewer operations)
        self.psi_channel = nn.Linear(hidden, hidden)
        self.psi_context = nn.Linear(hidden, hidden, bias=False)
        self.psi_out = nn.Linear(hidden, n_out)
        self.critic = _SetEncoder(f, g, hidden)
        self.latent_dim_pi = self.P * self.logits_per_channel
        self.latent_dim_vf = hidden

    def gather(self, obs: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        """Flat observations (B, N) -> entity features (B, P, f), present (B, P) bool, global features (B, g)."""
        if self.family != "multiserver-channel":
            return self._features(self, obs)
        x = obs[:, self.chan_index]  # (B, P, f)
        present = x[..., 0] > 0.5
        active = (present & (x[..., 1] > 0.5)).to(x.dtype)
        n_present = present.to(x.dtype).sum(dim=1).clamp_min(1.0)
        glob = th.cat([time_feature(obs[:, self.t_index:self.t_index + 1]),
                       obs[:, self.arr_index].mean(dim=1, keepdim=True),
                       obs[:, self.jobs_index].mean(dim=1, keepdim=True),
                       (active.sum(dim=1) / n_present).unsqueeze(1),
                       (x[..., len(CHANNEL_FEATURES):] * active.unsqueeze(-1)).sum(dim=1)], dim=1)
        return x, present, glob

    def forward_actor(self, obs: th.Tensor) -> th.Tensor:
        x, present, glob = self.gather(obs)
        phi, ctx = self.actor(x, present, glob)
        z = th.tanh(self.psi_channel(phi) + self.psi_context(ctx).unsqueeze(1))  # (B, P, h)
        if self.family != "multiserver-channel":  # n_out numbers per entity, entity after entity
            return self.psi_out(z).reshape(z.shape[0], self.P * self.logits_per_channel)
        logit = self.psi_out(z).squeeze(-1)  # (B, P)
        logit = th.where(present, logit, th.tensor(PAD_LOGIT, dtype=logit.dtype, device=logit.device))
        if self.logits_per_channel == 2:  # the masked categorical head: [logit(0), logit(1)] per channel
            logit = th.stack([th.zeros_like(logit), logit], dim=2).reshape(logit.shape[0], 2 * self.P)
        return logit

    def forward_critic(self, obs: th.Tensor) -> th.Tensor:
        x, present, glob = self.gather(obs)
        return self.critic(x, present, glob)[1]

    def forward(self, obs: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        return self.forward_actor(obs), self.forward_critic(obs)


class _EntityMixin:
    """Replaces SB3's ``mlp_extractor`` by :class:`EntityNet` and its ``action_net`` by the identity."""

    _logits_per_channel = 1

    def __init__(self, *args, entity: dict, hidden: int = DEFAULT_HIDDEN, **kwargs):
        if not isinstance(entity, dict) or not {"channel_index", "entity_index"} & set(entity):
            raise ValueError("the entity policy needs policy_kwargs['entity'], the layout of entity_layout()")
        self.entity = entity
        self.hidden = int(hidden)
        kwargs.pop("net_arch", None)  # the entity net has its own architecture
        super().__init__(*args, **kwargs)

    def _get_constructor_parameters(self) -> dict:
        data = super()._get_constructor_parameters()
        data.update(entity=self.entity, hidden=self.hidden)
        return data

    def _build_mlp_extractor(self) -> None:
        n = int(np.prod(self.observation_space.shape))
        if n != int(self.entity["num_inputs"]):
            raise ValueError(f"the entity layout expects {self.entity['num_inputs']} observation entries, "
                             f"the observation space has {n}")
        self.mlp_extractor = EntityNet(self.entity, self.hidden, self._logits_per_channel)

    def _build(self, lr_schedule) -> None:
        super()._build(lr_schedule)
        self.action_net = nn.Identity()  # the logits come out of EntityNet.forward_actor
        if hasattr(self, "ungroup_rows"):  # fast heads: EntityNet's logits are in SB3's order
            self.ungroup_rows()
        if self.ortho_init:  # small initial logits, as SB3 does for its action_net (gain 0.01)
            self.mlp_extractor.psi_out.apply(lambda m: self.init_weights(m, gain=0.01))
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)


class EntityActorCriticPolicy(_EntityMixin, FastActorCriticPolicy):
    """PPO / A2C on P1 (``MultiBinary``: SB3's ``BernoulliDistribution``, one logit per channel; the same
    with ``head="sb3"``)."""


if MaskableActorCriticPolicy is not None:
    class EntityMaskableActorCriticPolicy(_EntityMixin, FastMaskableActorCriticPolicy):
        """MaskablePPO on P1 with the fast masked head: flat logits (B, 2P), ``[0, ψ_e]`` per channel."""

        _logits_per_channel = 2

    class SB3EntityMaskableActorCriticPolicy(_EntityMixin, MaskableActorCriticPolicy):
        """MaskablePPO on P1 with sb3-contrib's masked distribution (same logit layout)."""

        _logits_per_channel = 2
else:  # pragma: no cover
    EntityMaskableActorCriticPolicy = SB3EntityMaskableActorCriticPolicy = None


def entity_policy(algo: str, head: str = "fast"):
    """The entity policy class for ``algo`` and ``head``."""
    if algo not in ENTITY_ALGOS:
        raise ValueError(f"net='entity' supports the algorithms {', '.join(ENTITY_ALGOS)}, not {algo!r}")
    if algo == "maskable_ppo":
        cls = EntityMaskableActorCriticPolicy if head == "fast" else SB3EntityMaskableActorCriticPolicy
        if cls is None:  # pragma: no cover
            raise ValueError("algo 'maskable_ppo' needs sb3_contrib: pip install 'clustergym[contrib]'")
        return cls
    return EntityActorCriticPolicy  # MultiBinary without masks: SB3's Bernoulli with either head
