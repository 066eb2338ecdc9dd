"""A masked autoregressive decoder (``clustergym train --net autoregressive``): for a family whose spec names
decoder hooks (``FamilySpec.decoder``: P3's ring sizes), the action is one count per entity, entity after entity,
each count drawn knowing the counts before it, from a capacity the entities share (RL4CO-style constructive
policies, one entity per decoding step).

The flat MLP and the per-entity network (:mod:`clustergym.learning.entity`) draw every entity's count
independently: on P3 each job's ring size ignores what the jobs before it took, so a policy that fills the
cluster must learn it from rewards alone, and a request beyond the free GPUs is only repaired by the env. This
decoder conditions each count on the capacity still free and never asks for more than that:

* **Encoder** (once per observation): the family's ``features`` hook gives per-entity features x_e, a presence
  mask and global features g (raw flat observation: ``clustergym train`` turns ``VecNormalize``'s observation
  part off for this net, rewards are still normalised). φ(x_e) and the context ρ([mean φ, max φ, g]) are the
  per-entity network's set encoder; base_e = A φ(x_e) + C ρ + b.
* **Decoding order**: the entities in the observation's order (``order="window"``, the default), or in an order
  the family's hooks define (``order=<name>`` of the hooks' ``ORDERS``; P3: ``"attained"``, least attained
  service first, the continuous LAS's priority). The env still receives one count per entity in its own order:
  the order changes which entities are decided knowing the others' counts, not the action's meaning.
* **Decoder step** e (entities in the decoding order): the free capacity F_e = pool − Σ_{e' < e} a_e' and
  the demand D_e = Σ_{e' ≥ e} cap_e' give the step features s_e = [F_e / pool, min(F_e, K) / K,
  min(F_e / D_e, 2) / 2]; the logits of the counts 0..K are ``out(tanh(base_e + W s_e))``, **masked** so that
  a_e ≤ min(cap_e, F_e) (cap_e from the family's ``allocation`` hook: 0 for an absent entity, so it always
  gets 0). Count 0 is always allowed.
* **Log-probability, entropy** (training): F_e depends on the action only through the counts before e, so for a
  given action every step's logits are computed at once (teacher forcing: F = pool − exclusive cumulative
  sum of the action); log π(a) = Σ_e log π_e(a_e | a_<e). The entropy is Σ_e H(π_e(· | a_<e)) along the
  given action: the per-step entropies of the decoder, an estimate of the joint entropy (exact for a
  factorised policy), as constructive policies use it. Only sampling and the greedy action loop over the
  entities (the greedy action takes each step's most likely count).
* **Critic**: its own set encoder and ``Linear(h, 1)`` on its context.

The layout is plain JSON ints (``policy_kwargs["decoder"]``), so the no-pickle loader of ``sb3:`` rebuilds
the policy from the model's data. The weights depend on the feature sizes and ``hidden`` only.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch as th
from stable_baselines3.common.distributions import Distribution
from stable_baselines3.common.policies import ActorCriticPolicy
from torch import nn

from clustergym.core.family import FamilySpec, family_spec, family_specs
from clustergym.learning.entity import DEFAULT_HIDDEN, _SetEncoder
from clustergym.learning.grouped import PAD_LOGIT

__all__ = ["DECODER_ALGOS", "decoder_families", "check_decoder", "decoder_layout", "decoder_family", "DecoderNet",
           "AutoregressiveDistribution", "DecoderActorCriticPolicy"]

DECODER_ALGOS = ("ppo", "a2c")  # the decoder masks its own counts: MaskablePPO's env masks would not see a_<e
_STEP_FEATURES = 3


def _hooks(spec: FamilySpec) -> Any:
    """The family's decoder hooks module (the caller checked that it has one)."""
    hooks = spec.decoder_hooks()
    if hooks is None:
        raise ValueError(f"the family {spec.name!r} has no decoder hooks")
    return hooks


