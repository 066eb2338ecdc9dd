"""OGASched (Algorithm 1) and the P2 baselines behave as the paper describes."""

import gymnasium as gym
import numpy as np
import pytest

from clustergym.agent import make, public_info
from clustergym.agents.ogasched import proportional_share
from clustergym.core import Scenario, freeze
from clustergym.envs.multiserver.allocation_env import RewardModel
from clustergym.envs.multiserver.allocation_scenario import AllocationProblem, AllocationTruth, make_allocation_scenario
from clustergym.envs.multiserver.projection import AllocationLayout

ID = "clustergym/MultiServerAllocation-v0"
FAM = "multiserver-allocation"


def run(agent, horizon, seed=0, **env_kw):
    env = gym.make(ID, horizon=horizon, **env_kw).unwrapped
    ag = make(agent, family=FAM)
    obs, info = env.reset(seed=seed)
    ag.reset(env.problem, seed=seed)
    rewards, actions = [], []
    for _ in range(horizon):
        a = ag.act(obs, public_info(info))
        actions.append(np.array(a))
        obs, r, term, trunc, info = env.step(a)
        ag.update(None, a, r, obs, public_info(info))
        assert info["metrics"]["repaired"] == 0  # every agent plays inside Y
        rewards.append(r)
    return np.array(rewards), actions, info, env


@pytest.mark.parametrize("utility", ["linear", "log", "reciprocal", "poly", "mixed"])
def test_gradient_eq9_matches_finite_differences(utility):
    pb = make_allocation_scenario("paper", seed=1, num_servers=16, num_ports=4, utility=utility).problem
    ag = make("ogasched", family=FAM)
    ag.reset(pb)
    rng = np.random.default_rng(0)
    model = RewardModel(pb)
    lay = AllocationLayout(pb.edge_port, pb.edge_server, pb.edge_demand, pb.capacity, pb.num_servers)
    y = lay.project(rng.random(pb.edge_demand.shape) * pb.edge_demand) + 0.1
    x = np.array([True, False, True, True])

    def q(v):
        g, o = model.parts(v)
        return float(np.sum(np.where(x, g - o, 0.0)))

    grad = ag.gradient(x, y)
    h = 1e-6
    fd = np.zeros_like(y)
    for e in range(y.shape[0]):
        for k in range(y.shape[1]):
            d = np.zeros_like(y)
            d[e, k] = h
            fd[e, k] = (q(y + d) - q(y)) / h  # one-sided: the max of eq. 5 is differentiable here (no ties)
    assert np.allclose(grad, fd, atol=1e-4)
    assert np.all(grad[~x[pb.edge_port]] == 0)  # x_l(t) factor


def test_ogasched_step_is_eq11():
    pb = make_allocation_scenario("paper", seed=0).problem
    ag = make("ogasched[eta0=3,decay=0.5]", family=FAM)
    ag.reset(pb)
    y1 = ag.y.copy()
    assert np.allclose(y1, proportional_share(pb))  # y(1)
    x = np.ones(pb.num_ports, dtype=np.int8)
    played = ag.act({"arrivals": x}, {})
    assert np.array_equal(played, y1)  # plays y(t), computed before x(t)
    lay = AllocationLayout(pb.edge_port, pb.edge_server, pb.edge_demand, pb.capacity, pb.num_servers)
    assert np.allclose(ag.y, lay.project(y1 + 3 * ag.gradient(x.astype(bool), y1)))
    assert ag.eta == pytest.approx(1.5)


def test_ogasched_reaches_known_optimum_on_toy():
    r, actions, info, env = run("ogasched[eta0=0.5]", 300, scenario="toy")
    assert r[-50:].mean() == pytest.approx(2.8, abs=1e-6)  # the hand-computed optimum (scenario docstring)
    assert info["metrics"]["episode_best_static"] == pytest.approx(2.8 * 300, abs=1e-5)


def test_ogasched_regret_per_slot_shrinks_with_T():
    kw = dict(num_servers=24, num_ports=5, utility="log")
    per_slot = []
    for T in (150, 600):
        r, _, info, _ = run("ogasched[lr=eq26,horizon=%d]" % T, T, **kw)
        per_slot.append(info["metrics"]["episode_regret"] / T)
    assert per_slot[1] < per_slot[0]


