"""A per-entity policy network (``clustergym train --net entity``): one set of weights for every entity of a
family whose spec names per-entity hooks (``FamilySpec.entity``: P1's channels, P2's ports in the ``"port"``
action mode, P4's window slots in the ``"job"`` mode). The family's hooks module (e.g.
:mod:`clustergym.envs.multiserver.channel.entity`) gives the index layout of its flat observation and the
entities' features; this module holds what every family shares.

The flat MLP (``net="mlp"``) maps the whole padded observation to |E| logits with weights per input
position, so its parameter count grows with ``max_edges`` and channel e's weights are learnt from
channel e alone. This network uses **one set of weights for every entity** (a Deep-Sets / PointNet
style network, pooling over entities):

* **Features** (the family's ``features`` hook): per-entity features x_e, a presence mask and global
  features g, gathered with integer index arrays from the same flat observation the MLP sees (the
  flattened Dict observation + the empirical statistics of :class:`clustergym.learning.pipeline.ObsPipeline`).
  They are bounded (shares, logs, the capped time features of :mod:`clustergym.core.entity_features`), so the
  network needs no observation normalisation (``clustergym train`` turns ``VecNormalize``'s observation
  part off for this net: its per-position statistics would tie the model to one ``max_edges``; rewards are
  still normalised in training).
* φ(x_e): a shared MLP (f → h → h, tanh; h = ``hidden``, default 64). Context c = [mean_e φ(x_e), max_e
  φ(x_e), g] with mean and max over **present entities only** (padding entities never enter the context),
  ρ(c) an MLP (→ h). Entity output ψ([φ(x_e), ρ(c)]) = w·tanh(A φ(x_e) + C ρ(c) + b) + b'
  (2h → h → n_out, the first layer split so C ρ(c) is computed once per observation), the same ψ for every
  entity. The critic has its own φ and ρ (SB3's default MLP policy also keeps actor and critic apart) and a
  value ``Linear(h, 1)`` on ρ_v(c).
* **Output layout.** A family with ``SELECT`` (P1) has one binary "select" logit per entity: PPO / A2C on
  ``MultiBinary(P)`` use SB3's ``BernoulliDistribution``, one logit per entity, (B, P); MaskablePPO uses the
  fast masked head (:mod:`clustergym.learning.heads`, or sb3-contrib's with ``head="sb3"``), whose flat
  logits are (B, 2P) laid out per entity as ``[logit(x_e=0), logit(x_e=1)]``; the network gives
  ``[0, ψ_e]`` (a categorical over two choices only depends on the difference). Absent entities get
  ``PAD_LOGIT`` for "select", so they are never chosen, with or without a mask. Otherwise ψ gives the
  layout's ``logits_per_entity`` numbers per entity, entity after entity (P4's level logits, P2's Gaussian
  means).

The parameter count depends on f, g and h only, not on the number of entities: the same ``state_dict``
loads into the policy of any instance size (the index arrays are non-persistent buffers, rebuilt from the
layout). The layout is plain JSON ints (``policy_kwargs["entity"]``), so SB3's saved ``data`` JSON holds it
and the no-pickle loader (:func:`clustergym.learning.sb3_agent.safe_load`) rebuilds the policy from it.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch as th
from torch import nn

from clustergym.core.family import FamilySpec, family_spec, family_specs
from clustergym.learning.algos import NETS
from clustergym.learning.grouped import PAD_LOGIT
from clustergym.learning.heads import FastActorCriticPolicy

try:
    from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy

    from clustergym.learning.heads import FastMaskableActorCriticPolicy
except ImportError:  # pragma: no cover - exercised only without the [contrib] extra
    MaskableActorCriticPolicy = FastMaskableActorCriticPolicy = None

__all__ = ["ENTITY_ALGOS", "entity_families", "entity_layout", "layout_family", "check_net", "entity_policy",
           "EntityNet", "EntityActorCriticPolicy", "EntityMaskableActorCriticPolicy"]

ENTITY_ALGOS = ("ppo", "a2c", "maskable_ppo")
DEFAULT_HIDDEN = 64  # h; train() writes it into policy_kwargs, so a saved model never depends on this default


def entity_families() -> tuple[str, ...]:
    """The registered families with per-entity network hooks (``FamilySpec.entity``), in registration order."""
    return tuple(s.name for s in family_specs() if s.entity is not None)


def _unsupported(family: str) -> ValueError:
    specs = [family_spec(name) for name in entity_families()]
    return ValueError(f"net='entity' supports the families {', '.join(s.name for s in specs)} "
                      f"({', '.join(s.number for s in specs)}), not {family!r}")


def check_net(net: str, family: str, algo: str, stats: bool = True) -> None:
    """ValueError unless ``net`` can be trained for ``family`` with ``algo``."""
    if net not in NETS:
        raise ValueError(f"net={net!r} is invalid: expected one of {', '.join(NETS)}")
    if net == "mlp":
        return
    if family not in entity_families():
        raise _unsupported(family)
    if algo not in ENTITY_ALGOS:
        raise ValueError(f"net='entity' supports the algorithms {', '.join(ENTITY_ALGOS)}, not {algo!r}")
    if not stats:
        raise ValueError("net='entity' needs the empirical statistics (its entity features): drop --no-stats")


def entity_layout(env: gym.Env) -> dict:
    """The layout of a training env (``make_train_env``: flat observation + statistics) for the entity net:
    the ``layout`` hook of its family (``FamilySpec.entity``)."""
    u = env.unwrapped
    if u.family not in entity_families():
        raise _unsupported(u.family)
    spec = family_spec(u.family)
    layout = spec.entity_hooks().layout(env)
    n = int(np.prod(env.observation_space.shape))
    if n != layout["num_inputs"]:
        raise ValueError(f"net='entity': the observation has {n} entries, the {spec.number} layout expects "
                         f"{layout['num_inputs']} (are the statistics on?)")
    return layout


def layout_family(layout) -> FamilySpec | None:
    """The spec of the family a layout belongs to, or None. The family is the layout's ``"family"``; a layout
    without one (an earlier version's) belongs to the one family whose index lists (the ``BUFFERS`` of its
    ``FamilySpec.entity`` hooks) it holds. Either way the layout must hold the family's index lists."""
    if not isinstance(layout, dict):
        return None
    named = layout.get("family")
    specs = [s for s in family_specs() if s.entity is not None and named in (None, s.name)]
    fit = [s for s in specs if set(s.entity_hooks().BUFFERS) <= set(layout)]
    return fit[0] if len(fit) == 1 else None


