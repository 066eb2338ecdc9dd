"""Standard RL plumbing works unchanged: Gymnasium vector envs, Gymnasium and clustergym wrappers,
PettingZoo's API tests (issue 20)."""

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
from clustergym.wrappers import (FlattenAction, FlattenWithStats, HomogeneousAgents, MultiBinaryAsMultiDiscrete,
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


def test_gymnasium_rescale_action_on_p2_and_rescale_box_with_zero_width_entries():
    # the authors' code's units draw every demand from a continuous range: no zero-width entry (the default
    # setting="paper" counts devices, and a port that requests no GPU has a = 0 there, as in the preset below)
    env = RescaleAction(gym.make(P2, horizon=20, oracle=False, setting="authors-code"), -1.0, 1.0)
    env.reset(seed=0)
    env.action_space.seed(0)
    for _ in range(5):
        env.step(env.action_space.sample())
    # The alibaba preset has device types some servers lack (low == high == 0): RescaleAction would give NaN.
    raw = gym.make(P2, scenario="alibaba-v2023", horizon=20, oracle=False)
    lo, hi = raw.unwrapped.action_bounds()
    flat = lo == hi
    assert flat.any()
    with np.errstate(all="ignore"):
        assert np.isnan(RescaleAction(raw, -1.0, 1.0).action(np.zeros(raw.action_space.shape, np.float32))).any()
    env = RescaleBox(raw)
    assert np.array_equal(env.action(-np.ones(env.action_space.shape)), lo)
    assert np.array_equal(env.action(np.ones(env.action_space.shape)), hi)
    mid = env.action(np.zeros(env.action_space.shape))
    assert np.all(np.isfinite(mid)) and np.allclose(mid, (lo + hi) / 2) and np.all(mid[flat] == lo[flat])
    assert np.array_equal(env.action(np.full(env.action_space.shape, 5.0)), hi)  # clipped first
    env.reset(seed=0)
    env.action_space.seed(0)
    for _ in range(10):
        _, _, _, _, info = env.step(env.action_space.sample())
        assert info["metrics"]["repaired"] >= 0
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
