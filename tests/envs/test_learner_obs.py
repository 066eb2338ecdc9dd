"""What ``gym.make(id)`` gives a learner: no evaluation-only oracle by default, and an observation that
carries the last slot's feedback, its empirical statistics and the public problem data (info is
diagnostics only)."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest

import clustergym  # noqa: F401
from clustergym.core.agent import public_info
from clustergym.envs import ENV_IDS
from clustergym.core.family import env_entry
from clustergym.learning.pipeline import EmpiricalStats, ObsPipeline, flatten_batch, layout_keys
from clustergym.runner.testing import valid_random_action
from clustergym.learning.wrappers import FlattenWithStats

P1, P2, P3, P4 = ENV_IDS

# Metric keys that only an oracle or a bound computes (per-slot or at the episode's end).
ORACLE_KEYS = {"oracle_reward", "regret", "cum_regret", "episode_best_static", "episode_best_static_upper",
               "episode_regret", "episode_bound"}


def small(env_id: str) -> dict:
    return dict(env_entry(env_id)[1].check_kwargs)


def rollout_infos(env, steps: int, seed: int = 0):
    obs, info = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    env.action_space.seed(seed)
    out = [(obs, info)]
    for _ in range(steps):
        obs, _, term, trunc, info = env.step(valid_random_action(env.unwrapped, info, rng))
        out.append((obs, info))
        if term or trunc:
            break
    return out


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_default_env_computes_no_oracle(env_id, monkeypatch):
    """Every registered id steps to the episode's end without an oracle: none is called, no oracle metric."""
    import clustergym.envs.multiserver.allocation.oracle as p2_oracle
    import clustergym.envs.multiserver.channel.env as p1_env

    def forbidden(*args, **kwargs):
        raise AssertionError("the default env called an evaluation-only oracle")

    monkeypatch.setattr(p1_env, "knapsack_value", forbidden)
    monkeypatch.setattr(p2_oracle, "best_static_allocation", forbidden)
    env = gym.make(env_id, horizon=8, **small(env_id))
    assert env.unwrapped.oracle is False
    steps = rollout_infos(env, 8)
    assert len(steps) == 9  # reached the horizon (P2 solves its hindsight optimum there when the oracle is on)
    for _, info in steps[1:]:
        assert not ORACLE_KEYS & set(info["metrics"])


@pytest.mark.parametrize("env_id", [P1, P2])
def test_vector_env_default_computes_no_oracle(env_id):
    vec = gym.make_vec(env_id, num_envs=2, vectorization_mode="vector_entry_point", horizon=3, **small(env_id))
    assert vec.unwrapped.oracle is False
    _, info = vec.reset(seed=0)
    for _ in range(4):
        _, _, _, _, info = vec.step(vec.action_space.sample())
        assert not ORACLE_KEYS & set(info.get("metrics", {}))


@pytest.mark.parametrize("env_id", [P1, P2, P4])
def test_evaluate_turns_the_oracle_on_for_a_score(env_id):
    """clustergym.evaluate (clustergym run) adds the env's score kwargs: scores (and P1/P2 regrets) come back."""
    from clustergym.runner.evaluation import evaluate

    agents = {P1: ["hauf", "random"], P2: ["drf", "random"], P4: ["fair", "random"]}[env_id]
    res = evaluate(env_id, agents, [0], 60 if env_id == P4 else 12, env_kwargs=small(env_id), progress=False)
    for r in res.runs:
        assert r.bound_total is not None and r.score is not None
        if env_id != P4:
            assert r.regret is not None and np.isfinite(r.regret)


@pytest.mark.parametrize("env_id", [P1, P2])
def test_cli_run_reports_scores_and_regret(env_id, tmp_path, capsys):
    import json

    from clustergym.cli.main import main

    kw = ",".join(f"{k}={v}" for k, v in small(env_id).items())
    agents = "hauf,random" if env_id == P1 else "drf,random"
    assert main(["run", env_id, "--agents", agents, "--seeds", "0", "--horizon", "10", "--set", kw, "--no-progress",
                 "--no-plots", "--out", str(tmp_path / "r")]) == 0
    capsys.readouterr()
    runs = json.load(open(tmp_path / "r" / "results.json"))["runs"]
    assert runs and all(r["score"] is not None and r["regret"] is not None for r in runs)


# -- the observation: feedback, statistics, public problem data ---------------------------------------------
CASES = [(P1, {}), (P1, {"max_edges": 60}), (P2, {}), (P2, {"max_edges": 40}), (P4, {})]


