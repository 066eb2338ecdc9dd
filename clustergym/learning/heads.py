"""Fast action heads: a MultiDiscrete / MultiBinary action distribution as one batched tensor op.

SB3's ``MultiCategoricalDistribution`` (and sb3-contrib's ``MaskableMultiCategoricalDistribution``)
build one ``torch.distributions.Categorical`` per action dimension and loop over them in Python for
every ``log_prob``, ``entropy`` and ``sample``: 1,600 objects per call on P3 placement, 100 on P4, 33
on P1 with MaskablePPO. :class:`PaddedCategorical` does the same maths on one padded tensor:

* the flat logits (batch, Σ nvec) are gathered into (batch, K, D), K = max nvec; the padding entries of
  a dimension with fewer than K choices get logit ``PAD_LOGIT`` (-1e9), so their probability is exactly
  0 in float32 and float64 and they never win a sample or the mode;
* masking (sb3-contrib's rule): a masked-out choice's (normalised) logit becomes ``MASK_LOGIT`` (-1e8,
  the value ``MaskableCategorical`` uses) and the row is normalised again, so a row with every choice
  masked is uniform over its real choices, as in sb3-contrib; padding stays below it;
* ``log_prob``: ``log_softmax`` over K (the middle axis: see :class:`PaddedCategorical`), ``gather`` the
  chosen entry, sum over D;
* ``entropy``: ``-Σ_D Σ_K p log p`` with masked-out and padding entries contributing 0 (sb3-contrib's
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

__all__ = ["PaddedCategorical", "FastMultiCategoricalDistribution", "FastMaskableMultiCategoricalDistribution",
           "FastActorCriticPolicy", "FastMultiInputActorCriticPolicy", "FastMaskableActorCriticPolicy",
           "FastMaskableMultiInputActorCriticPolicy", "PAD_LOGIT", "MASK_LOGIT", "fast_policy"]

PAD_LOGIT = -1e9  # padding choices (a dimension with fewer than max nvec choices): probability exactly 0
MASK_LOGIT = -1e8  # masked-out choices: sb3-contrib's MaskableCategorical value


class PaddedCategorical:
    """Independent categoricals over D dimensions with ``nvec[d]`` choices each, as one (batch, K, D) tensor.

    The choice axis K is the middle one: PyTorch's CPU ``log_softmax`` over a short last axis (K = 6 on P3)
    is about 30x slower than over a middle axis with the D dimensions contiguous (measured on (256, 1600, 6):
    65 ms vs 2.3 ms), so the layout is (B, K, D), and every reduction over choices is over axis 1.
    """

    def __init__(self, nvec):
        nvec = np.asarray(nvec, dtype=np.int64).reshape(-1)
        if nvec.size == 0 or (nvec < 1).any():
            raise ValueError(f"nvec={nvec.tolist()} is invalid: expected at least one dimension, each >= 1 choices")
        self.nvec = nvec  # (D,)
        self.dims, self.k, self.total = int(nvec.size), int(nvec.max()), int(nvec.sum())
        self.equal = bool((nvec == self.k).all())  # no padding column needed
        offsets = np.concatenate([[0], np.cumsum(nvec)[:-1]])  # (D,) start of each dimension in the flat logits
        valid = np.arange(self.k)[:, None] < nvec[None, :]  # (K, D) real choices
        index = np.where(valid, offsets[None, :] + np.arange(self.k)[:, None], self.total)  # (K, D); total = pad column
        self._index = th.as_tensor(index.reshape(-1))
        self._valid = th.as_tensor(valid)
        self._raw: th.Tensor | None = None  # (B, K, D) unmasked log-probabilities, padding ~PAD_LOGIT
        self._mask: th.Tensor | None = None  # (B, K, D) bool, padding False; None = unmasked
        self._logp: th.Tensor | None = None  # (B, K, D) log-probabilities

    # -- layout ------------------------------------------------------------------------------------
    def _pad(self, flat: th.Tensor, fill) -> th.Tensor:
        """(B, Σ nvec) -> (B, K, D), padding entries = ``fill`` (one ``index_select``)."""
        b = flat.shape[0]
        if not self.equal:
            flat = th.cat([flat, th.full((b, 1), fill, dtype=flat.dtype, device=flat.device)], dim=1)
        return flat.index_select(1, self._index.to(flat.device)).reshape(b, self.k, self.dims)

    def set_logits(self, flat_logits: th.Tensor) -> None:
        flat = flat_logits.reshape(-1, self.total)
        self._raw = th.log_softmax(self._pad(flat, PAD_LOGIT), dim=1)  # normalised, as Categorical stores them
        self._mask = None
        self._logp = self._raw

    def set_mask(self, masks) -> None:
        """``masks``: (B, Σ nvec) or anything that reshapes to it, True = allowed; None removes the mask."""
        if masks is None:
            self._mask = None
            self._logp = self._raw
            return
        m = th.as_tensor(masks, dtype=th.bool, device=self._raw.device).reshape(-1, self.total)
        self._mask = self._pad(m, False)
        fill = th.where(self._valid.to(self._raw.device), th.tensor(MASK_LOGIT, dtype=self._raw.dtype),
                        th.tensor(PAD_LOGIT, dtype=self._raw.dtype))  # (K, D)
        self._logp = th.log_softmax(th.where(self._mask, self._raw, fill), dim=1)

    # -- the distribution --------------------------------------------------------------------------
    def log_prob(self, actions: th.Tensor) -> th.Tensor:
        """(B, D) actions -> (B,) Σ_d log p_d(a_d)."""
        a = actions.reshape(-1, 1, self.dims).long()
        return self._logp.gather(1, a).squeeze(1).sum(dim=1)

    def entropy(self) -> th.Tensor:
        """(B,) Σ_d H(p_d); masked-out and padding choices contribute 0."""
        p_log_p = self._logp.exp() * self._logp
        if self._mask is not None:
            p_log_p = th.where(self._mask, p_log_p, th.zeros((), dtype=p_log_p.dtype))
        return -p_log_p.sum(dim=(1, 2))

    def sample(self) -> th.Tensor:
        """(B, D) one draw per dimension (Gumbel-max)."""
        u = th.rand_like(self._logp)
        return _argmax1(self._logp - th.log(-th.log(u)))

    def mode(self) -> th.Tensor:
        return _argmax1(self._logp)

    def probs(self) -> th.Tensor:
        """(B, K, D) probabilities (padding 0)."""
        return self._logp.exp()


def _argmax1(x: th.Tensor) -> th.Tensor:
    """``argmax`` over axis 1 (the first maximal index, as ``th.argmax``): ``th.max(x, dim=1).indices``, which
    PyTorch's CPU kernels compute about 25x faster than ``th.argmax(x, dim=1)`` on a (B, K, D) tensor (measured
    on (256, 6, 32): 2.0 ms vs 0.08 ms, torch 2.13, one thread)."""
    return th.max(x, dim=1).indices


class _PaddedMethods:
    """The distribution methods both fast distributions delegate to their :class:`PaddedCategorical`
    (``self.padded``); placed first in the bases so they replace the per-dimension ones."""

    def proba_distribution(self, action_logits: th.Tensor):
        self.padded.set_logits(action_logits)
        return self

    def log_prob(self, actions: th.Tensor) -> th.Tensor:
        return self.padded.log_prob(actions)

    def entropy(self) -> th.Tensor:
        return self.padded.entropy()

    def sample(self) -> th.Tensor:
        return self.padded.sample()

    def mode(self) -> th.Tensor:
        return self.padded.mode()


class FastMultiCategoricalDistribution(_PaddedMethods, MultiCategoricalDistribution):
    """SB3's ``MultiCategoricalDistribution`` (same network layer, same maths) as one padded tensor op."""

    def __init__(self, action_dims):
        super().__init__(list(int(n) for n in np.asarray(action_dims).reshape(-1)))
        self.padded = PaddedCategorical(self.action_dims)
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
    class FastMaskableMultiCategoricalDistribution(_PaddedMethods, MaskableMultiCategoricalDistribution):
        """sb3-contrib's ``MaskableMultiCategoricalDistribution`` (and ``MaskableBernoulliDistribution``, which
        is the same with ``[2] * n``) as one padded tensor op."""

        def __init__(self, action_dims):
            super().__init__(list(int(n) for n in np.asarray(action_dims).reshape(-1)))
            self.padded = PaddedCategorical(self.action_dims)

        def apply_masking(self, masks) -> None:
            self.padded.set_mask(masks)

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
