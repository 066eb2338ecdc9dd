"""ApproxJobs-v0 (P4, opm.md §III/§VI): scenario, service process, budgets, feedback and metrics."""

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import clustergym  # noqa: F401
from clustergym.core.agent import make, public_info
from clustergym.envs.approxjobs.dynamics import JOB_FEATURES
from clustergym.envs.approxjobs.scenario import make_approx_scenario, offline_single_optimum
from clustergym.envs.approxjobs.service import ServiceModel, ServiceProcess

ENV = "clustergym/ApproxJobs-v0"
SMALL = dict(num_machines=12, max_jobs=4, arrival_rate=0.05, life_min=5, life_max=40)


def test_paper_scale_preset_and_defaults():
    env = gym.make(ENV, scale="paper").unwrapped
    assert (env.problem.num_machines, env.problem.max_jobs, env.horizon) == (1000, 100, 50_000)
    p = env.scenario.params
    assert (p["budget_low"], p["budget_high"], p["value_low"], p["value_high"]) == (2.0, 100.0, 1.0, 5.0)
    tr = env.scenario.truth
    np.testing.assert_allclose(env.problem.price, 2.0 * tr.mean_rate)  # §VI: price = 2 × mean rate
    jb = tr.jobs
    q = jb.budget / (jb.deadline - jb.arrival)
    assert q.min() >= 2.0 and q.max() <= 100.0  # B_j = q_j (d_j − a_j), q ~ U[2, 100]
    small = gym.make(ENV).unwrapped
    assert (small.problem.num_machines, small.horizon) == (100, 2000)


@pytest.mark.parametrize("kw, name", [(dict(beta=1.5), "beta"), (dict(load=0.0), "load"),
                                      (dict(num_machines=0), "num_machines"), (dict(service="markov"), "service"),
                                      (dict(bogus=1), "bogus"), (dict(arrivals="philly"), "trace_path"),
                                      (dict(scale="huge"), "scale")])
def test_bad_scenario_parameters_are_named(kw, name):
    with pytest.raises(ValueError, match=name):
        gym.make(ENV, **kw)


def test_light_load_keeps_about_half_the_jobs():
    heavy = make_approx_scenario("paper", seed=3, horizon=20_000, load=1.0).truth.jobs
    light = make_approx_scenario("paper", seed=3, horizon=20_000, load=0.5).truth.jobs
    assert 0.4 < len(light) / len(heavy) < 0.6


def test_gamma_service_process_matches_section_vi():
    m = ServiceModel()
    speed = np.ones(400)
    proc = ServiceProcess(m, speed, np.random.default_rng(1))
    states = np.concatenate([proc.states(256) for _ in range(40)])  # (10240, 400)
    assert abs(states.mean() - m.p_available) < 0.02  # π_A = 32.08 / (32.08 + 7.58)
    # strongly correlated in time (long periods), unlike i.i.d. slots
    same = (states[1:] == states[:-1]).mean()
    assert same > 0.9
    rates = ServiceProcess(m, speed, np.random.default_rng(2)).block(256)
    assert rates.min() >= 0.0 and rates.max() <= 1.0
    avail = ServiceProcess(m, speed, np.random.default_rng(2)).states(256)
    assert rates[avail].min() >= 0.7 and rates[~avail].max() <= 0.1  # U[0.7,1] in APs, U[0,0.1] in UPs


def test_service_process_is_reproducible_per_seed():
    m, speed = ServiceModel(), np.linspace(0.3, 1, 50)
    a = [ServiceProcess(m, speed, np.random.default_rng(5)).block(300) for _ in range(2)]
    np.testing.assert_array_equal(a[0], a[1])
    c = ServiceProcess(m, speed, np.random.default_rng(6)).block(300)
    assert not np.array_equal(a[0], c)


def test_iid_service_mean_matches_theta():
    m = ServiceModel(kind="iid")
    speed = np.array([0.3, 0.6, 1.0])
    r = ServiceProcess(m, speed, np.random.default_rng(0)).block(40_000)
    np.testing.assert_allclose(r.mean(axis=0), m.unit_mean * speed, rtol=0.02)


