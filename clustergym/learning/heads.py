"""Fast action heads: a MultiDiscrete / MultiBinary action distribution as one batched tensor op.

SB3's ``MultiCategoricalDistribution`` (and sb3-contrib's ``MaskableMultiCategoricalDistribution``)
build one ``torch.distributions.Categorical`` per action dimension and loop over them in Python for
every ``log_prob``, ``entropy`` and ``sample``: 1,600 objects per call on P3 placement, 100 on P4, 33
on P1 with MaskablePPO. :class:`GroupedCategorical` does the same maths with one tensor per choice count:

* the flat logits (batch, Σ nvec) are permuted once into one (batch, n, D_n) tensor per group of
  dimensions with n choices (P3: four groups; equal ``nvec``, as P4 and MultiBinary: one), so no entry
  stands for a choice that does not exist;
* masking (sb3-contrib's rule): a masked-out choice's (normalised) logit becomes ``MASK_LOGIT`` (-1e8,
  the value ``MaskableCategorical`` uses) and the row is normalised again, so a row with every choice
  masked is uniform over its choices, as in sb3-contrib;
* ``log_prob``: ``log_softmax`` over K (the middle axis: see :class:`GroupedCategorical`), ``gather`` the
  chosen entry, sum over D;
* ``entropy``: ``-Σ_D Σ_K p log p`` with masked-out entries contributing 0 (sb3-contrib's
  masked entropy; unmasked it equals ``Categorical.entropy``);
* ``sample``: one Gumbel-max draw, ``argmax(log p + G)``, G = -log(-log U) (the same law as
  ``Categorical.sample``; the random stream differs); ``mode``: ``argmax`` over K (both as
  ``th.max(..., dim=1).indices``: the first maximal index, as ``th.argmax``, many times faster on CPU).

Tests (``tests/learning/test_learning_heads.py``) check ``log_prob``, ``entropy``, ``mode`` and the sampling law
against SB3's and sb3-contrib's distributions on the same logits, masked and unmasked, on MultiBinary
and on MultiDiscrete with unequal ``nvec``.

:class:`FastActorCriticPolicy` (PPO, A2C) and :class:`FastMaskableActorCriticPolicy` (MaskablePPO) are
SB3's own policies with only the distribution swapped, so their networks and ``state_dict`` are the
same as ``"MlpPolicy"``'s (a model saved with either loads into either). An unmasked MultiBinary action
keeps SB3's ``BernoulliDistribution`` (already one tensor op); Box actions keep SB3's Gaussian.
"""

from __future__ import annotations

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.distributions import MultiCategoricalDistribution
from stable_baselines3.common.policies import ActorCriticPolicy, MultiInputActorCriticPolicy

try:  # sb3-contrib is the [contrib] extra: PPO and A2C work without it
    from sb3_contrib.common.maskable.distributions import MaskableMultiCategoricalDistribution
    from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy, MaskableMultiInputActorCriticPolicy
except ImportError:  # pragma: no cover - exercised only without the extra
    MaskableMultiCategoricalDistribution = MaskableActorCriticPolicy = MaskableMultiInputActorCriticPolicy = None

__all__ = ["GroupedCategorical", "FastMultiCategoricalDistribution", "FastMaskableMultiCategoricalDistribution",
           "FastActorCriticPolicy", "FastMultiInputActorCriticPolicy", "FastMaskableActorCriticPolicy",
           "FastMaskableMultiInputActorCriticPolicy", "PAD_LOGIT", "MASK_LOGIT", "fast_policy"]

PAD_LOGIT = -1e9  # a choice that must never be taken (entity networks' padding channels): probability exactly 0
MASK_LOGIT = -1e8  # masked-out choices: sb3-contrib's MaskableCategorical value