def _mlp(sizes, out_act: bool = True) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if out_act or i < len(sizes) - 2:
            layers.append(nn.Tanh())
    return nn.Sequential(*layers)


class _SetEncoder(nn.Module):
    """φ over entities and ρ over the pooled context (one for the actor, one for the critic)."""

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
        mx = th.where(present.any(dim=1, keepdim=True), mx, th.zeros_like(mx))  # no present entity: 0
        return phi, self.rho(th.cat([mean, mx, glob], dim=1))


class EntityNet(nn.Module):
    """The per-entity actor and critic (module docstring); plays the role of SB3's ``mlp_extractor``:
    ``forward_actor`` returns the action logits themselves (the policy's ``action_net`` is the identity).

    The layout's family (:func:`layout_family`) says what the entities are: its hooks register the layout's
    index lists as buffers (``BUFFERS``), build the features from the raw observation (``features``) and say
    the output layout (``SELECT``)."""

    def __init__(self, layout: dict, hidden: int = DEFAULT_HIDDEN, logits_per_channel: int = 1):
        super().__init__()
        spec = layout_family(layout)
        if spec is None:
            raise ValueError(f"no entity features for the family {layout.get('family')!r}")
        self.family = spec.name
        hooks = spec.entity_hooks()
        check = getattr(hooks, "check", None)
        if check is not None:
            check(layout)
        self._features = hooks.features
        self.select = bool(getattr(hooks, "SELECT", False))
        self.t_index = int(layout["t_index"])
        for key, name in hooks.BUFFERS.items():  # not in the state_dict: rebuilt from the layout
            self.register_buffer(name, th.as_tensor(np.asarray(layout[key], dtype=np.int64)), persistent=False)
        x, _, glob = self._features(self, th.zeros(1, int(layout["num_inputs"])))
        self.P, f, g = int(x.shape[1]), int(x.shape[-1]), int(glob.shape[-1])
        if self.select:  # one "select" logit per entity, in the distribution's layout (1 or 2 numbers)
            self.logits_per_channel = int(logits_per_channel)
            n_out = 1
        else:
            n_out = self.logits_per_channel = int(layout["logits_per_entity"])
        self.actor = _SetEncoder(f, g, hidden)
        # ψ([φ_e, ρ]) = w · tanh(A φ_e + C ρ + b) + b': the first layer split so C ρ is computed once per row,
        # not once per entity (the same function class as a Linear on the concatenation, fewer operations)
        self.psi_channel = nn.Linear(hidden, hidden)
        self.psi_context = nn.Linear(hidden, hidden, bias=False)
        self.psi_out = nn.Linear(hidden, n_out)
        self.critic = _SetEncoder(f, g, hidden)
        self.latent_dim_pi = self.P * self.logits_per_channel
        self.latent_dim_vf = hidden

    def gather(self, obs: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        """Flat observations (B, N) -> entity features (B, P, f), present (B, P) bool, global features (B, g)."""
        return self._features(self, obs)

    def forward_actor(self, obs: th.Tensor) -> th.Tensor:
        x, present, glob = self.gather(obs)
        phi, ctx = self.actor(x, present, glob)
        z = th.tanh(self.psi_channel(phi) + self.psi_context(ctx).unsqueeze(1))  # (B, P, h)
        if not self.select:  # n_out numbers per entity, entity after entity
            return self.psi_out(z).reshape(z.shape[0], self.P * self.logits_per_channel)
        logit = self.psi_out(z).squeeze(-1)  # (B, P)
        logit = th.where(present, logit, th.tensor(PAD_LOGIT, dtype=logit.dtype, device=logit.device))
        if self.logits_per_channel == 2:  # the masked categorical head: [logit(0), logit(1)] per entity
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
        if layout_family(entity) is None:
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
    """PPO / A2C: with ``SELECT`` (P1's ``MultiBinary``) SB3's ``BernoulliDistribution``, one logit per entity (the
    same with ``head="sb3"``); otherwise the layout's outputs per entity (P4's levels, P2's Gaussian means)."""


if MaskableActorCriticPolicy is not None:
    class EntityMaskableActorCriticPolicy(_EntityMixin, FastMaskableActorCriticPolicy):
        """MaskablePPO with the fast masked head: with ``SELECT`` flat logits (B, 2P), ``[0, ψ_e]`` per entity."""

        _logits_per_channel = 2

    class SB3EntityMaskableActorCriticPolicy(_EntityMixin, MaskableActorCriticPolicy):
        """MaskablePPO with sb3-contrib's masked distribution (same logit layout)."""

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