def _run(env, agent_name, seed, steps):
    agent = make(agent_name, family="approxjobs")
    obs, info = env.reset(seed=seed)
    agent.reset(env.problem, seed=seed)
    log = []
    for _ in range(steps):
        theta = env._rates().copy()  # hidden θ^t of the slot about to run (read-only peek)
        a = agent.act(obs, public_info(info))
        nxt, r, term, trunc, info = env.step(a)
        agent.update(obs, a, r, nxt, public_info(info))
        log.append((theta, info["feedback"], r, info["metrics"]))
        obs = nxt
        if term or trunc:
            break
    return log


def test_every_agent_sees_the_same_rates_and_jobs():
    env1, env2 = gym.make(ENV, **SMALL).unwrapped, gym.make(ENV, **SMALL).unwrapped
    l1, l2 = _run(env1, "opm", 4, 300), _run(env2, "fair", 4, 300)
    assert len(l1) == len(l2) == 300
    for (th1, fb1, *_), (th2, fb2, *_) in zip(l1, l2):
        np.testing.assert_array_equal(th1, th2)
        np.testing.assert_array_equal(fb1["work"], np.where(fb1["executed"], th1, 0.0))  # r = θ^t x (eq. 1)
        np.testing.assert_array_equal(fb2["work"], np.where(fb2["executed"], th2, 0.0))
    j1, j2 = env1.scenario.truth.jobs, env2.scenario.truth.jobs
    for f in ("arrival", "deadline", "budget", "value", "beta"):
        np.testing.assert_array_equal(getattr(j1, f), getattr(j2, f))
    r1, r2 = env1.job_records(), env2.job_records()
    np.testing.assert_array_equal(r1["arrival"], r2["arrival"])
    assert not np.array_equal(r1["work"], r2["work"])  # the agents did act differently
    # another seed gives other rates
    l3 = _run(gym.make(ENV, **SMALL).unwrapped, "fair", 5, 50)
    assert not all(np.array_equal(a[0], b[0]) for a, b in zip(l1[:50], l3))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), M=st.integers(1, 9), J=st.integers(1, 5), beta=st.floats(0.3, 1.0),
       budget_high=st.floats(2.0, 30.0))
def test_property_budgets_one_task_per_machine_and_rewards_from_work_log(seed, M, J, beta, budget_high):
    env = gym.make(ENV, num_machines=M, max_jobs=J, beta=beta, arrival_rate=0.3, life_min=2, life_max=15,
                   budget_low=1.0, budget_high=budget_high, horizon=120, scenario_seed=seed).unwrapped
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    total, work = 0.0, {}
    spent = {}
    jobs = env.scenario.truth.jobs
    for _ in range(120):
        a = rng.integers(0, J + 1, size=M)  # arbitrary actions: the env repairs them
        obs, r, term, trunc, info = env.step(a)
        fb = info["feedback"]
        mach = np.flatnonzero(fb["executed"])  # eq. 3: one task per machine (one entry per machine)
        assert all(fb[k].shape == (M,) for k in ("executed", "slot", "job_id", "work", "cost"))
        assert np.all(a[mach] == fb["slot"][mach])  # only requested tasks run
        assert np.all(fb["slot"][~fb["executed"]] == 0) and np.all(fb["job_id"][~fb["executed"]] == -1)
        assert np.all(fb["work"][~fb["executed"]] == 0) and np.all(fb["cost"][~fb["executed"]] == 0)
        for j, w, c in zip(fb["job_id"][mach], fb["work"][mach], fb["cost"][mach]):
            work[int(j)] = work.get(int(j), 0.0) + float(w)
            spent[int(j)] = spent.get(int(j), 0.0) + float(c)
        for j, c in spent.items():
            assert c <= jobs.budget[j] + 1e-9  # eq. 4 never violated
        assert info["metrics"]["fit"] == 0.0
        total += r
        if term or trunc:
            break
    expected = sum(jobs.value[j] * w ** jobs.beta[j] for j, w in work.items())  # Σ_j f_j(X_j)
    assert total == pytest.approx(expected, rel=1e-9, abs=1e-9)
    assert info["metrics"]["episode_utility"] == pytest.approx(expected, rel=1e-9, abs=1e-9)


