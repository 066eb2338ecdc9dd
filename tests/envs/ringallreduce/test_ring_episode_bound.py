"""P3's episode bounds: every job at its cap in every slot, with or without the env's visible window. No policy
scores above either; a policy that gives every visible job its cap every slot scores the window's bound exactly;
on the paper's cluster GADGET does, at every load tried."""

import gymnasium as gym
import numpy as np
import pytest

import clustergym  # noqa: F401  (registers the envs)
from clustergym.runner.evaluation import evaluate
from clustergym.envs.ringallreduce.oracle import run_upper_bound

ENV = "clustergym/RingAllReduce-v0"


def _bound(instance: int, horizon: int, window: int | None = None, **kw) -> float:
    return run_upper_bound(gym.make(ENV, scenario_seed=instance, **kw).unwrapped.scenario.truth, horizon, window)


def _totals(agents, instances, horizon, **kw) -> dict:
    res = evaluate(ENV, agents, [0], horizon, env_kwargs=kw, instances=instances, workers=1, progress=False,
                   score=False)
    return {(r.agent, r.instance): r.total_reward for r in res.runs}


def test_every_job_at_its_cap_scores_the_bound_exactly():
    """With GPUs, links and the window far beyond the load, greedy gives every active job its cap every slot:
    its total is the bound to rounding, whatever the horizon."""
    big = dict(gpu_scale=50.0, bw_scale=100.0, max_jobs=400)
    for horizon in (37, 120):
        tot = _totals(["greedy"], [5, 6], horizon, **big)
        for k in (5, 6):
            assert tot[("greedy", k)] == pytest.approx(_bound(k, horizon, **big), rel=1e-12, abs=1e-9)


def test_no_agent_scores_above_the_bound():
    tot = _totals(["gadget", "greedy", "random"], [7, 8], 80)
    for (agent, k), v in tot.items():
        assert v <= _bound(k, 80) * (1 + 1e-12), (agent, k)


def test_at_a_high_load_the_bound_is_strictly_above_every_agent():
    """At 12 arrivals per slot jobs wait beyond the window: the bound without it is not reached."""
    tot = _totals(["gadget", "random"], [7], 80, arrival_rate=12.0)
    b = _bound(7, 80, arrival_rate=12.0)
    assert all(v < b * (1 - 1e-6) for v in tot.values())


def test_at_the_default_load_gadget_is_at_the_bound_so_no_policy_can_be_above_it():
    """The default load leaves GADGET with repair (the option beyond Algorithm 2) every job's cap in every slot on
    these instances: its total is the bound, so it is optimal over the episode, and a learner cannot be above it,
    only level. Algorithm 2 as written (the default ``gadget``) is well below it."""
    tot = _totals(["gadget[rounding_repair=true]", "gadget", "random"], [900, 901], 200)
    for k in (900, 901):
        b = _bound(k, 200)
        assert tot[("gadget[rounding_repair=true]", k)] == pytest.approx(b, rel=1e-12)
        assert tot[("gadget", k)] < b * (1 - 1e-3)
        assert tot[("random", k)] < b * (1 - 1e-3)


def test_the_bound_counts_only_jobs_that_arrived_and_grows_with_the_horizon():
    bounds = [_bound(3, h) for h in (1, 10, 50, 200)]
    assert bounds[0] >= 0 and np.all(np.diff(bounds) > 0)


@pytest.mark.parametrize("kw", [dict(arrival_rate=12.0), dict(num_servers=10), dict(gpu_scale=0.25, arrival_rate=6.0)])
def test_no_agent_scores_above_the_window_bound_and_it_is_below_the_other(kw):
    tot = _totals(["greedy", "random"], [7, 8], 60, **kw)
    for (agent, k), v in tot.items():
        w = _bound(k, 60, window=32, **kw)
        assert v <= w * (1 + 1e-12), (agent, k)
        assert w <= _bound(k, 60, **kw) * (1 + 1e-12)


def test_with_the_window_as_large_as_the_load_the_two_bounds_agree():
    for k in (3, 4):
        assert _bound(k, 100, window=10_000) == pytest.approx(_bound(k, 100), rel=1e-12)


@pytest.mark.parametrize("rate", [6.0, 12.0])
def test_on_the_paper_cluster_gadget_is_at_the_window_bound_at_high_loads(rate):
    """Above the default load GADGET with repair is below the bound without the window, but at the bound with it: GPUs and
    links never stop it from giving every visible job its cap, so it is optimal over the episode there too, and
    the whole gap to the looser bound is the window's."""
    g = "gadget[rounding_repair=true]"  # the repair option; Algorithm 2 as written is far below
    tot = _totals([g], [900], 60, arrival_rate=rate)
    assert tot[(g, 900)] == pytest.approx(_bound(900, 60, window=32, arrival_rate=rate), rel=1e-12)
    assert tot[(g, 900)] < _bound(900, 60, arrival_rate=rate) * (1 - 1e-3)


def test_on_a_cluster_short_of_gpus_gadget_falls_below_the_window_bound():
    """With 10 servers the GPUs bind (the window bound ignores them): GADGET is strictly below it."""
    tot = _totals(["gadget"], [900], 200, num_servers=10)
    assert tot[("gadget", 900)] < _bound(900, 200, window=32, num_servers=10) * (1 - 1e-2)


