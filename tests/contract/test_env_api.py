"""API contract of every registered env: checkers, determinism, pickling, rendering.

The checks live in ``clustergym.runner.testing`` (shipped, so a user's family runs the same ones); this file
runs them over every env id of every registered family, with the paper-default instances.
"""

import re

import gymnasium as gym
import pytest
from gymnasium.envs.registration import load_env_creator

import clustergym
from clustergym.runner import testing

IDS = list(clustergym.env_ids())
# (id, kwargs) of every action mode besides the default one (the env class's ``action_modes``)
MODES = [(i, {"action_mode": m}) for i in IDS
         for m in getattr(load_env_creator(gym.spec(i).entry_point), "action_modes", ())[1:]]
MODE_IDS = [f"{i.split('/')[-1]}-{kw['action_mode']}" for i, kw in MODES]


def test_registry_lists_every_env():
    assert set(IDS) == set(clustergym.ENV_IDS)
    assert set(IDS) == {i for i in gym.registry if i.startswith("clustergym/")}
    assert "clustergym/MultiServerChannel-v0" in IDS


@pytest.mark.parametrize("env_id", IDS)
def test_gymnasium_check_env(env_id):
    testing.check_gymnasium_api(env_id, horizon=50)


@pytest.mark.parametrize("env_id", IDS)
def test_sb3_check_env(env_id):
    assert testing.check_sb3_api(env_id, horizon=50)


@pytest.mark.parametrize("env_id", IDS)
def test_same_seed_same_trajectory_1000_steps(env_id):
    testing.check_determinism(env_id, steps=1000, seed=7, other_seed=8, horizon=1200)


@pytest.mark.parametrize("env_id", IDS)
@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_copy_continues_identically(env_id, how):
    testing.check_copy_continues(env_id, how=how, warmup=20, steps=50, horizon=300)


def test_every_compact_action_mode_is_listed():
    assert {(i, kw["action_mode"]) for i, kw in MODES} >= {
        ("clustergym/MultiServerAllocation-v0", "port"), ("clustergym/MultiServerAllocation-v0", "port_device"),
        ("clustergym/RingAllReduce-v0", "ring_size"), ("clustergym/ApproxJobs-v0", "job")}


@pytest.mark.parametrize("env_id,kw", MODES, ids=MODE_IDS)
def test_action_modes_pass_the_checkers(env_id, kw):
    testing.check_gymnasium_api(env_id, kw, horizon=50)
    assert testing.check_sb3_api(env_id, kw, horizon=50)


@pytest.mark.parametrize("env_id,kw", MODES, ids=MODE_IDS)
def test_action_modes_same_seed_same_trajectory(env_id, kw):
    testing.check_determinism(env_id, kw, steps=300, seed=7, other_seed=8, horizon=400)


@pytest.mark.parametrize("env_id,kw", MODES, ids=MODE_IDS)
def test_action_modes_copy_continues_identically(env_id, kw):
    testing.check_copy_continues(env_id, kw, how="pickle", warmup=20, steps=50, horizon=300)


@pytest.mark.parametrize("env_id", IDS)
def test_render_modes(env_id):
    testing.check_render(env_id)


@pytest.mark.parametrize("env_id", IDS)
def test_truncates_at_horizon(env_id):
    testing.check_truncation(env_id, horizon=5)


@pytest.mark.parametrize("env_id", IDS)
def test_bad_kwargs_name_parameter(env_id):
    testing.check_bad_kwargs(env_id)


@pytest.mark.parametrize("env_id", IDS)
def test_unknown_kwarg_error_is_one_line_in_our_words_listing_each_valid_key_once(env_id):
    """gym.make re-raises the constructor's TypeError with its own tail ("was raised from the environment
    creator for ... with kwargs ..."): the message is ours, led by the env id, and names each valid key once."""
    with pytest.raises(TypeError) as err:
        gym.make(env_id, bad_kwarg=1)
    msg = str(err.value)
    assert "\n" not in msg and "raised from the environment creator" not in msg and "with kwargs" not in msg
    assert msg.startswith(f"{env_id}: got an unexpected keyword argument 'bad_kwarg'")
    names = re.split(r", | and the scenario parameters ", msg.split("valid keyword arguments: ")[1])
    assert len(names) == len(set(names)) and "horizon" in names, names
    import pickle

    again = pickle.loads(pickle.dumps(err.value))  # a copy keeps the message (no tail stripped twice)
    assert str(again) == msg and type(again) is type(err.value)


@pytest.mark.parametrize("env_id", IDS)
def test_unknown_kwarg_is_a_type_error_naming_every_valid_kwarg(env_id):
    """Gymnasium's convention (TorchRL's GymEnv retries without a kwarg on TypeError only); still a
    ValueError for code written against earlier releases."""
    from clustergym.core.scenario import ENV_KWARGS, UnknownParameterError

    with pytest.raises(TypeError, match="frameskip") as err:
        gym.make(env_id, frameskip=4)
    assert isinstance(err.value, ValueError) and isinstance(err.value, UnknownParameterError)
    msg = str(err.value)
    for name in (*ENV_KWARGS, "horizon"):
        assert name in msg
    # every scenario parameter the default scenario takes is listed, and each one is really accepted
    params = msg.split("the scenario parameters ")[1].split(", ")
    assert len(params) >= 3
    env = gym.make(env_id)
    default = env.unwrapped.scenario.params
    for p in params:
        assert p in default, p