class GroupedCategorical:
    """Independent categoricals over D dimensions with ``nvec[d]`` choices each, as one tensor per choice count.

    The dimensions with the same number of choices n form a group, held as one (batch, n, D_n) tensor: P3's
    placement action (1,600 dimensions of 2, 3, 5 or 6 choices) is four tensors and no padding, so no
    operation touches a choice that does not exist (a single tensor padded to the largest count would hold
    9,600 entries for 6,656 choices, and ``exp`` of a padding logit takes the CPU kernels' slow path). Equal
    ``nvec`` (P4, MultiBinary) is one group: the (batch, K, D) layout, dimensions in their order.

    The choice axis is the middle one: PyTorch's CPU ``log_softmax`` over a short last axis (K = 6 on P3)
    is about 30x slower than over a middle axis with the D dimensions contiguous (measured on (256, 1600, 6):
    65 ms vs 2.3 ms), so every reduction over choices is over axis 1.
    """

    def __init__(self, nvec):
        nvec = np.asarray(nvec, dtype=np.int64).reshape(-1)
        if nvec.size == 0 or (nvec < 1).any():
            raise ValueError(f"nvec={nvec.tolist()} is invalid: expected at least one dimension, each >= 1 choices")
        self.nvec = nvec  # (D,)
        self.dims, self.k, self.total = int(nvec.size), int(nvec.max()), int(nvec.sum())
        offsets = np.concatenate([[0], np.cumsum(nvec)[:-1]])  # (D,) start of each dimension in the flat logits
        columns, self.groups = [], []  # groups: (n, dimension indices), counts ascending
        for n in np.unique(nvec):
            dims = np.flatnonzero(nvec == n)
            columns.append((offsets[dims][None, :] + np.arange(n)[:, None]).reshape(-1))  # choice-major (n, D_n)
            self.groups.append((int(n), th.as_tensor(dims)))
        order = np.concatenate(columns)  # a permutation of the flat logits
        self.single = len(self.groups) == 1  # its dimensions are 0..D-1 in order
        self._order = th.as_tensor(order)
        self._inverse = th.as_tensor(np.argsort(order, kind="stable"))
        self._sizes = [n * len(d) for n, d in self.groups]
        self._flat: th.Tensor | None = None  # (B, Σ nvec) the logits
        self._raw: list[th.Tensor] | None = None  # per group (B, n, D_n) unmasked log-probabilities
        self._mask: list[th.Tensor] | None = None  # per group (B, n, D_n) bool; None = unmasked
        self._logp: list[th.Tensor] | None = None  # per group (B, n, D_n) log-probabilities
        self._entropy: th.Tensor | None = None  # (B,) when computed together with a log-probability

    # -- layout ------------------------------------------------------------------------------------
    def _split(self, flat: th.Tensor) -> list[th.Tensor]:
        """(B, Σ nvec) -> one (B, n, D_n) tensor per group (one column permutation, then views)."""
        b = flat.shape[0]
        order = self._order.to(flat.device)
        if flat.requires_grad:
            flat = _PermuteColumns.apply(flat, order, self._inverse.to(flat.device))
        else:
            flat = flat.index_select(1, order)
        parts = flat.split(self._sizes, dim=1) if not self.single else (flat,)
        return [x.reshape(b, n, len(d)) for x, (n, d) in zip(parts, self.groups)]

    def _scatter(self, per_group: list[th.Tensor]) -> th.Tensor:
        """One (B, D_n) tensor per group -> (B, D) in the dimensions' order."""
        if self.single:
            return per_group[0]
        out = per_group[0].new_empty(per_group[0].shape[0], self.dims)
        for x, (_, d) in zip(per_group, self.groups):
            out[:, d.to(out.device)] = x
        return out

    def set_logits(self, flat_logits: th.Tensor) -> None:
        self._flat = flat_logits.reshape(-1, self.total)
        self._raw = self._logp = self._mask = self._entropy = None

    def _log_probs(self) -> list[th.Tensor]:
        """Per group (B, n, D_n) log-probabilities (masked ones if a mask is set), computed on first use."""
        if self._logp is None:
            if self._raw is None:  # normalised, as Categorical stores them
                self._raw = [th.log_softmax(x, dim=1) for x in self._split(self._flat)]
            self._logp = self._raw
        return self._logp

    def set_mask(self, masks) -> None:
        """``masks``: (B, Σ nvec) or anything that reshapes to it, True = allowed; None removes the mask."""
        self._logp = self._entropy = None
        raw = self._log_probs()
        if masks is None:
            self._mask = None
            return
        device = raw[0].device
        m = th.as_tensor(masks, dtype=th.bool, device=device).reshape(-1, self.total)
        self._mask = self._split(m)
        fill = th.tensor(MASK_LOGIT, dtype=raw[0].dtype, device=device)
        self._logp = [th.log_softmax(th.where(mk, r, fill), dim=1) for mk, r in zip(self._mask, raw)]

    # -- the distribution --------------------------------------------------------------------------
    def log_prob(self, actions: th.Tensor) -> th.Tensor:
        """(B, D) actions -> (B,) Σ_d log p_d(a_d)."""
        a = actions.reshape(-1, self.dims).long()
        if self._mask is None and self._flat.requires_grad and th.is_grad_enabled():
            # training: log-probability and entropy in one pass, gradient written out (see _LogProbEntropy)
            lp, self._entropy = _LogProbEntropy.apply(self._flat, a, self)
            return lp
        total = None
        for logp, (_, d) in zip(self._log_probs(), self.groups):
            chosen = a if self.single else a.index_select(1, d.to(a.device))
            term = logp.gather(1, chosen[:, None, :]).squeeze(1).sum(dim=1)
            total = term if total is None else total + term
        return total

    def entropy(self) -> th.Tensor:
        """(B,) Σ_d H(p_d); masked-out choices contribute 0."""
        if self._entropy is not None:  # computed with the log-probabilities
            return self._entropy
        total = None
        for g, logp in enumerate(self._log_probs()):
            if self._mask is not None:  # exp of only the allowed choices: masked-out ones contribute exactly 0
                logp = th.where(self._mask[g], logp, th.zeros((), dtype=logp.dtype))
            term = -(logp.exp() * logp).sum(dim=(1, 2))
            total = term if total is None else total + term
        return total

    def sample(self) -> th.Tensor:
        """(B, D) one draw per dimension (Gumbel-max), groups drawn in ascending order of their choice count."""
        return self._scatter([_argmax1(logp - th.log(-th.log(th.rand_like(logp)))) for logp in self._log_probs()])

    def mode(self) -> th.Tensor:
        return self._scatter([_argmax1(logp) for logp in self._log_probs()])

    def probs(self) -> th.Tensor:
        """(B, K, D) probabilities, K = max nvec, 0 beyond a dimension's choices."""
        logps = self._log_probs()
        out = logps[0].new_zeros(logps[0].shape[0], self.k, self.dims)
        for logp, (n, d) in zip(logps, self.groups):
            out[:, :n, d.to(out.device)] = logp.exp()
        return out


