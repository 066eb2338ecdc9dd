"""A trained model's inputs stay in their training range on runs longer than its training episodes.

Each shipped model trained on 200-slot episodes; users run the envs at their default horizon (2,000 slots on
P1, P2 and P4). Two checks:

* **The clock.** Moving every absolute time of an observation (the slot index, and P4's job arrivals and
  deadlines) ten horizons later changes no input of a network but its time feature, which reads its largest
  training value (``clustergym.core.env.TIME_CAP``). Earlier versions' features grew with t.
* **A ten times longer run**, the model itself acting on one instance of its training pool: every input's bulk
  (1st-99th percentile) over one 2,000-slot run stays in its range over ten 200-slot runs. P3's and P4's
  states drift over a long run (their queues and machines fill up beyond what 200 slots reach), which no
  feature transform removes: those two are expected failures, with the measured drift as the reason.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch as th

from clustergym.core.agent import make as make_agent
from clustergym.core.entity_features import log_time_feature, time_feature
from clustergym.core.env import TIME_CAP

from clustergym.runner.episode import make_env, run_episode
from clustergym.learning.entity import EntityNet
from clustergym.learning.pipeline import ObsPipeline

MODELS = ["MultiServerChannel-v0", "MultiServerAllocation-v0", "RingAllReduce-v0", "ApproxJobs-v0"]
TRAIN_HORIZON = 200
INSTANCE = 1000  # in every shipped model's training pool


def _inputs(name: str, horizon: int, seeds, dicts: list | None = None) -> np.ndarray:
    """The flat vectors the model's pipeline gives, slot by slot, over episodes of ``horizon`` slots (and the
    Dict observations behind them in ``dicts``, with the pipeline that flattened them)."""
    env_id = f"clustergym/{name}"
    rows: list[np.ndarray] = []
    agent = make_agent(f"sb3:pretrained/{name}", env_id=env_id)
    reset = agent.reset

    def recording_reset(problem, *, seed=None):
        reset(problem, seed=seed)
        observe = agent.pipeline.observe

        def recorded(obs):
            x = observe(obs)
            rows.append(x.copy())
            if dicts is not None:
                dicts.append((obs, observe))
            return x

        agent.pipeline.observe = agent.pipeline.reset = recorded

    agent.reset = recording_reset
    kw = {**agent.eval_env_kwargs(f"sb3:pretrained/{name}", env_id, {}, [INSTANCE]), "scenario_seed": INSTANCE}
    agent.bind_env_kwargs(kw)
    for seed in seeds:
        env = make_env(env_id, horizon=horizon, oracle=False, **kw)
        run_episode(env, agent, seed, max_steps=horizon)
        env.close()
    return np.stack(rows)


def _features(name: str, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The network's inputs: the per-entity features of present entities (rows) and the global features of
    an entity net, else the flat vector itself (and no global part)."""
    agent = make_agent(f"sb3:pretrained/{name}", env_id=f"clustergym/{name}")
    net = agent.model.policy.mlp_extractor
    if not isinstance(net, EntityNet):
        return x, np.zeros((len(x), 0))
    with th.no_grad():
        ent, present, glob = net.gather(th.as_tensor(x))
    return ent[present].numpy(), glob.numpy()


def _outside(short: np.ndarray, long: np.ndarray) -> list[int]:
    """Columns whose bulk in ``long`` (its 1st to 99th percentile) leaves [min, max] of ``short`` widened by 5%
    of that range on each side. A single rare draw (a 2,000-slot run meets rarer rewards than 800 slots) may
    pass the training extremes; a feature that drifts with t leaves them with most of its values."""
    lo, hi = short.min(axis=0), short.max(axis=0)
    pad = 0.05 * (hi - lo) + 1e-6
    q_lo, q_hi = np.percentile(long, 1, axis=0), np.percentile(long, 99, axis=0)
    return [int(c) for c in np.flatnonzero((q_hi > hi + pad) | (q_lo < lo - pad))]


DRIFT = ("the state drifts over a long run: over slots 1,800-1,999 P4's machines are used in 81% of slots (mean "
         "over machines) against 5% on average and at most 29% in 200-slot runs; P3 holds up to 32 jobs against at "
         "most 25 in 200-slot runs")


@pytest.fixture(scope="module", params=[pytest.param(m, marks=pytest.mark.xfail(strict=True, reason=DRIFT))
                                        if m in ("RingAllReduce-v0", "ApproxJobs-v0") else m for m in MODELS])
def runs(request):
    name = request.param
    return name, _inputs(name, TRAIN_HORIZON, range(10)), _inputs(name, 10 * TRAIN_HORIZON, [10])


@pytest.fixture(scope="module", params=MODELS)
def short_runs(request):
    dicts: list = []
    return request.param, _inputs(request.param, TRAIN_HORIZON, range(2), dicts), dicts