def test_masked_actions_are_never_repaired():
    env = gym.make(ENV, **SMALL).unwrapped
    rng = np.random.default_rng(0)
    obs, info = env.reset(seed=0)
    M, J = env.problem.num_machines, env.problem.max_jobs
    for _ in range(200):
        mask = info["action_mask"].reshape(M, J + 1)
        a = np.array([rng.choice(np.flatnonzero(row)) for row in mask])
        # one machine per job at most: a single allowed task always fits the remaining budget
        a[np.r_[False, a[1:] == a[:-1]] & (a > 0)] = 0
        _, seen = np.unique(a, return_index=True)
        keep = np.zeros(M, dtype=bool)
        keep[seen] = True
        a = np.where(keep, a, 0)
        obs, r, term, trunc, info = env.step(a)
        assert info["metrics"]["repaired"] == 0
    assert env.action_masks().shape == (M * (J + 1),)


def test_raise_mode_names_constraint_and_changes_nothing():
    env = gym.make(ENV, infeasible="raise", **SMALL).unwrapped
    obs, info = env.reset(seed=1)
    while not obs["job_mask"].any():
        obs, *_ = env.step(np.zeros(12, dtype=np.int64))
    empty = np.flatnonzero(obs["job_mask"] == 0)
    full = int(np.flatnonzero(obs["job_mask"])[0]) + 1
    t = env._t
    if empty.size:
        a = np.zeros(12, dtype=np.int64)
        a[0] = empty[0] + 1
        with pytest.raises(ValueError, match="holds no job"):
            env.step(a)
    env._slot_rem[full - 1] = env.problem.price.min() * 1.5  # almost no budget left: two tasks cannot fit
    with pytest.raises(ValueError, match="eq. 4"):
        env.step(np.full(12, full, dtype=np.int64))
    assert env._t == t


@pytest.mark.parametrize("bad", [np.zeros(11), np.full(12, np.nan), np.full(12, 99), np.full(12, -1), "x"])
def test_bad_actions_raise_with_space(bad):
    env = gym.make(ENV, **SMALL)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="MultiDiscrete|0..4"):
        env.step(bad)


def test_observation_reports_jobs_and_metrics_summaries():
    env = gym.make(ENV, horizon=300, **SMALL).unwrapped
    log = _run(env, "fair", 0, 300)
    m = log[-1][3]
    for k in ("episode_utility", "episode_budget_spent", "episode_fit", "episode_cost_to_utility_median",
              "episode_budget_used_median", "episode_migrations"):
        assert k in m
    rec = env.job_records()
    assert np.all(rec["spent"] <= rec["budget"] + 1e-9)
    assert m["episode_budget_spent"] == pytest.approx(rec["spent"].sum())
    assert len(JOB_FEATURES) == env.observation_space["jobs"].shape[1]


def test_migrations_count_tasks_moved_off_machines():
    env = gym.make(ENV, scenario="single", num_machines=4, horizon=10).unwrapped
    env.reset(seed=0)
    _, _, _, _, info = env.step(np.array([1, 1, 0, 0]))
    assert info["metrics"]["migrations"] == 0
    _, _, _, _, info = env.step(np.array([0, 1, 1, 0]))  # the task left machine 0
    assert info["metrics"]["migrations"] == 1
    _, _, _, _, info = env.step(np.array([0, 1, 1, 0]))
    assert info["metrics"]["migrations"] == 0


