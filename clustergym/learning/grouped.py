"""Independent categoricals as one tensor per choice count (:class:`GroupedCategorical`): the maths of the fast
action heads of :mod:`clustergym.learning.heads`, for a MultiDiscrete / MultiBinary action.

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

A few rows without gradient (at most ``PADDED_BATCH``: a rollout step, ``predict`` on one observation)
use one padded (B, K, D) tensor instead of one per group: a handful of tensor ops instead of a handful per
group, padding entries at ``PAD_LOGIT`` (probability exactly 0). Training batches keep the groups.
"""

from __future__ import annotations

import numpy as np
import torch as th

__all__ = ["GroupedCategorical", "PAD_LOGIT", "PADDED_BATCH", "MASK_LOGIT"]

PAD_LOGIT = -1e9  # a choice that must never be taken (entity networks' padding channels): probability exactly 0
PADDED_BATCH = 16  # at most this many rows (a rollout step), no gradient, no mask: one padded (B, K, D) tensor
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
        self._offsets = np.concatenate([[0], np.cumsum(self._sizes)]).tolist()  # each group's columns, grouped order
        # choice a of dimension d sits at column base[d] + a * stride[d] of the grouped order
        base, stride = np.empty(self.dims, dtype=np.int64), np.empty(self.dims, dtype=np.int64)
        for (n, dims), lo in zip(self.groups, self._offsets):
            base[dims.numpy()] = lo + np.arange(len(dims))
            stride[dims.numpy()] = len(dims)
        self._base, self._stride = th.as_tensor(base), th.as_tensor(stride)
        self.grouped_logits = False  # True: the flat logits arrive in the grouped order (see group_rows)
        # the padded layout (B, K, D), dimensions in order: SB3 column offsets[d] + a -> position a * D + d
        pad = np.concatenate([np.arange(n) * self.dims + d for d, n in enumerate(nvec)])
        self._pad_sb3, self._pad_grouped = th.as_tensor(pad), th.as_tensor(pad[order])
        self._padded_layout = ([(self.k, th.arange(self.dims))], [0, self.k * self.dims], True)
        self._padded = False  # the current logits use the padded layout
        self._drawn: tuple | None = None  # (actions, per-group indices) of the last sample() / mode()
        self._flat: th.Tensor | None = None  # (B, Σ nvec) the logits
        self._raw: list[th.Tensor] | None = None  # per group (B, n, D_n) unmasked log-probabilities
        self._mask: list[th.Tensor] | None = None  # per group (B, n, D_n) bool; None = unmasked
        self._logp: list[th.Tensor] | None = None  # per group (B, n, D_n) log-probabilities
        self._entropy: th.Tensor | None = None  # (B,) when computed together with a log-probability

    # -- layout ------------------------------------------------------------------------------------
    def _grouped_flat(self, flat: th.Tensor, grouped: bool | None = None) -> th.Tensor:
        """(B, Σ nvec) in the grouped order: ``flat`` itself if it is (``grouped``, by default
        :attr:`grouped_logits`), else one column permutation of it (SB3's order)."""
        if self.grouped_logits if grouped is None else grouped:
            return flat
        order = self._order.to(flat.device)
        if flat.requires_grad:
            return _PermuteColumns.apply(flat, order, self._inverse.to(flat.device))
        return flat.index_select(1, order)

    def _split(self, flat: th.Tensor, grouped: bool | None = None) -> list[th.Tensor]:
        """(B, Σ nvec) -> one (B, n, D_n) tensor per group: views if ``flat`` is in the grouped order (``grouped``,
        by default :attr:`grouped_logits`), else one column permutation first (SB3's order)."""
        b = flat.shape[0]
        flat = self._grouped_flat(flat, grouped)
        parts = flat.split(self._sizes, dim=1) if not self.single else (flat,)
        return [x.reshape(b, n, len(d)) for x, (n, d) in zip(parts, self.groups)]

    def to_grouped(self, x: th.Tensor, dim: int = 0) -> th.Tensor:
        """``x`` with its ``dim`` axis (Σ nvec entries, SB3's order: dimension by dimension) in the grouped order."""
        return x.index_select(dim, self._order.to(x.device))

    def to_sb3(self, x: th.Tensor, dim: int = 0) -> th.Tensor:
        """The inverse of :meth:`to_grouped`."""
        return x.index_select(dim, self._inverse.to(x.device))

    def _layout(self) -> tuple[list, list[int], bool]:
        """(groups, their column offsets, single) of the log-probabilities in use: the groups, or the padded
        layout as one group of K choices over every dimension."""
        return self._padded_layout if self._padded else (self.groups, self._offsets, self.single)

    def _scatter(self, per_group: list[th.Tensor]) -> th.Tensor:
        """One (B, D_n) tensor per group -> (B, D) in the dimensions' order."""
        groups, _, single = self._layout()
        if single:
            return per_group[0]
        out = per_group[0].new_empty(per_group[0].shape[0], self.dims)
        for x, (_, d) in zip(per_group, groups):
            out[:, d.to(out.device)] = x
        return out

    def set_logits(self, flat_logits: th.Tensor) -> None:
        self._flat = flat_logits.reshape(-1, self.total)
        self._raw = self._logp = self._mask = self._entropy = self._drawn = None
        self._padded = (not self.single and self._flat.shape[0] <= PADDED_BATCH
                        and not (self._flat.requires_grad and th.is_grad_enabled()))

    def _log_probs(self) -> list[th.Tensor]:
        """Per group (B, n, D_n) log-probabilities (masked ones if a mask is set), computed on first use."""
        if self._logp is None:
            if self._raw is None and self._padded:  # a few rows: one tensor, padding at PAD_LOGIT (probability 0)
                b, pos = self._flat.shape[0], (self._pad_grouped if self.grouped_logits else self._pad_sb3)
                x = self._flat.new_full((b, self.k * self.dims), PAD_LOGIT).index_copy_(1, pos.to(self._flat.device),
                                                                                        self._flat)
                self._raw = [th.log_softmax(x.view(b, self.k, self.dims), dim=1)]
            elif self._raw is None:  # normalised, as Categorical stores them
                self._raw = [th.log_softmax(x, dim=1) for x in self._split(self._flat)]
            self._logp = self._raw
        return self._logp

    def set_mask(self, masks) -> None:
        """``masks``: (B, Σ nvec) or anything that reshapes to it, True = allowed; None removes the mask."""
        self._logp = self._entropy = self._drawn = None
        if masks is not None and self._padded:  # masks are applied per group
            self._padded, self._raw = False, None
        raw = self._log_probs()
        if masks is None:
            self._mask = None
            return
        device = raw[0].device
        m = th.as_tensor(masks, dtype=th.bool, device=device).reshape(-1, self.total)
        self._mask = self._split(m, grouped=False)  # masks come in SB3's order
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
        drawn = self._drawn[1] if self._drawn is not None and actions is self._drawn[0] else None
        groups, _, single = self._layout()
        total = None
        for g, (logp, (_, d)) in enumerate(zip(self._log_probs(), groups)):
            if drawn is not None:  # the actions of the last sample() / mode(): their per-group indices are at hand
                chosen = drawn[g]
            else:
                chosen = a if single else a.index_select(1, d.to(a.device))
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

    def columns(self, actions: th.Tensor) -> th.Tensor:
        """(B, D) actions -> (B, D) the columns of the chosen choices in the grouped order."""
        return self._base.to(actions.device) + actions * self._stride.to(actions.device)

    def sample(self) -> th.Tensor:
        """(B, D) one draw per dimension (Gumbel-max): ``argmax_k log p + G``, G = -log(-log U), with one uniform
        draw U for all the dimensions: shape (B, Σ nvec) in the grouped order, or (B, K * D) in the padded
        layout (a padding entry's log-probability is about -1e9: never the maximum)."""
        logps = self._log_probs()
        _, offsets, _ = self._layout()
        b = logps[0].shape[0]
        noise = th.rand(b, offsets[-1], dtype=logps[0].dtype, device=logps[0].device).log_().neg_().log_().neg_()
        views = [noise[:, lo:hi].view(logp.shape) for logp, lo, hi in zip(logps, offsets[:-1], offsets[1:])]
        return self._remember([_argmax1(logp + g) for logp, g in zip(logps, views)])

    def mode(self) -> th.Tensor:
        return self._remember([_argmax1(logp) for logp in self._log_probs()])

    def _remember(self, per_group: list[th.Tensor]) -> th.Tensor:
        """The (B, D) actions of per-group indices, kept with them: SB3 asks ``log_prob`` of the very tensor it
        just drew, and the indices spare splitting it into the groups again."""
        actions = self._scatter(per_group)
        self._drawn = (actions, per_group)
        return actions

    def probs(self) -> th.Tensor:
        """(B, K, D) probabilities, K = max nvec, 0 beyond a dimension's choices."""
        logps = self._log_probs()
        out = logps[0].new_zeros(logps[0].shape[0], self.k, self.dims)
        for logp, (n, d) in zip(logps, self._layout()[0]):
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
        grouped = cat._grouped_flat(flat.detach())  # (B, Σ nvec) in the grouped order
        columns = cat.columns(actions)  # (B, D) the chosen entries
        lp = grouped.gather(1, columns).sum(dim=1)  # Σ_d x_a - Σ_d logsumexp_d, the second added per group
        ent = None
        saved = []
        for logits in cat._split(grouped, grouped=True):
            logp = th.log_softmax(logits, dim=1)
            p = logp.exp()
            s = (p * logp).sum(dim=1, keepdim=True)  # (B, 1, D_n) Σ_k p log p = -H per dimension
            lp = lp - (logits[:, 0, :] - logp[:, 0, :]).sum(dim=1)  # logsumexp_d = x_0 - log p_0
            ent = -s.sum(dim=(1, 2)) if ent is None else ent - s.sum(dim=(1, 2))
            saved.append((p, logp, s))
        ctx.saved, ctx.cat, ctx.grouped, ctx.columns = saved, cat, cat.grouped_logits, columns
        return lp, ent

    @staticmethod
    def backward(ctx, g_lp: th.Tensor, g_ent: th.Tensor):
        cat = ctx.cat
        gl, ge = g_lp[:, None, None], g_ent[:, None, None]
        out = g_lp.new_empty(g_lp.shape[0], cat.total)  # the gradient, in the grouped order
        entropy_term = bool(g_ent.any())  # PPO's default ent_coef = 0 sends zeros: the term drops out
        for (p, logp, s), lo, hi in zip(ctx.saved, cat._offsets[:-1], cat._offsets[1:]):
            gx = out[:, lo:hi].view(p.shape)  # this group's columns
            if entropy_term:
                th.sub(logp, s, out=gx)  # -p (gl + ge (log p - s)), in place
                gx.mul_(ge).add_(gl).mul_(p).neg_()
            else:
                th.mul(p, -gl, out=gx)
        out.scatter_add_(1, ctx.columns, g_lp[:, None].expand(-1, ctx.columns.shape[1]))  # + gl at the chosen
        if ctx.grouped:
            return out, None, None
        return out.index_select(1, cat._inverse.to(out.device)), None, None


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
