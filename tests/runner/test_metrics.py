"""The metrics contract (clustergym/core/metrics.py): every env declares the keys of info["metrics"] and
their kind, and the runner aggregates them by the declaration."""

import gymnasium as gym
import numpy as np
import pytest

import clustergym  # noqa: F401
from clustergym.core.agent import make
from clustergym.core.metrics import CUMULATIVE, EPISODE, SLOT, Metric, MetricsAccumulator, check_spec, metrics_spec_of
from clustergym.runner.episode import run_episode, run_one

IDS = [i for i in gym.registry if i.startswith("clustergym/")]
# Small instances where the oracle is expensive (P3's MILP); every other id runs its defaults.
SMALL = {"clustergym/RingAllReduce-v0": dict(num_servers=12, max_jobs=6, arrival_rate=1.0)}
VECTOR_IDS = [i for i in IDS if gym.spec(i).vector_entry_point is not None]
# The native vector env's kwargs where it does not step the single env's default mode (P3: ring_size only)
VECTOR_KW = {"clustergym/RingAllReduce-v0": dict(SMALL["clustergym/RingAllReduce-v0"], action_mode="ring_size")}


def _emitted(env_id, horizon=6, seed=0):
    """Keys of info["metrics"] at every step of a random-agent episode with the oracle on."""
    env = gym.make(env_id, horizon=horizon, oracle=True, **SMALL.get(env_id, {}))
    agent = make("random", env_id=env_id)
    obs, info = env.reset(seed=seed)
    agent.reset(env.unwrapped.problem, seed=seed)
    keys, done = [], False
    while not done:
        obs, r, term, trunc, info = env.step(agent.act(obs, info))
        keys.append(set(info["metrics"]))
        done = term or trunc
    return env, keys


@pytest.mark.parametrize("env_id", IDS)
def test_every_emitted_metric_is_declared(env_id):
    env, keys = _emitted(env_id)
    spec = metrics_spec_of(env)
    check_spec(spec)
    assert spec, f"{env_id} declares no metrics_spec"
    emitted = set().union(*keys)
    assert emitted <= set(spec), f"{env_id} emits undeclared metrics: {sorted(emitted - set(spec))}"
    # EPISODE keys appear at the last step only; the others at every step where they appear at all.
    for k in emitted:
        if spec[k].kind == EPISODE:
            assert k in keys[-1] and not any(k in s for s in keys[:-1]), k


@pytest.mark.parametrize("env_id", VECTOR_IDS)
def test_vector_env_declares_the_single_envs_metrics(env_id):
    venv = gym.make_vec(env_id, num_envs=2, vectorization_mode="vector_entry_point", horizon=4, oracle=True,
                        **VECTOR_KW.get(env_id, {}))
    single = gym.make(env_id, horizon=4, **VECTOR_KW.get(env_id, {}))
    assert metrics_spec_of(venv) == metrics_spec_of(single)
    venv.reset(seed=0)
    venv.action_space.seed(0)
    emitted = set()
    for _ in range(4):
        *_, info = venv.step(venv.action_space.sample())
        emitted |= {k for k in info.get("metrics", {}) if not k.startswith("_")}
    assert emitted and emitted <= set(metrics_spec_of(venv))


def test_p4_utility_is_a_running_total_and_reported_as_such():
    """P4's "utility" is cumulative: the run gains total_utility (its last value, = Σ rewards); the old
    mean_utility (the mean of the running total) stays as it was."""
    env_id = "clustergym/ApproxJobs-v0"
    assert metrics_spec_of(gym.make(env_id)).get("utility").kind == CUMULATIVE
    r = run_one(env_id, "fair", seed=0, horizon=120)
    env = gym.make(env_id, horizon=120)
    ep = run_episode(env, make("fair", env_id=env_id), 0)
    running = ep.final_metrics["utility"]
    assert r.metrics["total_utility"] == running
    np.testing.assert_allclose(r.metrics["total_utility"], r.total_reward, rtol=1e-9)
    assert r.metrics["mean_utility"] < r.metrics["total_utility"]  # the mean of a growing running total
    assert "total_fit" in r.metrics and "total_repaired" in r.metrics


def test_p3_utility_is_per_slot():
    env_id = "clustergym/RingAllReduce-v0"
    assert metrics_spec_of(gym.make(env_id)).get("utility").kind == SLOT
    r = run_one(env_id, "fifo", seed=0, horizon=30, env_kwargs=SMALL[env_id])
    np.testing.assert_allclose(r.metrics["mean_utility"] * r.steps, r.total_reward, rtol=1e-9)
    assert "total_utility" not in r.metrics


def test_accumulator_follows_the_declaration_not_the_names():
    spec = {"a": Metric(SLOT, "per slot", total=True), "b": Metric(CUMULATIVE, "running"),
            "c": Metric(CUMULATIVE, "running, no total", total=False), "episode_x": Metric(EPISODE, "end")}
    acc = MetricsAccumulator(spec)
    acc.add({"a": 1.0, "b": 1.0, "c": 5.0})
    acc.add({"a": 3.0, "b": 4.0, "c": 6.0, "episode_x": 9.0, "regret": 2.0})
    s = acc.summary(2)
    assert s == {"mean_a": 2.0, "mean_b": 2.5, "mean_c": 5.5, "mean_episode_x": 4.5, "total_a": 4.0,
                 "episode_x": 9.0, "total_b": 4.0}
    with pytest.raises(ValueError, match="episode_"):
        check_spec({"episode_y": Metric(SLOT, "wrong kind")})
    with pytest.raises(ValueError, match="kind"):
        Metric("sometimes", "no such kind")