def decoder_families() -> tuple[str, ...]:
    """The registered families with decoder hooks (``FamilySpec.decoder``), in registration order."""
    return tuple(s.name for s in family_specs() if s.decoder is not None)


def check_decoder(family: str, algo: str) -> None:
    """ValueError unless the decoder can be trained for ``family`` with ``algo``."""
    if family not in decoder_families():
        specs = [family_spec(name) for name in decoder_families()]
        raise ValueError(f"net='autoregressive' supports the families {', '.join(s.name for s in specs)} "
                         f"({', '.join(s.number for s in specs)}), not {family!r}")
    if algo not in DECODER_ALGOS:
        raise ValueError(f"net='autoregressive' supports the algorithms {', '.join(DECODER_ALGOS)}, not {algo!r}")


def decoder_family(layout) -> FamilySpec | None:
    """The spec of the family a decoder layout belongs to (its ``"family"``, with decoder hooks), or None."""
    if not isinstance(layout, dict):
        return None
    fit = [s for s in family_specs() if s.decoder is not None and s.name == layout.get("family")]
    return fit[0] if fit and set(_hooks(fit[0]).BUFFERS) <= set(layout) else None


def decoder_layout(env: gym.Env) -> dict:
    """The layout of a training env (``make_train_env``) for the decoder: the ``layout`` hook of its family."""
    u: Any = env.unwrapped  # a family's env
    check_decoder(u.family, "ppo")
    layout = _hooks(family_spec(u.family)).layout(env)
    n = int(np.prod(env.observation_space.shape or ()))
    if n != layout["num_inputs"]:
        raise ValueError(f"net='autoregressive': the observation has {n} entries, the layout expects "
                         f"{layout['num_inputs']}")
    return layout


