"""P2's obs="compact": the observation without the instance's constants, the same dynamics and rewards."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import clustergym  # noqa: F401

P2 = "clustergym/MultiServerAllocation-v0"
CONSTANTS = {"edge_demand", "edge_alpha", "edge_utility", "beta", "edge_present"}


@pytest.mark.parametrize("pad", [{}, {"max_edges": 400}])
def test_compact_observation_has_no_instance_constant_and_same_rewards(pad):
    full = gym.make(P2, horizon=30, scenario_seed=3, **pad)
    comp = gym.make(P2, horizon=30, scenario_seed=3, obs="compact", **pad)
    keys = set(full.observation_space.spaces) - CONSTANTS
    assert set(comp.observation_space.spaces) == keys and not CONSTANTS & set(comp.observation_space.spaces)
    assert gym.spaces.flatten_space(comp.observation_space).shape[0] == sum(
        gym.spaces.flatdim(full.observation_space[k]) for k in keys)
    of, inf = full.reset(seed=5)
    oc, inc = comp.reset(seed=5)
    # given once: the constants in reset's info equal the full observation's entries
    assert set(inc["instance_constants"]) == CONSTANTS & set(of)
    assert all(np.array_equal(inc["instance_constants"][k], of[k]) for k in inc["instance_constants"])
    rng = np.random.default_rng(0)
    for _ in range(30):
        assert set(oc) == keys and all(np.array_equal(oc[k], of[k]) for k in keys)
        assert comp.observation_space.contains(oc)
        a = rng.uniform(0.0, 1.0, full.action_space.shape).astype(np.float32) * full.action_space.high
        of, rf, tf, trf, if_ = full.step(a)
        oc, rc, tc, trc, ic = comp.step(a)
        assert rf == rc and (tf, trf) == (tc, trc)
        assert if_["metrics"] == ic["metrics"]
    assert trf


def test_compact_is_a_checked_choice():
    with pytest.raises(ValueError, match="obs"):
        gym.make(P2, obs="tiny")