def test_admission_slots_on_a_hand_made_queue():
    """Window of one job, 2 GPUs, three jobs at slot 0 with budgets 4, 2, 6 worker-slots and 2 workers each: job 0
    runs slots 0-1, job 1 (visible once job 0 is done) can start at slot 2 and job 2 once both are done, at 3."""
    from clustergym.envs.ringallreduce.oracle import _admission_slots

    first = _admission_slots(np.zeros(3), np.array([4.0, 2.0, 6.0]), np.array([2.0, 2.0, 2.0]), gpus=2, window=1)
    assert first.tolist() == [0, 2, 3]
    # with a window of two, job 2 needs one of the others done: job 1 (budget 2 at 2 workers) by slot 1
    first = _admission_slots(np.zeros(3), np.array([4.0, 2.0, 6.0]), np.array([2.0, 2.0, 2.0]), gpus=2, window=2)
    assert first.tolist() == [0, 0, 1]
    with pytest.raises(ValueError, match="gpus=0"):  # no GPUs: no job would ever leave, refused instead of a hang
        _admission_slots(np.zeros(3), np.ones(3), np.ones(3), gpus=0, window=1)


@pytest.mark.parametrize("kw", [dict(num_servers=4, arrival_rate=2.0), dict(scenario="gpu-short")])
def test_no_agent_scores_above_the_admission_bound_and_it_is_below_the_window_bound(kw):
    """The bound that counts the GPUs and the window together holds for every agent, is never above the window
    bound, and is below it where the window keeps out jobs the GPUs could not have served anyway (4 servers: 13 and
    15 GPUs for a 32-job window)."""
    from clustergym.envs.ringallreduce.oracle import admission_bound

    agents = ["srpt[workers=5,row_value=30]", "las[thresholds=continuous,workers=3]", "greedy", "random"]
    tot = _totals(agents, [7, 8], 60, **kw)
    below = []
    for k in (7, 8):
        u = gym.make(ENV, scenario_seed=k, **kw).unwrapped
        b = admission_bound(u.scenario.truth, 60, int(np.sum(u.problem.topology.gpus)), u.problem.max_jobs)
        w = _bound(k, 60, window=u.problem.max_jobs, **kw)
        assert b <= w * (1 + 1e-12)
        below.append(b < w * (1 - 1e-6))
        for a in agents:
            assert tot[(a, k)] <= b * (1 + 1e-9) + 1e-6, (a, k)
    if kw.get("num_servers") == 4:
        assert all(below), "the admission part binds on this cluster"


def test_the_relaxations_allocation_keeps_its_constraints_and_scores_its_value():
    """The relaxation's x: at most the cluster's GPUs each slot, N_i per job and slot, B_i per job, nothing before a
    job's first possible slot in the window; its value is the envelope's at x's totals (at least the sigmoid's), and
    the admission bound is the smaller of it and the window bound."""
    from clustergym.envs.ringallreduce.dynamics import JOB_FIELDS
    from clustergym.envs.ringallreduce.oracle import (_admission_slots, _arrivals, _envelope, admission_bound,
                                                      admission_relaxation)
    from clustergym.envs.ringallreduce.scenario import sigmoid_utility

    col = {k: i for i, k in enumerate(JOB_FIELDS)}
    u = gym.make(ENV, scenario_seed=7, num_servers=4, arrival_rate=2.0).unwrapped
    gpus, window, T = int(np.sum(u.problem.topology.gpus)), u.problem.max_jobs, 60
    value, x = admission_relaxation(u.scenario.truth, T, gpus, window)
    jobs = _arrivals(u.scenario.truth, T)
    arrival, workers, budget = (jobs[:, col[k]] for k in ("arrival", "workers", "budget"))
    assert x.shape == (jobs.shape[0], T) and x.min() >= -1e-9
    assert np.all(x.sum(axis=0) <= gpus + 1e-6) and np.all(x <= workers[:, None] + 1e-6)
    assert np.all(x.sum(axis=1) <= budget + 1e-6)
    first = _admission_slots(arrival, budget, workers, gpus, window)
    assert all(np.all(x[i, :first[i]] <= 1e-9) for i in range(jobs.shape[0]))
    assert np.any(first > arrival), "the window delays some job on this cluster"
    z = x.sum(axis=1)
    lam = tuple(jobs[:, col[k]] for k in ("lam1", "lam2", "lam3"))
    zeta = jobs[:, col["zeta"]]
    zmax = np.minimum(budget, workers * np.maximum(T - first, 0)).astype(np.int64)
    env_value = 0.0
    for i in range(jobs.shape[0]):
        grid = sigmoid_utility(zeta[i] * np.arange(zmax[i] + 1.0), *(v[i] for v in lam)) - sigmoid_utility(
            0.0, *(v[i] for v in lam))
        if zmax[i] > 0:
            slope, icpt = _envelope(grid)
            env_value += float(np.min(slope * z[i] + icpt))
    assert value == pytest.approx(env_value, rel=1e-6)
    sig = float(np.sum(sigmoid_utility(zeta * z, *lam) - sigmoid_utility(0.0, *lam)))
    assert sig <= value * (1 + 1e-9)
    assert admission_bound(u.scenario.truth, T, gpus, window) == pytest.approx(
        min(value, run_upper_bound(u.scenario.truth, T, window)), rel=1e-12)
