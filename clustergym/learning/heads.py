"""Fast action heads: a MultiDiscrete / MultiBinary action distribution as one batched tensor op.

SB3's ``MultiCategoricalDistribution`` (and sb3-contrib's ``MaskableMultiCategoricalDistribution``)
build one ``torch.distributions.Categorical`` per action dimension and loop over them in Python for
every ``log_prob``, ``entropy`` and ``sample``: 1,600 objects per call on P3 placement, 100 on P4, 33
on P1 with MaskablePPO. :class:`~clustergym.learning.grouped.GroupedCategorical` does the same maths with one
tensor per choice count (its module lists each operation); the distributions here delegate to it.

Tests (``tests/learning/test_learning_heads.py``) check ``log_prob``, ``entropy``, ``mode`` and the sampling law
against SB3's and sb3-contrib's distributions on the same logits, masked and unmasked, on MultiBinary
and on MultiDiscrete with unequal ``nvec``.

:class:`FastActorCriticPolicy` (PPO, A2C) and :class:`FastMaskableActorCriticPolicy` (MaskablePPO) are
SB3's own policies with the distribution swapped, so their networks and ``state_dict`` are the same as
``"MlpPolicy"``'s (a model saved with either loads into either). Two defaults change no maths (see
:class:`_FastPolicy`): the action layer's rows are held in the grouped order (saved in SB3's), and SB3's
default Adam runs PyTorch's fused kernel. An unmasked MultiBinary action keeps SB3's
``BernoulliDistribution`` (already one tensor op); Box actions keep SB3's Gaussian.
"""

from __future__ import annotations

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.distributions import MultiCategoricalDistribution
from stable_baselines3.common.policies import ActorCriticPolicy, MultiInputActorCriticPolicy

from clustergym.learning.grouped import GroupedCategorical

try:  # sb3-contrib is the [contrib] extra: PPO and A2C work without it
    from sb3_contrib.common.maskable.distributions import MaskableMultiCategoricalDistribution
    from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy, MaskableMultiInputActorCriticPolicy
except ImportError:  # pragma: no cover - exercised only without the extra
    MaskableMultiCategoricalDistribution = MaskableActorCriticPolicy = MaskableMultiInputActorCriticPolicy = None

__all__ = ["FastMultiCategoricalDistribution", "FastMaskableMultiCategoricalDistribution", "FastActorCriticPolicy",
           "FastMultiInputActorCriticPolicy", "FastMaskableActorCriticPolicy", "FastMaskableMultiInputActorCriticPolicy",
           "fast_policy"]


class _GroupedMethods:
    """The distribution methods both fast distributions delegate to their
    :class:`~clustergym.learning.grouped.GroupedCategorical` (``self.grouped``); placed first in the bases so they
    replace the per-dimension ones."""

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


class _FastPolicy:
    """What the fast-head policies add to SB3's: the fast distribution, and two defaults that change no maths.

    * **The action layer's rows in the grouped order.** With SB3's order the logits are permuted into the
      groups on every call, and the gradient back: on P3 (6,656 logits) two column gathers of a (64, 6,656)
      batch took about a tenth of a PPO update. Built, the policy permutes ``action_net``'s rows once, so its
      output is already grouped. ``state_dict()`` gives the rows (and the optimizer's moments of them) in
      SB3's order and ``load_state_dict`` takes them so: saved models are exchangeable with ``MlpPolicy`` /
      ``MultiInputPolicy`` ones, in both directions. Read ``policy.action_net`` itself in the grouped order
      (:meth:`GroupedCategorical.to_sb3` maps it back).
    * **Adam's fused kernel** (``fused=True``, PyTorch's one-kernel Adam; the same update rule) when the
      optimizer is SB3's default Adam and no ``optimizer_kwargs`` are given: SB3's for-loop Adam took about
      a fifth of an update on P3. Pass ``optimizer_kwargs`` to choose otherwise.
    """

    def __init__(self, *args, **kwargs):
        if kwargs.get("optimizer_kwargs") is None and kwargs.get("optimizer_class", th.optim.Adam) is th.optim.Adam:
            kwargs["optimizer_kwargs"] = {"eps": 1e-5, "fused": True}  # SB3's default eps for Adam
        super().__init__(*args, **kwargs)

    def _fast_build(self, lr_schedule, masked: bool) -> None:
        nvec = _nvec(self.action_space, masked=masked)
        if nvec is not None:
            dist_class = FastMaskableMultiCategoricalDistribution if masked else FastMultiCategoricalDistribution
            self.action_dist = dist_class(nvec)
        super()._build(lr_schedule)
        self.group_rows()

    def group_rows(self) -> None:
        """Hold ``action_net``'s rows in the grouped order (a no-op when the logits do not come from a linear
        ``action_net``, or need no permutation)."""
        grouped = getattr(self.action_dist, "grouped", None)
        if (grouped is None or grouped.grouped_logits or not isinstance(self.action_net, th.nn.Linear)
                or bool((grouped._order == th.arange(grouped.total)).all())):
            return
        with th.no_grad():
            for param in (self.action_net.weight, self.action_net.bias):
                param.copy_(grouped.to_grouped(param))
        grouped.grouped_logits = True
        self.register_state_dict_post_hook(_FastPolicy._rows_to_sb3)
        self.register_load_state_dict_pre_hook(_FastPolicy._rows_from_sb3)
        self.optimizer.register_state_dict_post_hook(self._moments_to_sb3)
        self.optimizer.register_load_state_dict_pre_hook(self._moments_from_sb3)

    def ungroup_rows(self) -> None:
        """The logits come in SB3's order again (a subclass that replaces ``action_net`` calls this)."""
        grouped = getattr(self.action_dist, "grouped", None)
        if grouped is not None:
            grouped.grouped_logits = False

    # -- the saved form: SB3's order -------------------------------------------------------------------------
    def _grouped_rows(self) -> bool:
        return bool(getattr(getattr(self.action_dist, "grouped", None), "grouped_logits", False))

    @staticmethod
    def _rows_to_sb3(module, state_dict, prefix, local_metadata) -> None:
        if module._grouped_rows():
            for name in ("weight", "bias"):
                key = f"{prefix}action_net.{name}"
                state_dict[key] = module.action_dist.grouped.to_sb3(state_dict[key])

    @staticmethod
    def _rows_from_sb3(module, state_dict, prefix, *args) -> None:
        if module._grouped_rows():  # state_dict is load_state_dict's own copy: the caller's dict is left as is
            for name in ("weight", "bias"):
                key = f"{prefix}action_net.{name}"
                if key in state_dict and state_dict[key].shape[:1] == (module.action_dist.grouped.total,):
                    state_dict[key] = module.action_dist.grouped.to_grouped(state_dict[key])

    def _row_params(self) -> dict[int, th.Tensor]:
        """{index in the optimizer's state_dict: parameter} for action_net's weight and bias."""
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        rows = (self.action_net.weight, self.action_net.bias)
        return {i: p for i, p in enumerate(params) if any(p is r for r in rows)}

    def _map_moments(self, state_dict: dict, to) -> dict:
        """The optimizer's state_dict with every per-parameter tensor of action_net's rows (Adam's moments,
        RMSprop's averages: those shaped as the parameter) passed through ``to``; new dicts, nothing mutated."""
        if not self._grouped_rows():
            return state_dict
        state = dict(state_dict["state"])
        for i, p in self._row_params().items():
            if i in state:
                state[i] = {k: (to(v) if isinstance(v, th.Tensor) and v.shape == p.shape else v)
                            for k, v in state[i].items()}
        return {**state_dict, "state": state}

    def _moments_to_sb3(self, optimizer, state_dict: dict) -> dict:
        return self._map_moments(state_dict, self.action_dist.grouped.to_sb3)

    def _moments_from_sb3(self, optimizer, state_dict: dict) -> dict:
        return self._map_moments(state_dict, self.action_dist.grouped.to_grouped)