def old_vector(env, obs_seq) -> list[np.ndarray]:
    """What the observation pipeline of earlier versions gave: [flatten(the observation keys of then),
    the statistics computed outside the env from the previous observation and the public feedback]."""
    u = env.unwrapped
    space = env.observation_space
    old_space = gym.spaces.Dict({k: space[k] for k in layout_keys(u.family, space, "legacy", stats=False)})
    from clustergym.core.env import env_padding

    st = EmpiricalStats(u.family, u.problem, env_padding(u) or None)
    out, prev = [], None
    for obs, info in obs_seq:
        if prev is not None:
            st.update(prev, public_info(info))
        old = {k: obs[k] for k in old_space.spaces}
        out.append(np.concatenate([gym.spaces.flatten(old_space, old).astype(np.float32), st.vector()]))
        prev = obs
    return out


@pytest.mark.parametrize("env_id,kw", CASES, ids=[f"{e.split('/')[1]}{'-padded' if k else ''}" for e, k in CASES])
def test_default_observation_equals_what_flatten_with_stats_gave(env_id, kw):
    env = gym.make(env_id, horizon=25, **small(env_id), **kw)
    u = env.unwrapped
    seq = rollout_infos(env, 25)
    legacy = ObsPipeline(u.family, u.problem, env.observation_space, layout="legacy")
    for (obs, _), ref in zip(seq, old_vector(env, seq)):
        assert env.observation_space.contains(obs)
        np.testing.assert_array_equal(legacy.observe(obs), ref)  # exactly the earlier vector
    # the statistics moved: not all zero after some steps
    assert any(np.any(obs[k] != 0) for k in layout_keys(u.family, env.observation_space, "legacy")[-2:]
               for obs, _ in seq[5:])


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_flatten_with_stats_is_flatten_observation(env_id):
    kw = small(env_id)
    a = FlattenWithStats(gym.make(env_id, horizon=10, **kw))
    b = gym.wrappers.FlattenObservation(gym.make(env_id, horizon=10, **kw))
    assert a.observation_space.shape == b.observation_space.shape
    oa, info = a.reset(seed=3)
    ob, _ = b.reset(seed=3)
    np.testing.assert_array_equal(oa, ob.astype(np.float32))
    rng = np.random.default_rng(0)
    for _ in range(10):
        act = valid_random_action(a.unwrapped, info, rng)
        oa, _, _, trunc, info = a.step(act)
        ob, *_ = b.step(act)
        np.testing.assert_array_equal(oa, ob.astype(np.float32))
        if trunc:
            break


@pytest.mark.parametrize("env_id", [P1, P2, P4])
def test_observation_ignores_metrics_and_oracles(env_id, monkeypatch):
    """Statistics come from public feedback only: an env whose oracle returns nonsense and whose
    info["metrics"] arrays are scribbled over after every step gives exactly the observations of an env
    without oracle."""
    import clustergym.envs.multiserver.allocation.oracle as p2_oracle
    import clustergym.envs.multiserver.channel.env as p1_env

    kw = {**small(env_id), "horizon": 20}
    ref = gym.make(env_id, **kw, oracle=False)
    other = gym.make(env_id, **kw, oracle=True)
    junk = p2_oracle.best_static_allocation(other.unwrapped.problem, np.ones(other.unwrapped.problem.num_ports)) \
        if env_id == P2 else None
    if junk is not None:
        junk = dataclasses.replace(junk, value=-1e9, upper_bound=1e9)
    monkeypatch.setattr(p1_env, "knapsack_value", lambda *a: 1e9)
    monkeypatch.setattr(p2_oracle, "best_static_allocation", lambda *a: junk)
    o1, i1 = ref.reset(seed=1)
    o2, i2 = other.reset(seed=1)
    rng = np.random.default_rng(1)
    seen = set()
    for _ in range(20):
        a = valid_random_action(ref.unwrapped, i1, rng)
        o1, _, _, t1, i1 = ref.step(a)
        o2, _, _, t2, i2 = other.step(a)
        seen |= ORACLE_KEYS & set(i2["metrics"])
        for v in i2["metrics"].values():  # scribble over every metric array in place
            if isinstance(v, np.ndarray) and v.dtype.kind in "fiu":
                v[...] = 7
        assert set(o1) == set(o2)
        for k in o1:
            np.testing.assert_array_equal(o1[k], o2[k], err_msg=k)
        if t1:
            break
    assert seen  # the oracle ran in the other env