def test_arrival_aware_projects_only_active_ports_and_helps():
    kw = dict(num_servers=32, num_ports=6)
    plain, _, _, _ = run("ogasched[lr=eq26,horizon=300]", 300, **kw)
    aware, actions, _, env = run("ogasched[lr=eq26,horizon=300,arrival_aware=true]", 300, **kw)
    assert aware.sum() > plain.sum()


@pytest.mark.parametrize("agent", ["drf", "fairness", "binpacking", "spreading", "random"])
def test_baselines_serve_only_ports_with_a_job_and_respect_capacity(agent):
    env = gym.make(ID, horizon=30, oracle=False).unwrapped
    ag = make(agent, family=FAM)
    obs, info = env.reset(seed=2)
    ag.reset(env.problem, seed=0)
    lay = env.layout
    for _ in range(30):
        a = ag.act(obs, public_info(info))
        idle = ~obs["arrivals"].astype(bool)[env.problem.edge_port]
        assert np.all(a[idle] == 0)
        assert np.all(a >= 0) and np.all(a <= env.problem.edge_demand + 1e-9)
        assert np.all(lay.server_sums(a) <= env.problem.capacity + 1e-9)
        obs, r, term, trunc, info = env.step(a)
        assert info["metrics"]["repaired"] == 0


def _one_server(demand, capacity):
    L = len(demand)
    K = len(capacity)
    pb = AllocationProblem(
        num_ports=L, num_servers=2, num_device_types=K, edge_port=freeze(np.r_[np.arange(L), 0]),
        edge_server=freeze(np.r_[np.zeros(L, int), 1]), demand=freeze(np.array(demand, float)),
        capacity=freeze(np.array([capacity, capacity], float)), alpha=freeze(np.ones((2, K))),
        utility=freeze(np.zeros((2, K), int)), beta=freeze(np.full(K, 0.5)), device_names=("CPU", "GPU")[:K])
    return pb


def test_fairness_is_the_proportional_share_of_the_paper():
    pb = _one_server([[2.0], [6.0], [4.0]], [6.0])
    ag = make("fairness", family=FAM)
    ag.reset(pb)
    a = ag.act({"arrivals": np.array([1, 1, 0])}, {})
    # shares a_l / Σ_{L_r} a = 2/12, 6/12 of c = 6 -> 1, 3; port 2 is idle (its share stays unused).
    assert np.allclose(a[:3, 0], [1.0, 3.0, 0.0])
    ag = make("fairness[active_share=true]", family=FAM)
    ag.reset(pb)
    a = ag.act({"arrivals": np.array([1, 1, 0])}, {})
    assert np.allclose(a[:3, 0], [1.5, 4.5, 0.0])


def test_drf_serves_ascending_dominant_share():
    pb = _one_server([[5.0, 1.0], [1.0, 2.0], [3.0, 3.0]], [6.0, 4.0])
    ag = make("drf", family=FAM)
    ag.reset(pb)
    # Σ_{r∈R_l} c: port 0 reaches both servers (12, 8), ports 1, 2 one server (6, 4).
    # s = (max(5/12, 1/8), max(1/6, 2/4), max(3/6, 3/4)) = (0.417, 0.5, 0.75): order 0, 1, 2.
    assert np.allclose(ag.dominant_share, [5 / 12, 0.5, 0.75])
    a = ag.act({"arrivals": np.array([1, 1, 1])}, {})
    assert np.allclose(a[:3], [[5.0, 1.0], [1.0, 2.0], [0.0, 1.0]])


def test_binpacking_and_spreading_order_by_normalised_request():
    pb = _one_server([[4.0], [1.0], [2.0]], [5.0])
    bp = make("binpacking", family=FAM)
    sp = make("spreading", family=FAM)
    bp.reset(pb)
    sp.reset(pb)
    obs = {"arrivals": np.array([1, 1, 1])}
    # BINPACKING: largest request first: 4 fits (left 1), 2 does not, 1 fits -> (4, 1, 0).
    assert np.allclose(bp.act(obs, {})[:3, 0], [4.0, 1.0, 0.0])
    # SPREADING: smallest first: 1, 2 fit (left 2), 4 does not -> (0, 1, 2).
    assert np.allclose(sp.act(obs, {})[:3, 0], [0.0, 1.0, 2.0])


def test_agent_options_are_validated():
    with pytest.raises(ValueError, match="eta0"):
        make("ogasched[eta0=-1]", family=FAM)
    with pytest.raises(ValueError, match="lr"):
        make("ogasched[lr=adam]", family=FAM)