class _LogProbEntropy(th.autograd.Function):
    """Unmasked ``(log_prob(a), entropy)`` of a :class:`GroupedCategorical` from its flat logits, in one pass,
    with the gradient written out instead of recorded op by op (PPO's update needs both; recording the dozen
    tensor ops and replaying them made the distribution most of an update on P3). Per dimension, with
    p = softmax(x), log p = x - logsumexp(x) and S = Σ_k p_k log p_k = -H:

    * d log p_a / d x_j = 1[j = a] - p_j;
    * d H / d x_j = -p_j (log p_j - S).

    Tests compare the values and the gradient with autograd through SB3's distribution."""

    @staticmethod
    def forward(ctx, flat: th.Tensor, actions: th.Tensor, cat: "GroupedCategorical"):
        lp = ent = None
        saved = []
        for logits, (_, d) in zip(cat._split(flat.detach()), cat.groups):
            logp = th.log_softmax(logits, dim=1)
            p = logp.exp()
            chosen = actions if cat.single else actions.index_select(1, d.to(actions.device))
            chosen = chosen[:, None, :]
            lp_g = logp.gather(1, chosen).squeeze(1).sum(dim=1)
            ent_g = -(p * logp).sum(dim=(1, 2))
            lp = lp_g if lp is None else lp + lp_g
            ent = ent_g if ent is None else ent + ent_g
            saved.append((p, logp, chosen))
        ctx.saved, ctx.cat = saved, cat
        return lp, ent

    @staticmethod
    def backward(ctx, g_lp: th.Tensor, g_ent: th.Tensor):
        gl, ge = g_lp[:, None, None], g_ent[:, None, None]
        parts = []
        for p, logp, chosen in ctx.saved:
            s = (p * logp).sum(dim=1, keepdim=True)  # (B, 1, D_n)
            gx = -p * (gl + ge * (logp - s))
            gx.scatter_add_(1, chosen, gl.expand(-1, 1, chosen.shape[2]))
            parts.append(gx.reshape(gx.shape[0], -1))
        grouped = th.cat(parts, dim=1) if len(parts) > 1 else parts[0]
        return grouped.index_select(1, ctx.cat._inverse.to(grouped.device)), None, None


class _PermuteColumns(th.autograd.Function):
    """``flat.index_select(1, order)`` for a permutation ``order`` whose inverse is ``inverse``: the gradient is
    ``grad.index_select(1, inverse)`` (a gather) instead of autograd's ``scatter_add``, which took about 9% of a
    PPO update on P3 (torch 2.13, one thread). Same values: each column receives exactly one term either way."""

    @staticmethod
    def forward(ctx, flat: th.Tensor, order: th.Tensor, inverse: th.Tensor) -> th.Tensor:
        ctx.save_for_backward(inverse)
        return flat.index_select(1, order)

    @staticmethod
    def backward(ctx, grad: th.Tensor):
        (inverse,) = ctx.saved_tensors
        return grad.index_select(1, inverse), None, None


def _argmax1(x: th.Tensor) -> th.Tensor:
    """``argmax`` over axis 1 (the first maximal index, as ``th.argmax``): ``th.max(x, dim=1).indices``, which
    PyTorch's CPU kernels compute about 25x faster than ``th.argmax(x, dim=1)`` on a (B, K, D) tensor (measured
    on (256, 6, 32): 2.0 ms vs 0.08 ms, torch 2.13, one thread)."""
    return th.max(x, dim=1).indices