@pytest.mark.parametrize("env_id,kw", [(P1, {}), (P1, {"max_edges": 60, "instances": range(4)}), (P2, {}),
                                       (P2, {"max_edges": 60, "instances": range(4)})])
def test_flatten_batch_equals_gymnasium_flatten_row_by_row(env_id, kw):
    vec = gym.make_vec(env_id, num_envs=4, vectorization_mode="vector_entry_point", horizon=4,
                       **small(env_id), **kw)
    space = vec.single_observation_space
    obs, info = vec.reset(seed=0)
    vec.action_space.seed(0)
    for _ in range(7):  # through an autoreset
        flat = flatten_batch(space, obs)
        assert flat.shape == (4, gym.spaces.flatdim(space)) and flat.dtype == np.float32
        for i in range(4):
            row = {k: v[i] for k, v in obs.items()}
            np.testing.assert_array_equal(flat[i], gym.spaces.flatten(space, row).astype(np.float32))
        obs, *_ = vec.step(vec.action_space.sample())


def test_flatten_batch_one_hot_of_multidiscrete_and_discrete():
    space = gym.spaces.Dict({"a": gym.spaces.MultiDiscrete([[3, 2], [4, 2]], start=[[1, 0], [0, 5]]),
                             "b": gym.spaces.Discrete(3, start=-1), "c": gym.spaces.Box(-1, 1, (2,))})
    space.seed(0)
    rows = [space.sample() for _ in range(5)]
    batch = {k: np.stack([r[k] for r in rows]) for k in space.spaces}
    flat = flatten_batch(space, batch)
    for i, r in enumerate(rows):
        np.testing.assert_array_equal(flat[i], gym.spaces.flatten(space, r).astype(np.float32))


def test_p2_observation_has_the_public_parameters_ogasched_reads():
    env = gym.make(P2, horizon=5, **small(P2))
    u = env.unwrapped
    pb = u.problem
    obs, _ = env.reset(seed=0)
    srv = pb.edge_server
    np.testing.assert_array_equal(obs["edge_alpha"], np.asarray(pb.alpha)[srv].astype(np.float32))
    np.testing.assert_array_equal(obs["edge_utility"], np.asarray(pb.utility)[srv].reshape(-1))
    np.testing.assert_array_equal(obs["beta"], np.asarray(pb.beta, dtype=np.float32))
    np.testing.assert_array_equal(obs["edge_arrival"], obs["arrivals"][pb.edge_port])
    y = np.asarray(pb.edge_demand, dtype=np.float64) * 0.01
    obs, r, *_ , info = env.step(y)
    np.testing.assert_array_equal(obs["last_allocation"], info["feedback"]["allocation"].astype(np.float32))
    np.testing.assert_array_equal(obs["last_port_reward"], info["feedback"]["port_reward"].astype(np.float32))


LAST = {P1: {"last_executed": "executed", "last_utility": "utilities"},
        P2: {"last_allocation": "allocation", "last_port_reward": "port_reward"},
        P4: {"last_executed": "executed", "last_work": "work"}}


@pytest.mark.parametrize("env_id,kw", CASES, ids=[f"{e.split('/')[1]}{'-padded' if k else ''}" for e, k in CASES])
def test_observation_carries_the_last_feedback(env_id, kw):
    T = 60 if env_id == P4 else 15  # P4's small instance: the first jobs arrive after a few dozen slots
    env = gym.make(env_id, horizon=T, **small(env_id), **kw)
    seq = rollout_infos(env, T)
    for key in LAST[env_id]:
        assert not np.any(seq[0][0][key])  # nothing ran before the first step
    for obs, info in seq[1:]:
        for key, fb in LAST[env_id].items():
            np.testing.assert_array_equal(obs[key], info["feedback"][fb].astype(obs[key].dtype), err_msg=key)
    assert any(np.any(obs[k]) for obs, _ in seq[1:] for k in LAST[env_id])


def test_p1_observation_has_the_last_feedback():
    env = gym.make(P1, horizon=5, **small(P1))
    obs, info = env.reset(seed=0)
    assert not obs["last_executed"].any() and not obs["last_utility"].any()
    obs, _, _, _, info = env.step(info["action_mask"].astype(np.int8))
    fb = info["feedback"]
    np.testing.assert_array_equal(obs["last_executed"], fb["executed"].astype(np.int8))
    np.testing.assert_array_equal(obs["last_utility"], fb["utilities"].astype(np.float32))
    np.testing.assert_array_equal(obs["edge_arrival"], info["action_mask"].astype(np.int8))
