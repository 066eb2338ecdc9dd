"""Fast action heads: one tensor per choice count with the maths of SB3's
``MultiCategoricalDistribution`` and sb3-contrib's ``MaskableMultiCategoricalDistribution``."""

import numpy as np
import pytest

th = pytest.importorskip("torch")
pytest.importorskip("stable_baselines3")
contrib = pytest.importorskip("sb3_contrib")

from gymnasium import spaces  # noqa: E402
from sb3_contrib.common.maskable.distributions import (MaskableBernoulliDistribution,  # noqa: E402
                                                       MaskableMultiCategoricalDistribution)
from stable_baselines3.common.distributions import MultiCategoricalDistribution  # noqa: E402

from clustergym.learning.heads import (FastActorCriticPolicy, FastMaskableActorCriticPolicy,  # noqa: E402
                                       FastMaskableMultiCategoricalDistribution, FastMultiCategoricalDistribution)

# unequal nvec (padding, a 1-choice dimension), MultiBinary as [2] * n, and equal nvec (no padding)
NVECS = {"unequal": [2, 6, 6, 3, 1, 5, 4], "multibinary": [2] * 9, "equal": [21] * 5}
B = 11  # batch != number of dimensions: a sum over the wrong axis changes the shape


def _case(nvec, dtype=th.float64, seed=0):
    g = th.Generator().manual_seed(seed)
    logits = th.randn(B, sum(nvec), generator=g, dtype=dtype) * 3
    actions = th.stack([th.randint(0, n, (B,), generator=g) for n in nvec], dim=1)
    masks = th.rand(B, sum(nvec), generator=g) > 0.35
    masks[0, :] = False  # a row with every choice masked
    masks[1, :] = True  # a row with none masked
    return logits, actions, masks


def _theirs(nvec, masked):
    if not masked:
        return MultiCategoricalDistribution(nvec)
    return MaskableBernoulliDistribution(len(nvec)) if set(nvec) == {2} else MaskableMultiCategoricalDistribution(nvec)


def _allowed(actions, masks, nvec):
    """(N,) True where every chosen action of a row is allowed."""
    off = np.concatenate([[0], np.cumsum(nvec)[:-1]])
    return masks[th.arange(len(actions))[:, None], th.as_tensor(off)[None, :] + actions].all(dim=1)


@pytest.mark.parametrize("kind", NVECS)
@pytest.mark.parametrize("masked", [False, True], ids=["unmasked", "masked"])
def test_log_prob_entropy_mode_equal_sb3(kind, masked):
    nvec = NVECS[kind]
    logits, actions, masks = _case(nvec)
    ref = _theirs(nvec, masked).proba_distribution(logits)
    fast = (FastMaskableMultiCategoricalDistribution if masked else FastMultiCategoricalDistribution)(nvec)
    fast.proba_distribution(logits)
    if masked:
        ref.apply_masking(masks)
        fast.apply_masking(masks)
    lp_ref, lp = ref.log_prob(actions), fast.log_prob(actions)
    assert lp.shape == (B,)
    ok = _allowed(actions, masks, nvec) if masked else th.ones(B, dtype=th.bool)
    assert ok.any()
    np.testing.assert_allclose(lp[ok].numpy(), lp_ref[ok].numpy(), rtol=0, atol=1e-6)
    # a masked-out action: log-probability about -1e8 per masked choice, as sb3-contrib gives
    np.testing.assert_allclose(lp[~ok].numpy(), lp_ref[~ok].numpy(), rtol=1e-12, atol=1e-6)
    np.testing.assert_allclose(fast.entropy().numpy(), ref.entropy().numpy(), rtol=0, atol=1e-6)
    assert th.equal(fast.mode(), ref.mode())
    # log_prob of the mode and the other Distribution API paths agree too
    np.testing.assert_allclose(fast.log_prob(fast.mode()).numpy(), ref.log_prob(ref.mode()).numpy(), atol=1e-6)
    assert th.equal(fast.get_actions(deterministic=True), ref.get_actions(deterministic=True))


@pytest.mark.parametrize("kind", NVECS)
def test_float32_logits_agree(kind):
    nvec = NVECS[kind]
    logits, actions, masks = _case(nvec, dtype=th.float32, seed=3)
    ref = MaskableMultiCategoricalDistribution(nvec).proba_distribution(logits)
    fast = FastMaskableMultiCategoricalDistribution(nvec).proba_distribution(logits)
    np.testing.assert_allclose(fast.log_prob(actions).numpy(), ref.log_prob(actions).numpy(), rtol=1e-6, atol=1e-4)
    np.testing.assert_allclose(fast.entropy().numpy(), ref.entropy().numpy(), rtol=1e-6, atol=1e-4)


