"""Standard RL plumbing works unchanged: Gymnasium vector envs, Gymnasium and clustergym wrappers,
PettingZoo's API tests."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers import RescaleAction
from pettingzoo.test import api_test, parallel_api_test
from pettingzoo.utils.conversions import parallel_to_aec

import clustergym  # noqa: F401
from clustergym.envs import ENV_IDS
from clustergym.envs.multiagent import parallel_env, parallel_env_ids
from clustergym.learning.wrappers import (FlattenAction, FlattenWithStats, HomogeneousAgents, MultiBinaryAsMultiDiscrete,
                                 RescaleBox)

P1, P2, P4 = "clustergym/MultiServerChannel-v0", "clustergym/MultiServerAllocation-v0", "clustergym/ApproxJobs-v0"


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_gymnasium_vector_envs_step_every_env_200_slots(env_id, mode):
    """Gymnasium stacks each info key over sub-envs: it needs fixed shapes (horizon 150: one autoreset)."""
    envs = gym.make_vec(env_id, num_envs=2, vectorization_mode=mode, horizon=150)
    try:
        envs.action_space.seed(0)
        envs.reset(seed=0)
        seen_feedback = 0
        for _ in range(200):
            _, r, term, trunc, info = envs.step(envs.action_space.sample())
            assert r.shape == (2,)
            if "feedback" in info:
                seen_feedback += int(info["_feedback"].sum())
        assert seen_feedback >= 2 * 190
    finally:
        envs.close()


def test_single_env_feedback_has_fixed_shapes():
    for env_id, size in ((P1, None), (P4, None)):
        env = gym.make(env_id, horizon=60)
        env.reset(seed=1)
        shapes = set()
        for _ in range(60):
            _, _, _, _, info = env.step(env.action_space.sample())
            shapes.add(tuple((k, np.shape(v)) for k, v in sorted(info["feedback"].items())))
        assert len(shapes) == 1, (env_id, shapes)


class _FlatBoxEnv(gym.Env):
    """A Box action with one zero-width entry (low == high), for RescaleBox's own rule."""

    action_space = gym.spaces.Box(np.array([0.0, 1.0, -2.0], np.float32), np.array([0.0, 3.0, 2.0], np.float32))
    observation_space = gym.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        return np.zeros(1, np.float32), 0.0, False, False, {}


def test_gymnasium_rescale_action_on_p2_and_rescale_box_with_zero_width_entries():
    # P2's channel action has no zero-width entry (a_l^k = 0 entries are bounded by 1 and ignored), in
    # every setting and preset: gymnasium's RescaleAction works and agrees with RescaleBox
    for kw in ({}, {"setting": "authors-code"}, {"scenario": "alibaba-v2023"}):
        raw = gym.make(P2, horizon=20, oracle=False, **kw)
        lo, hi = raw.unwrapped.action_bounds()
        assert np.all(hi > lo)
        theirs, mine = RescaleAction(gym.make(P2, horizon=20, oracle=False, **kw), -1.0, 1.0), RescaleBox(raw)
        z = np.zeros(raw.action_space.shape, np.float32)
        assert np.all(np.isfinite(theirs.action(z))) and np.allclose(theirs.action(z), mine.action(z), rtol=1e-6)
        theirs.reset(seed=0)
        theirs.action_space.seed(0)
        for _ in range(5):
            assert np.isfinite(theirs.step(theirs.action_space.sample())[1])
    # RescaleBox's own rule for a Box that has zero-width entries: they map to low whatever is sent
    env = RescaleBox(_FlatBoxEnv())
    lo, hi = env.unwrapped.action_space.low.astype(np.float64), env.unwrapped.action_space.high.astype(np.float64)
    flat = lo == hi
    assert np.array_equal(env.action(-np.ones(3)), lo)
    assert np.array_equal(env.action(np.ones(3)), hi)
    mid = env.action(np.zeros(3))
    assert np.all(np.isfinite(mid)) and np.allclose(mid, (lo + hi) / 2) and np.all(mid[flat] == lo[flat])
    assert np.array_equal(env.action(np.full(3, 5.0)), hi)  # clipped first
    with pytest.raises(ValueError, match="Box"):
        RescaleBox(gym.make(P1, horizon=5))


def test_flatten_action_and_multibinary_as_multidiscrete():
    env = FlattenAction(RescaleBox(FlattenWithStats(gym.make(P2, horizon=10, oracle=False))))
    raw_shape = env.unwrapped.action_space.shape
    assert env.action_space.shape == (int(np.prod(raw_shape)),)
    a = np.linspace(-1, 1, env.action_space.shape[0])
    assert np.array_equal(env.action(a), a.reshape(raw_shape))
    obs, _ = env.reset(seed=0)
    assert obs.shape == env.observation_space.shape and obs.dtype == np.float32
    env.step(env.action_space.sample())
    env = MultiBinaryAsMultiDiscrete(gym.make(P1, horizon=10))
    E = env.unwrapped.problem.num_edges
    assert np.array_equal(env.action_space.nvec, np.full(E, 2))
    env.reset(seed=0)
    assert env.action_masks().shape == (2 * E,)
    _, _, _, _, info = env.step(np.ones(E, dtype=np.int64))
    assert info["feedback"]["executed"].shape == (E,)


@pytest.mark.parametrize("env_id", parallel_env_ids())
def test_pettingzoo_api_tests_pass_on_aec_conversion_and_homogeneous_agents(env_id):
    api_test(parallel_to_aec(parallel_env(env_id, horizon=30)), num_cycles=30)
    env = HomogeneousAgents(parallel_env(env_id, horizon=30))
    parallel_api_test(env, num_cycles=30)
    assert len({str(env.observation_space(a)) for a in env.possible_agents}) == 1
    assert len({str(env.action_space(a)) for a in env.possible_agents}) == 1
    obs, infos = env.reset(seed=0)
    for a, o in obs.items():
        inner = env.env.observation_space(a)
        n = gym.spaces.flatdim(inner)
        assert infos[a]["obs_size"] == n and np.all(o[n:] == 0)
    _, _, _, _, infos = env.step({a: env.action_space(a).sample() for a in env.agents})
    for i in infos.values():
        if "action_mask" in i:
            assert i["action_mask"].dtype == np.int8


def test_homogeneous_agents_keeps_rewards_and_feedback():
    """Padding changes spaces only: the same joint actions give the same rewards as the plain env."""
    plain = parallel_env(P1, horizon=30)
    wrapped = HomogeneousAgents(parallel_env(P1, horizon=30))
    plain.reset(seed=3)
    wrapped.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(30):
        acts = {a: rng.integers(0, 2, plain.action_space(a).n).astype(np.int8) for a in plain.agents}
        padded = {a: np.concatenate([v, rng.integers(0, 2, wrapped.action_space(a).shape[0] - v.size)])
                  for a, v in acts.items()}  # padding entries are ignored whatever they hold
        _, r1, *_ , i1 = plain.step(acts)
        _, r2, *_ , i2 = wrapped.step(padded)
        assert r1 == r2
        for a in i1:
            assert np.array_equal(i1[a]["feedback"]["executed"], i2[a]["feedback"]["executed"])
        if not plain.agents:
            break
