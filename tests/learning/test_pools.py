"""Training pools with randomised generator parameters: the settings, the env that switches between them, the
padding that fits them all, and training on them."""

import json
import os

import gymnasium as gym
import numpy as np
import pytest

import clustergym  # noqa: F401  (registers the envs)
from clustergym.learning.pools import param_ranges, param_settings, pool_padding
from clustergym.learning.train_envs import ParamPool

P1, P2, P3, P4 = ("clustergym/MultiServerChannel-v0", "clustergym/MultiServerAllocation-v0",
                  "clustergym/RingAllReduce-v0", "clustergym/ApproxJobs-v0")


@pytest.mark.parametrize("env_id", [P1, P2, P3, P4])
def test_settings_are_drawn_in_the_ranges_the_same_for_every_call_and_hold_the_default(env_id):
    ranges = param_ranges(env_id)
    s = param_settings(env_id, 16)
    assert s == param_settings(env_id, 16) and param_settings(env_id, 4) == s[:4]  # one stream: N settings nest
    assert len({tuple(sorted(p.items())) for p in s}) == 16
    for name, (lo, hi) in ranges.items():
        v = np.array([p[name] for p in s])
        assert np.all((v >= lo) & (v <= hi)) and v.max() - v.min() > 0.3 * (hi - lo)
        default = gym.make(env_id).unwrapped.scenario.params[name]
        assert lo <= default <= hi  # the default generator lies in the ranges
    fixed = param_settings(env_id, 3, {next(iter(ranges)): ranges[next(iter(ranges))][0]})
    assert all(next(iter(ranges)) not in p for p in fixed)  # a parameter the caller sets is not drawn


def test_bad_draws_and_unknown_families_are_refused():
    with pytest.raises(ValueError, match="param_draws=0"):
        param_settings(P4, 0)
    with pytest.raises(ValueError, match="nothing to draw"):
        param_settings(P3, 2, {"arrival_rate": 1.0, "bw_scale": 1.0})


def _pool(env_id, draws=3, **kw):
    settings = param_settings(env_id, draws)
    return ParamPool([gym.make(env_id, oracle=False, **kw, **p) for p in settings]), settings


def test_each_episode_runs_in_a_drawn_setting_and_the_same_seed_replays_the_same_episodes():
    def episodes(seed):
        env, settings = _pool(P4, instances=tuple(range(1000, 1010)), scenario_seed=1000)
        out = []
        for e in range(12):
            obs, _ = env.reset(seed=seed if e == 0 else None)
            u = env.unwrapped
            p = settings[env.setting]
            assert all(np.isclose(u.scenario.params[n], v) for n, v in p.items())  # the episode's generator
            total = 0.0
            for _ in range(20):
                obs, r, term, trunc, _ = env.step(env.action_space.sample() * 0)
                total += float(r)
            out.append((env.setting, u.scenario_seed, round(total, 9)))
        env.close()
        return out

    a, b, c = episodes(3), episodes(3), episodes(4)
    assert a == b and a != c
    assert len({s for s, _, _ in a}) == 3  # every setting is visited in 12 episodes
    assert len({(s, k) for s, k, _ in a}) > 3  # and instances are drawn within a setting


def test_padding_fits_every_setting_and_spaces_that_differ_are_refused():
    settings = param_settings(P2, 6)
    pads = pool_padding(P2, {}, settings, range(1000, 1020))
    from clustergym.learning.instances import padding_for

    assert pads["max_edges"] >= padding_for(P2, {}, range(1000, 1020))["max_edges"]
    assert pads["max_edges"] == max(padding_for(P2, p, range(1000, 1020))["max_edges"] for p in [{}, *settings])
    ParamPool([gym.make(P2, oracle=False, instances=tuple(range(1000, 1020)), scenario_seed=1000, **pads, **p)
               for p in settings]).close()
    with pytest.raises(ValueError, match="too small"):
        pool_padding(P2, {"max_edges": 10}, settings, range(1000, 1020))
    with pytest.raises(ValueError, match="different spaces"):
        ParamPool([gym.make(P2, scenario_seed=1000, max_edges=pads["max_edges"]),
                   gym.make(P2, scenario_seed=1000, max_edges=pads["max_edges"] + 1)])


def test_training_on_a_parameter_pool_records_it_and_evaluates_on_the_default_generator(tmp_path):
    pytest.importorskip("stable_baselines3")
    from dataclasses import replace

    from clustergym.runner.evaluation import evaluate
    from clustergym.learning.algos import SIDE_CAR
    from clustergym.learning.training import TrainConfig, train

    config = TrainConfig(P1, "ppo", 128, hyperparams={"n_steps": 64, "batch_size": 64}, n_envs=2, param_draws=3,
                         curve_references=False)  # the curve's reference lines are not what this test checks
    train(config, str(tmp_path / "a"), progress=False)
    train(config, str(tmp_path / "b"), progress=False)
    meta = json.loads((tmp_path / "a" / SIDE_CAR).read_text())
    assert meta["vec"] == "dummy" and meta["param_pool"]["settings"] == param_settings(P1, 3)
    assert set(meta["env_kwargs"]) == {"max_edges"}  # the model's env is the default generator, padded
    assert meta["env_kwargs"]["max_edges"] == pool_padding(
        P1, {}, param_settings(P1, 3), sorted(set(range(0, 100)) | set(range(900, 1100))))["max_edges"]
    res = [evaluate(P1, [f"sb3:{tmp_path / d}"], [0], 10, progress=False, instances=[7], score=False)
           for d in ("a", "b")]
    assert res[0].runs[0].total_reward == res[1].runs[0].total_reward  # same seed, same model
    # the same run without the settings (same padding, same vec, same seed) trains another model: the episodes
    # ran in the drawn settings, not in the default generator
    train(replace(config, param_draws=0, vec="dummy", env_kwargs={"max_edges": meta["env_kwargs"]["max_edges"]}),
          str(tmp_path / "d"), progress=False)
    from clustergym.learning.sb3_agent import safe_load

    w = [safe_load(str(tmp_path / d / "model.zip"), json.loads((tmp_path / d / SIDE_CAR).read_text())
                   ).policy.state_dict() for d in ("a", "b", "d")]
    assert all(np.array_equal(w[0][k].numpy(), w[1][k].numpy()) for k in w[0])
    assert not all(np.array_equal(w[0][k].numpy(), w[2][k].numpy()) for k in w[0])
    with pytest.raises(ValueError, match="vec='native'"):
        train(replace(config, vec="native"), str(tmp_path / "c"), progress=False)
    assert not os.path.exists(tmp_path / "c" / "model.zip")