@pytest.mark.parametrize("rows", [B, 40], ids=["padded", "grouped"])
def test_sample_and_mode_take_the_first_maximal_index_as_argmax(rows):
    """``sample`` and ``mode`` reduce over the choice axis with ``th.max(..., dim=1).indices`` (fast on CPU): the
    same index as ``th.argmax(..., dim=1)``, ties included (a row of equal logits, masked-out and padding
    choices); ``sample`` is the argmax of the log-probabilities plus the Gumbel noise of one uniform draw, laid
    out as (B, K, D) for a few unmasked rows (``PADDED_BATCH``) and group after group otherwise."""
    from clustergym.learning.grouped import PADDED_BATCH

    nvec = NVECS["unequal"]
    logits, _, masks = _case(nvec)
    logits, masks = logits.repeat(4, 1)[:rows], masks.repeat(4, 1)[:rows]
    logits[2] = 0.0  # every choice of every dimension tied
    logits[3, :4] = 1.0
    K, D = max(nvec), len(nvec)
    for masked in (False, True):
        fast = (FastMaskableMultiCategoricalDistribution if masked else FastMultiCategoricalDistribution)(nvec)
        with th.no_grad():
            fast.proba_distribution(logits)
        if masked:
            fast.apply_masking(masks)
        logp = fast.grouped.probs().log()  # (B, K, D); beyond a dimension's choices -inf
        assert th.equal(fast.mode(), th.argmax(logp, dim=1))
        th.manual_seed(7)
        got = fast.sample()
        th.manual_seed(7)  # the same noise
        padded = rows <= PADDED_BATCH and not masked
        u = th.rand(rows, K * D if padded else sum(nvec), dtype=logits.dtype)
        if padded:
            want = th.argmax(logp - th.log(-th.log(u.reshape(rows, K, D))), dim=1)
        else:  # groups in ascending choice count, each choice-major
            want, lo = th.empty_like(got), 0
            for n, dims in fast.grouped.groups:
                noise = -th.log(-th.log(u[:, lo:lo + n * len(dims)].reshape(rows, n, len(dims))))
                want[:, dims] = th.argmax(logp[:, :n, dims] + noise, dim=1)
                lo += n * len(dims)
        assert th.equal(got, want)


@pytest.mark.parametrize("kind", ["unequal", "multibinary"])
@pytest.mark.parametrize("masked", [False, True], ids=["unmasked", "masked"])
def test_samples_follow_the_sb3_probabilities(kind, masked):
    """Empirical frequencies of 40,000 draws vs the reference probabilities (5 standard errors), and a
    masked-out or padding choice is never drawn."""
    nvec = NVECS[kind]
    logits, _, masks = _case(nvec, seed=5)
    logits, masks = logits[1:3] / 3, masks[2:3].repeat(2, 1)  # two rows, both with the same partial mask
    n = 20_000
    ref = _theirs(nvec, masked).proba_distribution(logits)
    fast = (FastMaskableMultiCategoricalDistribution if masked else FastMultiCategoricalDistribution)(nvec)
    fast.proba_distribution(logits.repeat(n, 1))
    if masked:
        ref.apply_masking(masks)
        fast.apply_masking(masks.repeat(n, 1))
    th.manual_seed(0)
    draws = fast.sample().reshape(n, 2, len(nvec))  # (n, rows, D)
    dists = ref.distributions if masked else ref.distribution
    for d, dist in enumerate(dists):
        p = dist.probs.numpy()  # (2, nvec[d])
        freq = np.stack([(draws[:, :, d] == k).float().mean(0).numpy() for k in range(nvec[d])], axis=1)
        se = np.sqrt(np.maximum(p * (1 - p), 1e-12) / n)
        assert (np.abs(freq - p) <= 5 * se + 1e-9).all(), (d, freq, p)
        assert int(draws[:, :, d].max()) < nvec[d], "a padding choice was drawn"
    if masked:  # a dimension with some allowed choice never draws a masked-out one (all masked: uniform)
        off = np.concatenate([[0], np.cumsum(nvec)[:-1]])
        for d, n_d in enumerate(nvec):
            m = masks[0, off[d]:off[d] + n_d]
            if m.any():
                assert m[draws[:, 0, d]].all(), f"a masked-out choice was drawn in dimension {d}"