class FastActorCriticPolicy(_FastPolicy, ActorCriticPolicy):
    """SB3's ``MlpPolicy`` (PPO, A2C) with :class:`FastMultiCategoricalDistribution` for MultiDiscrete actions."""

    def _build(self, lr_schedule) -> None:
        self._fast_build(lr_schedule, masked=False)


class FastMultiInputActorCriticPolicy(_FastPolicy, MultiInputActorCriticPolicy):
    """SB3's ``MultiInputPolicy`` (PPO, A2C; Dict observations as the env gives them) with
    :class:`FastMultiCategoricalDistribution` for MultiDiscrete actions: ``PPO(FastMultiInputActorCriticPolicy,
    gym.make(id))``."""

    def _build(self, lr_schedule) -> None:
        self._fast_build(lr_schedule, masked=False)


if MaskableActorCriticPolicy is not None:
    class FastMaskableMultiCategoricalDistribution(_GroupedMethods, MaskableMultiCategoricalDistribution):
        """sb3-contrib's ``MaskableMultiCategoricalDistribution`` (and ``MaskableBernoulliDistribution``, which
        is the same with ``[2] * n``) as a few batched tensor ops."""

        def __init__(self, action_dims):
            super().__init__(list(int(n) for n in np.asarray(action_dims).reshape(-1)))
            self.grouped = GroupedCategorical(self.action_dims)

        def apply_masking(self, masks) -> None:
            self.grouped.set_mask(masks)

    class FastMaskableActorCriticPolicy(_FastPolicy, MaskableActorCriticPolicy):
        """sb3-contrib's ``MlpPolicy`` (MaskablePPO) with :class:`FastMaskableMultiCategoricalDistribution` for
        MultiDiscrete and MultiBinary actions."""

        def _build(self, lr_schedule) -> None:
            self._fast_build(lr_schedule, masked=True)

    class FastMaskableMultiInputActorCriticPolicy(_FastPolicy, MaskableMultiInputActorCriticPolicy):
        """sb3-contrib's ``MultiInputPolicy`` (MaskablePPO on Dict observations) with
        :class:`FastMaskableMultiCategoricalDistribution` for MultiDiscrete and MultiBinary actions."""

        def _build(self, lr_schedule) -> None:
            self._fast_build(lr_schedule, masked=True)
else:  # pragma: no cover - exercised only without the extra
    FastMaskableMultiCategoricalDistribution = None


def fast_policy(algo: str, inputs: str = "flat"):
    """The fast-head policy class for ``algo`` (``"ppo"``, ``"a2c"``, ``"maskable_ppo"``), or None (SAC);
    ``inputs="dict"``: the one for Dict observations (SB3's ``MultiInputPolicy`` with the fast head)."""
    multi = inputs == "dict"
    if algo == "maskable_ppo":
        return globals().get("FastMaskableMultiInputActorCriticPolicy" if multi else "FastMaskableActorCriticPolicy")
    cls = FastMultiInputActorCriticPolicy if multi else FastActorCriticPolicy
    return {"ppo": cls, "a2c": cls}.get(algo)