class DecoderNet(nn.Module):
    """The encoder, the decoder step and the critic (module docstring); plays the role of SB3's ``mlp_extractor``.
    ``forward_actor`` returns the per-entity decoder inputs in decoding order packed in one tensor (B, P·(h + 4)):
    base_e, cap_e, D_e, the pool and the entity's index in the observation; :class:`AutoregressiveDistribution`
    decodes them."""

    def __init__(self, layout: dict, hidden: int = DEFAULT_HIDDEN, order: str = "window"):
        super().__init__()
        spec = decoder_family(layout)
        if spec is None:
            raise ValueError(f"no decoder hooks for the family {layout.get('family')!r}")
        hooks = _hooks(spec)
        self._features, self._allocation = hooks.features, hooks.allocation
        orders = getattr(hooks, "ORDERS", {})
        if order != "window" and order not in orders:
            raise ValueError(f"order={str(order)[:40]!r} is invalid for the decoder of {spec.name}: expected "
                             f"{' or '.join(repr(o) for o in ('window', *orders))}")
        self.order = str(order)
        self._order_key = orders.get(order)
        self.levels, self.t_index, self.hidden = int(layout["levels"]), int(layout["t_index"]), int(hidden)
        for key, name in hooks.BUFFERS.items():  # not in the state_dict: rebuilt from the layout
            self.register_buffer(name, th.as_tensor(np.asarray(layout[key], dtype=np.int64)), persistent=False)
        x, _, glob = self._features(self, th.zeros(1, int(layout["num_inputs"])))
        self.P, f, g = int(x.shape[1]), int(x.shape[-1]), int(glob.shape[-1])
        self.actor = _SetEncoder(f, g, hidden)
        self.job_in = nn.Linear(hidden, hidden)
        self.ctx_in = nn.Linear(hidden, hidden, bias=False)
        self.step_in = nn.Linear(_STEP_FEATURES, hidden, bias=False)
        self.out = nn.Linear(hidden, self.levels)
        self.critic = _SetEncoder(f, g, hidden)
        self.latent_dim_pi = self.P * (hidden + 4)
        self.latent_dim_vf = hidden

    def forward_actor(self, obs: th.Tensor) -> th.Tensor:
        x, present, glob = self._features(self, obs)
        cap, pool = self._allocation(self, obs)
        cap = th.where(present, cap.clamp(max=self.levels - 1), th.zeros_like(cap)).to(x.dtype)
        phi, ctx = self.actor(x, present, glob)
        base = self.job_in(phi) + self.ctx_in(ctx).unsqueeze(1)  # (B, P, h)
        index = th.arange(self.P, device=x.device).expand(x.shape[0], self.P)
        if self._order_key is not None:  # decoding order: a stable sort of the hooks' key (ties keep the obs order)
            index = th.sort(self._order_key(self, obs), dim=1, stable=True).indices
            base = base.gather(1, index.unsqueeze(-1).expand_as(base))
            cap = cap.gather(1, index)
        demand = cap.flip(1).cumsum(1).flip(1)  # D_e = Σ_{e' >= e} cap_e' (decoding order)
        pool = pool.to(x.dtype).unsqueeze(1).expand_as(cap)
        return th.cat([base, cap.unsqueeze(-1), demand.unsqueeze(-1), pool.unsqueeze(-1),
                       index.to(x.dtype).unsqueeze(-1)], dim=-1).flatten(1)

    def forward_critic(self, obs: th.Tensor) -> th.Tensor:
        x, present, glob = self._features(self, obs)
        return self.critic(x, present, glob)[1]

    def forward(self, obs: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        return self.forward_actor(obs), self.forward_critic(obs)

    def step_logits(self, base: th.Tensor, free: th.Tensor, cap: th.Tensor, demand: th.Tensor,
                    pool: th.Tensor) -> th.Tensor:
        """Masked logits (..., K+1) of one step (or of every step at once): counts above min(cap, free) get
        ``PAD_LOGIT`` (probability exactly 0); ``free`` is the capacity left by the counts before."""
        K = self.levels - 1
        s = th.stack([free / pool.clamp_min(1.0), free.clamp(max=float(K)) / max(K, 1),
                      (free / demand.clamp_min(1.0)).clamp(max=2.0) / 2.0], dim=-1)
        logits = self.out(th.tanh(base + self.step_in(s)))
        k = th.arange(self.levels, device=base.device, dtype=free.dtype)
        allowed = k <= th.minimum(cap, free).unsqueeze(-1)
        return th.where(allowed, logits, th.full_like(logits, PAD_LOGIT))


class AutoregressiveDistribution(Distribution):
    """The decoder's distribution over the whole action (one count per entity) for a batch of packed decoder
    inputs (``DecoderNet.forward_actor``). ``log_prob`` is teacher-forced; ``entropy`` is the per-step
    entropies summed along the last action given to ``log_prob`` (module docstring)."""

    def __init__(self, net: DecoderNet, latent: th.Tensor | None = None):
        super().__init__()
        self.net = net
        self._entropy: th.Tensor | None = None
        if latent is not None:
            self.proba_distribution(latent)

    def proba_distribution_net(self, *args, **kwargs):
        raise NotImplementedError("the decoder's layers are DecoderNet's (step_logits)")

    def proba_distribution(self, latent: th.Tensor) -> AutoregressiveDistribution:
        h = self.net.hidden
        z = latent.reshape(latent.shape[0], self.net.P, h + 4)
        self.base, self.cap, self.demand, self.pool = z[..., :h], z[..., h], z[..., h + 1], z[..., 0, h + 2]
        self.index = th.round(z[..., h + 3]).long()  # decoding step e -> the entity's position in the observation
        self._entropy = None
        return self

    def free_before(self, actions: th.Tensor) -> th.Tensor:
        """(B, P) the capacity left for each entity by the counts before it: pool − exclusive cumulative sum."""
        a = actions.to(self.base.dtype)
        return self.pool.unsqueeze(1) - (a.cumsum(dim=1) - a)

    def log_prob(self, actions: th.Tensor) -> th.Tensor:
        a = actions.long().gather(1, self.index)  # the counts in decoding order
        free = self.free_before(a).clamp_min(0.0)
        logp = th.log_softmax(self.net.step_logits(self.base, free, self.cap, self.demand,
                                                   self.pool.unsqueeze(1).expand_as(free)), dim=-1)
        self._entropy = -(logp.exp() * logp).sum(dim=-1).sum(dim=-1)
        return logp.gather(-1, a.unsqueeze(-1)).squeeze(-1).sum(dim=-1)

    def entropy(self) -> th.Tensor:
        if self._entropy is None:
            raise RuntimeError("the decoder's entropy is taken along an action: call log_prob(actions) first")
        return self._entropy

    def decode(self, deterministic: bool) -> tuple[th.Tensor, th.Tensor]:
        """(actions (B, P) in the observation's order, Σ_e log π_e(a_e | a_<e) (B,)): entity after entity in
        decoding order, sampled or greedy."""
        free = self.pool.clone()
        acts, total = [], th.zeros_like(free)
        for e in range(self.net.P):
            logits = self.net.step_logits(self.base[:, e], free, self.cap[:, e], self.demand[:, e], self.pool)
            logp = th.log_softmax(logits, dim=-1)
            a = logp.argmax(dim=-1) if deterministic else th.multinomial(logp.exp(), 1).squeeze(-1)
            total = total + logp.gather(-1, a.unsqueeze(-1)).squeeze(-1)
            free = free - a.to(free.dtype)
            acts.append(a)
        out = th.empty_like(self.index)
        return out.scatter_(1, self.index, th.stack(acts, dim=1)), total

    def sample(self) -> th.Tensor:
        return self.decode(False)[0]

    def mode(self) -> th.Tensor:
        return self.decode(True)[0]

    def actions_from_params(self, latent: th.Tensor, deterministic: bool = False) -> th.Tensor:
        return self.proba_distribution(latent).get_actions(deterministic=deterministic)

    def log_prob_from_params(self, latent: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        actions = self.actions_from_params(latent)
        return actions, self.log_prob(actions)


class DecoderActorCriticPolicy(ActorCriticPolicy):
    """PPO / A2C with :class:`DecoderNet` as ``mlp_extractor`` and :class:`AutoregressiveDistribution` as the
    action distribution (``policy_kwargs["decoder"]``: the layout of :func:`decoder_layout`)."""

    def __init__(self, *args, decoder: dict, hidden: int = DEFAULT_HIDDEN, order: str = "window", **kwargs):
        if decoder_family(decoder) is None:
            raise ValueError("the decoder policy needs policy_kwargs['decoder'], the layout of decoder_layout()")
        self.decoder = decoder
        self.hidden = int(hidden)
        self.order = str(order)
        kwargs.pop("net_arch", None)  # the decoder has its own architecture
        super().__init__(*args, **kwargs)

    def _get_constructor_parameters(self) -> dict:
        data = super()._get_constructor_parameters()
        data.update(decoder=self.decoder, hidden=self.hidden)
        if self.order != "window":  # older models (and readers) know no order
            data.update(order=self.order)
        return data

    def _build_mlp_extractor(self) -> None:
        n = int(np.prod(self.observation_space.shape))
        if n != int(self.decoder["num_inputs"]):
            raise ValueError(f"the decoder layout expects {self.decoder['num_inputs']} observation entries, "
                             f"the observation space has {n}")
        self.mlp_extractor = DecoderNet(self.decoder, self.hidden, self.order)

    def _build(self, lr_schedule) -> None:
        super()._build(lr_schedule)
        self.action_net = nn.Identity()  # the decoder's logits come from DecoderNet.step_logits
        if self.ortho_init:  # small initial logits, as SB3 does for its action_net (gain 0.01)
            self.mlp_extractor.out.apply(lambda m: self.init_weights(m, gain=0.01))
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)

    def _get_action_dist_from_latent(self, latent_pi: th.Tensor) -> AutoregressiveDistribution:  # type: ignore[override]
        return AutoregressiveDistribution(self.mlp_extractor, latent_pi)