@pytest.mark.parametrize("masked", [False, True], ids=["ppo", "maskable_ppo"])
def test_policies_equal_sb3_policies_with_the_same_weights(masked):
    """The fast policies are SB3's policies with only the distribution swapped: same state_dict keys and
    shapes, and with the same weights the same values, log-probabilities, entropies and modes."""
    from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
    from stable_baselines3.common.policies import ActorCriticPolicy

    obs_space = spaces.Box(-1, 1, (13,), np.float32)
    act_space = spaces.MultiDiscrete(NVECS["unequal"])
    sb3_cls, fast_cls = ((MaskableActorCriticPolicy, FastMaskableActorCriticPolicy) if masked
                         else (ActorCriticPolicy, FastActorCriticPolicy))
    ref = sb3_cls(obs_space, act_space, lambda _: 3e-4)
    fast = fast_cls(obs_space, act_space, lambda _: 3e-4)
    assert type(fast.action_dist).__name__.startswith("Fast")
    fast.load_state_dict(ref.state_dict())
    logits, actions, masks = _case(NVECS["unequal"], seed=7)
    obs = th.as_tensor(np.random.default_rng(0).uniform(-1, 1, (B, 13)), dtype=th.float32)
    kw = {"action_masks": masks.numpy()} if masked else {}
    masks_ok = _allowed(actions, masks, NVECS["unequal"]) if masked else th.ones(B, dtype=th.bool)
    v0, lp0, e0 = ref.evaluate_actions(obs, actions, **kw)
    v1, lp1, e1 = fast.evaluate_actions(obs, actions, **kw)
    np.testing.assert_allclose(v1.detach().numpy(), v0.detach().numpy(), atol=1e-6)
    np.testing.assert_allclose(lp1[masks_ok].detach().numpy(), lp0[masks_ok].detach().numpy(), atol=1e-4)
    np.testing.assert_allclose(e1.detach().numpy(), e0.detach().numpy(), atol=1e-4)
    a0, _ = ref.predict(obs.numpy(), deterministic=True, **kw)
    a1, _ = fast.predict(obs.numpy(), deterministic=True, **kw)
    assert np.array_equal(a0, a1)


def test_multibinary_maskable_policy_uses_the_fast_head_and_ppo_keeps_bernoulli():
    from stable_baselines3.common.distributions import BernoulliDistribution

    obs_space = spaces.Box(-1, 1, (5,), np.float32)
    pol = FastMaskableActorCriticPolicy(obs_space, spaces.MultiBinary(8), lambda _: 3e-4)
    assert isinstance(pol.action_dist, FastMaskableMultiCategoricalDistribution)
    assert pol.action_net.out_features == 16  # two logits per binary choice, as MaskableBernoulliDistribution
    pol = FastActorCriticPolicy(obs_space, spaces.MultiBinary(8), lambda _: 3e-4)
    assert isinstance(pol.action_dist, BernoulliDistribution)  # already one tensor op in SB3


@pytest.mark.parametrize("kind", NVECS)
@pytest.mark.parametrize("use", ["both", "log_prob", "entropy"])
def test_training_gradient_equals_autograd_through_sb3(kind, use):
    """Training computes (log_prob, entropy) in one pass with the gradient written out: values and gradient
    with respect to the logits equal autograd through SB3's per-dimension distribution (float64), whichever
    of the two the loss uses."""
    nvec = NVECS[kind]
    logits, actions, _ = _case(nvec, seed=11)
    w = th.randn(B, dtype=th.float64), th.randn(B, dtype=th.float64)

    def loss_and_grad(dist_cls):
        x = logits.clone().requires_grad_()
        dist = dist_cls(nvec).proba_distribution(x)
        lp, ent = dist.log_prob(actions), dist.entropy()
        loss = {"both": (w[0] * lp).sum() + (w[1] * ent).sum(), "log_prob": (w[0] * lp).sum(),
                "entropy": (w[1] * ent).sum()}[use]
        return lp.detach(), ent.detach(), th.autograd.grad(loss, x)[0]

    fast, ref = loss_and_grad(FastMultiCategoricalDistribution), loss_and_grad(MultiCategoricalDistribution)
    for got, want in zip(fast, ref):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("kind", ["unequal", "equal"])