def test_single_job_offline_optimum_is_greedy_knapsack():
    sc = make_approx_scenario("single", seed=0, num_machines=3, horizon=10, budget_rate=1.0)
    pb, tr = sc.problem, sc.truth
    X = offline_single_optimum(sc)
    # brute force over how many slots each machine is used (fractional last item allowed by LP)
    best = 0.0
    for n0 in range(11):
        for n1 in range(11):
            for n2 in range(11):
                n = np.array([n0, n1, n2])
                if n @ pb.price <= tr.jobs.budget[0] + 1e-12:
                    best = max(best, float(n @ tr.mean_rate))
    assert best <= X + 1e-9
    assert X - best <= tr.mean_rate.max() + 1e-9


def _philly_fixture(path):
    rows = ["timestamp,duration,num_gpus,gpu_time,cluster"]
    for k in range(60):
        rows.append(f"2017-10-01 {k // 6:02d}:{(k * 7) % 60:02d}:00,{300 + 200 * k},1,1,c1")
    path.write_text("\n".join(rows) + "\n")
    return path


def test_philly_arrivals_from_a_fixture(tmp_path):
    p = _philly_fixture(tmp_path / "philly.csv")
    sc = make_approx_scenario("philly", seed=0, trace_path=str(p), horizon=100, slot_seconds=600.0,
                              arrival_rate=1.0, life_min=1, life_max=50, trace_start=0.0)
    jb = sc.truth.jobs
    assert len(jb) == 60
    assert jb.arrival.min() == 0 and np.all(np.diff(jb.arrival) >= 0)
    life = jb.deadline - jb.arrival
    assert life[0] == 1 and life.max() <= 50
    env = gym.make(ENV, scenario="philly", trace_path=str(p), horizon=100, arrival_rate=1.0, trace_start=0.0)
    env.reset(seed=0)


def test_philly_real_trace_if_present():
    import os

    path = "/work/shared/traces/philly-pollux/philly.csv"
    if not os.path.exists(path):
        pytest.skip("real Philly trace not present")
    env = gym.make(ENV, scenario="philly", trace_path=path, horizon=500).unwrapped
    assert len(env.scenario.truth.jobs) > 5


def test_window_and_queue_rules_at_the_deadline_and_budget_boundaries():
    """One window slot, two jobs arriving at a_j = 0: job 0 takes the slot; after slot 1 it cannot pay the
    cheapest price and leaves; job 1 (d_1 = 2) waited in the queue and still runs in its last slot 2; after
    slot 2 it leaves at its deadline and the episode terminates (every job has left)."""
    from clustergym.core.scenario import Scenario
    from clustergym.envs.approxjobs.scenario import ApproxProblem, ApproxTruth, JobList

    one = np.ones(2)
    jobs = JobList(arrival=np.array([0, 0]), deadline=np.array([4, 2]), budget=np.array([1.5, 10.0]),
                   value=one.copy(), beta=np.full(2, 0.5))
    sc = Scenario("window", ApproxProblem(num_machines=2, max_jobs=1, horizon=6, price=one.copy(), beta=0.5),
                  ApproxTruth(jobs=jobs, speed=one.copy(), mean_rate=one * 0.5, service=ServiceModel(kind="iid")), {})
    env = gym.make(ENV, scenario=sc).unwrapped
    obs, _ = env.reset(seed=0)
    assert obs["job_mask"].tolist() == [1] and obs["jobs"][0, 0] == 0  # job 0 in the window, job 1 queued
    obs, r, term, trunc, info = env.step(np.array([1, 1]))
    assert info["metrics"]["repaired"] == 1 and info["feedback"]["executed"].tolist() == [True, False]  # B = 1.5
    assert obs["job_mask"].tolist() == [1] and obs["jobs"][0, 0] == 1 and obs["jobs"][0, 2] == 2  # job 1 is in
    assert not term and r > 0
    obs, r, term, trunc, info = env.step(np.array([1, 1]))
    assert info["feedback"]["job_id"].tolist() == [1, 1] and r > 0  # job 1 ran in slot d_1 = 2
    assert term and not trunc and obs["job_mask"].tolist() == [0]
    rec = env.job_records()
    assert rec["left"].tolist() == [True, True] and rec["spent"].tolist() == [1.0, 2.0]