def test_a_later_clock_changes_only_the_time_feature_which_stays_in_range(short_runs):
    name, x, dicts = short_runs
    agent = make_agent(f"sb3:pretrained/{name}", env_id=f"clustergym/{name}")
    net = agent.model.policy.mlp_extractor
    shift = 10 * TRAIN_HORIZON
    later = x.copy()
    if isinstance(net, EntityNet):
        t_col, time_col = net.t_index, (0 if name == "MultiServerChannel-v0" else -1)
        later[:, t_col] += shift
        if name == "ApproxJobs-v0":  # the jobs' arrival and deadline: entity columns 1 and 2 (present slots)
            idx = net.ent_index.numpy()
            present = x[:, idx[:, 0]] > 0.5
            for c in (1, 2):
                later[:, idx[:, c]] += np.where(present, shift, 0.0)
        (e0, g0), (e1, g1) = _features(name, x), _features(name, later)
        np.testing.assert_allclose(e1, e0, rtol=1e-5, atol=1e-5)
        keep = [c for c in range(g0.shape[1]) if c != time_col % g0.shape[1]]
        np.testing.assert_allclose(g1[:, keep], g0[:, keep], rtol=1e-5, atol=1e-5)
        assert np.all(g1[:, time_col] == g0[:, time_col].max())  # the largest value it met in training
        assert g0[:, time_col].max() > g0[:, time_col].min()
    else:  # a flat MLP: its pipeline caps the slot index, the compact layout's last entry
        assert agent.meta["time_cap"] == TIME_CAP
        for obs, observe in dicts:
            now, then = observe(obs), observe({**obs, "t": obs["t"] + shift})
            np.testing.assert_array_equal(then[:-1], now[:-1])
            assert now[-1] == min(int(obs["t"][0]), TIME_CAP) and then[-1] == TIME_CAP


def test_no_input_leaves_its_training_range_on_a_ten_times_longer_run(runs):
    """Every input column of the long run stays within the training runs' range (:func:`_outside`); the time
    features, which grew without bound in earlier versions, within it exactly."""
    name, short, long = runs
    (s_ent, s_glob), (l_ent, l_glob) = _features(name, short), _features(name, long)
    assert not _outside(s_ent, l_ent), f"{name}: entity/flat inputs outside their training range"
    if s_glob.shape[1]:
        assert not _outside(s_glob, l_glob), f"{name}: global features outside their training range"
        col = 0 if name == "MultiServerChannel-v0" else -1  # the time feature: P1's first global, P2/P4's last
    else:
        col = -1  # the flat compact layouts end with t
        s_glob, l_glob = short, long
    assert l_glob[:, col].max() <= s_glob[:, col].max() + 1e-6
    assert l_glob[:, col].max() > 0.5 * s_glob[:, col].max() > 0  # the column is the time feature, and it grew


def test_the_flat_models_read_the_slot_index_capped():
    """The shipped flat MLPs (P2, P3) record the cap in their side-car and read min(t, TIME_CAP)."""
    for name in ("MultiServerAllocation-v0", "RingAllReduce-v0"):
        agent = make_agent(f"sb3:pretrained/{name}", env_id=f"clustergym/{name}")
        assert agent.meta["time_cap"] == TIME_CAP
    env = make_env("clustergym/MultiServerAllocation-v0", horizon=600, scenario_seed=INSTANCE)
    obs, _ = env.reset(seed=0)
    pipe = ObsPipeline(env.unwrapped.family, env.unwrapped.problem, env.observation_space, layout="compact",
                       time_cap=TIME_CAP)
    t_col = pipe.keys.index("t")
    assert t_col == len(pipe.keys) - 1  # t is the compact layout's last key: the vector's last entry
    for _ in range(450):
        obs, *_ = env.step(env.action_space.sample())
    assert obs["t"][0] == 450 and pipe.observe(obs)[-1] == TIME_CAP
    assert pipe.observe({**obs, "t": np.array([120])})[-1] == 120  # below the cap: t as it is
    env.close()
    with pytest.raises(ValueError, match="time_cap"):
        ObsPipeline(env.unwrapped.family, env.unwrapped.problem, env.observation_space, layout="compact", time_cap=0)


def test_time_features_grow_over_the_first_slots_then_stay():
    t = th.tensor([[0.0], [50.0], [TIME_CAP - 1.0], [TIME_CAP], [10.0 * TIME_CAP]])
    np.testing.assert_allclose(time_feature(t).squeeze(1).numpy(),
                               [0.0, 50 / (TIME_CAP + 1), (TIME_CAP - 1) / (TIME_CAP + 1), TIME_CAP / (TIME_CAP + 1),
                                TIME_CAP / (TIME_CAP + 1)], rtol=1e-6)
    lt = log_time_feature(t).squeeze(1).numpy()
    assert np.all(np.diff(lt[:4]) > 0) and lt[4] == lt[3] == pytest.approx(np.log1p(TIME_CAP) / 10)
    assert TIME_CAP == TRAIN_HORIZON - 1  # the last slot of a training episode: the shipped models' inputs unchanged


def test_a_model_with_an_earlier_linear_time_feature_is_refused():
    """A P1 layout of an earlier version (t / T_train with T_train = 2,000) would be read with another scale:
    building its network says so in one line instead."""
    agent = make_agent("sb3:pretrained/MultiServerChannel-v0", env_id="clustergym/MultiServerChannel-v0")
    layout = dict(agent.model.policy._get_constructor_parameters()["entity"])
    EntityNet(layout)  # the shipped model's own layout builds
    with pytest.raises(ValueError, match=r"t / 2000 of an earlier version.*train the model again"):
        EntityNet({**layout, "t_scale": 1.0 / 2000})