def test_padded_and_grouped_layouts_give_the_same_distribution(kind):
    """A few rows without gradient use one padded (B, K, D) tensor, larger batches one tensor per group: the
    same log-probabilities, entropies, modes and probabilities for the same logits, in SB3's and in the
    grouped column order."""
    from clustergym.learning.grouped import PADDED_BATCH

    nvec = NVECS[kind]
    logits, actions, _ = _case(nvec, seed=13)
    many, many_actions = logits.repeat(5, 1), actions.repeat(5, 1)  # > PADDED_BATCH rows
    assert len(logits) <= PADDED_BATCH < len(many)
    for grouped_order in (False, True):
        small, large = FastMultiCategoricalDistribution(nvec), FastMultiCategoricalDistribution(nvec)
        x_small, x_large = logits, many
        if grouped_order:
            small.grouped.grouped_logits = large.grouped.grouped_logits = True
            x_small, x_large = small.grouped.to_grouped(logits, dim=1), large.grouped.to_grouped(many, dim=1)
        with th.no_grad():
            small.proba_distribution(x_small)
            large.proba_distribution(x_large)
        assert small.grouped._padded == (kind == "unequal") and not large.grouped._padded
        n = len(logits)
        np.testing.assert_allclose(small.log_prob(actions).numpy(), large.log_prob(many_actions)[:n].numpy(),
                                   rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(small.entropy().numpy(), large.entropy()[:n].numpy(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(small.grouped.probs().numpy(), large.grouped.probs()[:n].numpy(), atol=1e-15)
        assert th.equal(small.mode(), large.mode()[:n])
        assert th.equal(small.log_prob(small.mode()), small.log_prob(small.mode().clone()))  # the kept indices


def test_grouped_rows_are_saved_and_loaded_in_sb3_order(tmp_path):
    """The fast policy holds action_net's rows in the grouped order, but its state_dict (and its optimizer's
    moments of those rows) are SB3's: the same initial weights as SB3's policy for the same seed, and a
    trained model saved by either loads into the other with the same log-probabilities, modes and Adam
    moments."""
    import gymnasium as gym
    from stable_baselines3 import PPO
    from stable_baselines3.common.policies import ActorCriticPolicy

    obs_space = spaces.Box(-1, 1, (13,), np.float32)
    act_space = spaces.MultiDiscrete(NVECS["unequal"])
    th.manual_seed(0)
    ref = ActorCriticPolicy(obs_space, act_space, lambda _: 3e-4)
    th.manual_seed(0)
    fast = FastActorCriticPolicy(obs_space, act_space, lambda _: 3e-4)
    assert fast.action_dist.grouped.grouped_logits  # rows held grouped ...
    assert not th.equal(fast.action_net.weight, ref.action_net.weight)
    ours, theirs = fast.state_dict(), ref.state_dict()  # ... and saved in SB3's order
    assert ours.keys() == theirs.keys() and all(th.equal(ours[k], theirs[k]) for k in ours)

    class Env(gym.Env):
        observation_space, action_space = obs_space, act_space

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return self.observation_space.sample(), {}

        def step(self, action):
            return self.observation_space.sample(), float(action[1] == 2), False, False, {}

    obs = th.as_tensor(np.random.default_rng(0).uniform(-1, 1, (B, 13)), dtype=th.float32)
    actions = _case(NVECS["unequal"], seed=2)[1]

    def scores(policy):
        with th.no_grad():
            return policy.evaluate_actions(obs, actions)[1], policy._predict(obs, deterministic=True)

    for trained, other in ((FastActorCriticPolicy, ActorCriticPolicy), (ActorCriticPolicy, FastActorCriticPolicy)):
        env = Env()
        env.observation_space.seed(0)
        model = PPO(trained, env, n_steps=32, batch_size=16, n_epochs=2, seed=0, device="cpu")
        model.learn(64)
        model.save(tmp_path / "m.zip")
        back = PPO.load(tmp_path / "m.zip", custom_objects={"policy_class": other}, device="cpu")
        assert type(back.policy) is other
        (lp0, a0), (lp1, a1) = scores(model.policy), scores(back.policy)
        np.testing.assert_allclose(lp1.numpy(), lp0.numpy(), rtol=1e-5, atol=1e-5)
        assert th.equal(a0, a1)
        saved = [p for p in (model.policy, back.policy) if isinstance(p, FastActorCriticPolicy)][0]
        plain = back.policy if saved is model.policy else model.policy
        w_fast, w_plain = saved.action_net.weight, plain.action_net.weight
        assert th.equal(saved.action_dist.grouped.to_sb3(w_fast), w_plain)
        for key in ("exp_avg", "exp_avg_sq"):
            m_fast = saved.optimizer.state[w_fast][key]
            assert th.equal(saved.action_dist.grouped.to_sb3(m_fast), plain.optimizer.state[w_plain][key])