class _GroupedMethods:
    """The distribution methods both fast distributions delegate to their :class:`GroupedCategorical`
    (``self.grouped``); placed first in the bases so they replace the per-dimension ones."""

    def proba_distribution(self, action_logits: th.Tensor):
        self.grouped.set_logits(action_logits)
        return self

    def log_prob(self, actions: th.Tensor) -> th.Tensor:
        return self.grouped.log_prob(actions)

    def entropy(self) -> th.Tensor:
        return self.grouped.entropy()

    def sample(self) -> th.Tensor:
        return self.grouped.sample()

    def mode(self) -> th.Tensor:
        return self.grouped.mode()


class FastMultiCategoricalDistribution(_GroupedMethods, MultiCategoricalDistribution):
    """SB3's ``MultiCategoricalDistribution`` (same network layer, same maths) as a few batched tensor ops."""

    def __init__(self, action_dims):
        super().__init__(list(int(n) for n in np.asarray(action_dims).reshape(-1)))
        self.grouped = GroupedCategorical(self.action_dims)
        self.distribution = []  # SB3's per-dimension list: not used


def _nvec(space: spaces.Space, masked: bool):
    """The per-dimension choice counts the fast head handles for ``space``, or None (keep SB3's distribution)."""
    if isinstance(space, spaces.MultiDiscrete):
        return np.asarray(space.nvec).reshape(-1)
    if masked and isinstance(space, spaces.MultiBinary):
        return np.full(int(np.prod(space.shape)), 2)
    return None


class FastActorCriticPolicy(ActorCriticPolicy):
    """SB3's ``MlpPolicy`` (PPO, A2C) with :class:`FastMultiCategoricalDistribution` for MultiDiscrete actions."""

    def _build(self, lr_schedule) -> None:
        nvec = _nvec(self.action_space, masked=False)
        if nvec is not None:
            self.action_dist = FastMultiCategoricalDistribution(nvec)
        super()._build(lr_schedule)


class FastMultiInputActorCriticPolicy(MultiInputActorCriticPolicy):
    """SB3's ``MultiInputPolicy`` (PPO, A2C; Dict observations as the env gives them) with
    :class:`FastMultiCategoricalDistribution` for MultiDiscrete actions: ``PPO(FastMultiInputActorCriticPolicy,
    gym.make(id))``."""

    def _build(self, lr_schedule) -> None:
        nvec = _nvec(self.action_space, masked=False)
        if nvec is not None:
            self.action_dist = FastMultiCategoricalDistribution(nvec)
        super()._build(lr_schedule)


if MaskableActorCriticPolicy is not None:
    class FastMaskableMultiCategoricalDistribution(_GroupedMethods, MaskableMultiCategoricalDistribution):
        """sb3-contrib's ``MaskableMultiCategoricalDistribution`` (and ``MaskableBernoulliDistribution``, which
        is the same with ``[2] * n``) as a few batched tensor ops."""

        def __init__(self, action_dims):
            super().__init__(list(int(n) for n in np.asarray(action_dims).reshape(-1)))
            self.grouped = GroupedCategorical(self.action_dims)

        def apply_masking(self, masks) -> None:
            self.grouped.set_mask(masks)

    class FastMaskableActorCriticPolicy(MaskableActorCriticPolicy):
        """sb3-contrib's ``MlpPolicy`` (MaskablePPO) with :class:`FastMaskableMultiCategoricalDistribution` for
        MultiDiscrete and MultiBinary actions."""

        def _build(self, lr_schedule) -> None:
            nvec = _nvec(self.action_space, masked=True)
            if nvec is not None:
                self.action_dist = FastMaskableMultiCategoricalDistribution(nvec)
            super()._build(lr_schedule)

    class FastMaskableMultiInputActorCriticPolicy(MaskableMultiInputActorCriticPolicy):
        """sb3-contrib's ``MultiInputPolicy`` (MaskablePPO on Dict observations) with
        :class:`FastMaskableMultiCategoricalDistribution` for MultiDiscrete and MultiBinary actions."""

        def _build(self, lr_schedule) -> None:
            nvec = _nvec(self.action_space, masked=True)
            if nvec is not None:
                self.action_dist = FastMaskableMultiCategoricalDistribution(nvec)
            super()._build(lr_schedule)


def fast_policy(algo: str, inputs: str = "flat"):
    """The fast-head policy class for ``algo`` (``"ppo"``, ``"a2c"``, ``"maskable_ppo"``), or None (SAC);
    ``inputs="dict"``: the one for Dict observations (SB3's ``MultiInputPolicy`` with the fast head)."""
    multi = inputs == "dict"
    if algo == "maskable_ppo":
        return globals().get("FastMaskableMultiInputActorCriticPolicy" if multi else "FastMaskableActorCriticPolicy")
    cls = FastMultiInputActorCriticPolicy if multi else FastActorCriticPolicy
    return {"ppo": cls, "a2c": cls}.get(algo)
