"""ESDP's pruned DP kernel (reach bound per cell, reachable capacities per layer, bit-packed decisions) against
the dense kernel it replaces: the same values of every P4(s, t) and the same decisions, slot by slot and at late slots."""

import gymnasium as gym
import numpy as np
import pytest

from clustergym.core.agent import public_info
from clustergym.agents.esdp import ESDP
from clustergym.agents.esdp_dp import solve_p4_all

ID = "clustergym/MultiServerChannel-v0"


def _dp_inputs(agent: ESDP, arrivals):
    """The inputs of the DP the agent's next decision solves."""
    edges, ups, w, s_max = agent.p4_inputs(arrivals)
    return ups, w, agent.problem.demand[edges], agent.problem.capacity, s_max


def _same_dp(ups, w, demand, cap, s_max, ws=None):
    v_ref, sol_ref = solve_p4_all(ups, w, demand, cap, s_max, backend="numba")
    ws = {} if ws is None else ws
    v_new, sol_new = solve_p4_all(ups, w, demand, cap, s_max, backend="pruned", workspace=ws)
    assert np.array_equal(v_ref, v_new)
    for s in range(s_max + 1):
        if v_ref[s] >= 0:
            assert np.array_equal(sol_ref(s), sol_new(s)), s
    assert 0 <= ws["cells"] <= len(ups) * int(np.prod(cap + 1)) * (s_max + 1)  # never more than the dense grid
    return ws["cells"]


@pytest.mark.parametrize("servers,slots", [(20, 130), (40, 80)])
def test_pruned_kernel_decides_as_the_dense_kernel_slot_by_slot(servers, slots):
    """Two ESDP agents, one per kernel, fed the same observations and feedback: the same channels and the same
    s* in every slot (130 + 80 decisions), and the same values of every P4(s, t) every tenth slot."""
    env = gym.make(ID, horizon=slots, num_servers=servers)
    obs, info = env.reset(seed=servers)
    new, ref = ESDP(backend="pruned"), ESDP(backend="numba")
    for ag in (new, ref):
        ag.reset(env.unwrapped.problem, seed=0)
    for t in range(slots):
        if t % 10 == 0:
            _same_dp(*_dp_inputs(new, obs["arrivals"]))
        a = new.act(obs, public_info(info))
        assert np.array_equal(a, ref.act(obs, public_info(info))) and new.last_s_star == ref.last_s_star, t
        assert new.last_dp_cells > 0
        nxt, r, _, _, info = env.step(a)
        for ag in (new, ref):
            ag.update(obs, a, r, nxt, public_info(info))
        obs = nxt
    assert new.dp_cells >= new.last_dp_cells > 0


@pytest.mark.parametrize("servers", [20, 40])
@pytest.mark.parametrize("t", [2000, 8000])
def test_pruned_kernel_decides_as_the_dense_kernel_at_late_slots(servers, t):
    """Decisions forced at t = 2,000 and 8,000 (counts and means as a long run leaves them, a few channels
    untried): equal values for every s and equal maximisers."""
    env = gym.make(ID, horizon=10, num_servers=servers)
    obs, _ = env.reset(seed=1)
    rng = np.random.default_rng(servers + t)
    for trial in range(3):
        ag = ESDP()
        ag.reset(env.unwrapped.problem, seed=0)
        E = env.unwrapped.problem.num_edges
        ag.t = t - 1
        ag.n[:] = rng.integers(1, t // 4, E)
        ag.n[rng.random(E) < 0.1 * trial] = 0  # untried channels in the later trials
        ag.sum_z[:] = ag.n * rng.random(E)
        _same_dp(*_dp_inputs(ag, obs["arrivals"]))


def test_pruned_kernel_on_random_small_dps_including_zero_demands_and_unfit_edges():
    rng = np.random.default_rng(5)
    for _ in range(300):
        n, K = int(rng.integers(1, 10)), int(rng.integers(1, 4))
        demand = rng.integers(0, 5, size=(n, K))
        cap = rng.integers(0, 7, size=K)
        ups = rng.integers(0, 9, size=n)
        sig = rng.integers(0, 10**6, size=n)
        _same_dp(ups, sig, demand, cap, int(rng.integers(0, ups.sum() + 4)))


def test_pruned_kernel_reuses_its_buffers_without_reading_stale_values():
    """One workspace over 300 DPs whose grids, s ranges and value types change from one to the next (as a run's
    decisions reuse theirs): every DP still gives the dense kernel's values and maximisers."""
    rng = np.random.default_rng(11)
    ws: dict = {}
    for k in range(300):
        n, K = int(rng.integers(1, 10)), int(rng.integers(1, 4))
        demand = rng.integers(0, 5, size=(n, K))
        cap = rng.integers(0, 7, size=K)
        ups = rng.integers(0, 9, size=n)
        sig = rng.integers(0, 10**6 if k % 7 else 2**40, size=n)  # every seventh: int64 values
        _same_dp(ups, sig, demand, cap, int(rng.integers(0, ups.sum() + 4)), ws=ws)
    assert {"V", "bits", "tops", "valid", "reach"} <= set(ws)


def test_dp_cells_reach_the_run_metrics_and_are_the_same_on_every_run():
    """The computation measure of a run is a count: equal in two runs of the same (instance, seed), and larger
    for the δ(t) = (ln(t+1)+1)⁻¹ of Fig. 7 (smaller δ, larger ξ(t) and S(t): eqs. 18–19) than for the default."""
    from clustergym.runner.episode import run_one

    a = run_one(ID, "esdp", 3, 60, {"num_servers": 20, "scenario_seed": 3})
    b = run_one(ID, "esdp", 3, 60, {"num_servers": 20, "scenario_seed": 3})
    c = run_one(ID, 'esdp[delta="log"]', 3, 60, {"num_servers": 20, "scenario_seed": 3})
    key = "agent_dp_cells_per_decision"
    assert a.metrics[key] == b.metrics[key] > 0
    assert c.metrics[key] > a.metrics[key]
