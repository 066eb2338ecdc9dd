"""API contract of every registered env (SPEC §3.2, §11): checkers, determinism, pickling, rendering."""

import copy
import pickle

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env

import clustergym
from tests.helpers import deep_equal, rollout

IDS = [i for i in gym.registry if i.startswith("clustergym/")]


def test_registry_lists_every_env():
    assert set(IDS) == set(clustergym.ENV_IDS)
    assert "clustergym/MultiServerChannel-v0" in IDS


@pytest.mark.parametrize("env_id", IDS)
def test_gymnasium_check_env(env_id):
    env = gym.make(env_id, horizon=50)
    gym_check_env(env.unwrapped, skip_render_check=True)


@pytest.mark.parametrize("env_id", IDS)
def test_sb3_check_env(env_id):
    from stable_baselines3.common.env_checker import check_env

    check_env(gym.make(env_id, horizon=50).unwrapped, warn=True)


@pytest.mark.parametrize("env_id", IDS)
def test_same_seed_same_trajectory_1000_steps(env_id):
    a = rollout(gym.make(env_id, horizon=1200), seed=7, steps=1000)
    b = rollout(gym.make(env_id, horizon=1200), seed=7, steps=1000)
    assert len(a) == len(b) == 1001
    assert all(deep_equal(x, y) for x, y in zip(a, b))
    c = rollout(gym.make(env_id, horizon=1200), seed=8, steps=200)
    assert not all(deep_equal(x, y) for x, y in zip(a[:201], c))


@pytest.mark.parametrize("env_id", IDS)
@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_copy_continues_identically(env_id, how):
    env = gym.make(env_id, horizon=300).unwrapped
    rollout(env, seed=3, steps=20)
    clone = pickle.loads(pickle.dumps(env)) if how == "pickle" else copy.deepcopy(env)
    env.action_space.seed(5)
    clone.action_space.seed(5)
    for _ in range(50):
        s1, s2 = env.step(env.action_space.sample()), clone.step(clone.action_space.sample())
        assert deep_equal(list(s1), list(s2))


@pytest.mark.parametrize("env_id", IDS)
def test_render_modes(env_id):
    env = gym.make(env_id, horizon=20, render_mode="ansi")
    env.reset(seed=0)
    env.step(env.action_space.sample())
    text = env.render()
    assert isinstance(text, str) and "slot" in text
    env = gym.make(env_id, horizon=20, render_mode="rgb_array")
    env.reset(seed=0)
    img = env.render()
    assert img.ndim == 3 and img.shape[2] == 3 and img.dtype == np.uint8 and img.std() > 0


@pytest.mark.parametrize("env_id", IDS)
def test_truncates_at_horizon(env_id):
    env = gym.make(env_id, horizon=5)
    env.reset(seed=0)
    flags = [env.step(env.action_space.sample())[3] for _ in range(5)]
    assert flags == [False] * 4 + [True]


@pytest.mark.parametrize("env_id", IDS)
def test_bad_kwargs_name_parameter(env_id):
    with pytest.raises(ValueError, match="horizon"):
        gym.make(env_id, horizon=0)
    with pytest.raises(ValueError, match="infeasible"):
        gym.make(env_id, infeasible="ignore")
    with pytest.raises(ValueError, match="render_mode"):
        gym.make(env_id, render_mode="bogus")


@pytest.mark.parametrize("env_id", IDS)
def test_unknown_kwarg_is_a_type_error_naming_every_valid_kwarg(env_id):
    """Gymnasium's convention (TorchRL's GymEnv retries without a kwarg on TypeError only); still a
    ValueError for code written against earlier releases."""
    from clustergym.core import ENV_KWARGS, UnknownParameterError

    with pytest.raises(TypeError, match="frameskip") as err:
        gym.make(env_id, frameskip=4)
    assert isinstance(err.value, ValueError) and isinstance(err.value, UnknownParameterError)
    msg = str(err.value)
    for name in (*ENV_KWARGS, "horizon"):
        assert name in msg
    # every scenario parameter the default scenario takes is listed, and each one is really accepted
    # (Gymnasium appends " was raised from the environment creator for ..." to a TypeError's message)
    params = msg.split("the scenario parameters ")[1].split(" was raised")[0].split(", ")
    assert len(params) >= 3
    env = gym.make(env_id)
    default = env.unwrapped.scenario.params
    for p in params:
        assert p in default, p
