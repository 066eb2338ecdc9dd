"""OPM, OPM-noest, OPS and the P4 baselines (opm.md §IV–VI)."""

import copy
import math
import pickle

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import clustergym  # noqa: F401
from clustergym.core.agent import list_agents, make, public_info
from clustergym.envs.approxjobs.kernels import budget_prefix, project_capped_simplex, round_rows, ucb_rates
from clustergym.envs.approxjobs.scenario import offline_single_optimum

ENV = "clustergym/ApproxJobs-v0"
SMALL = dict(num_machines=16, max_jobs=5, arrival_rate=0.05, life_min=10, life_max=60, horizon=400)
AGENTS = ["opm", "opm-noest", "ops", "fair", "edf", "random"]


def episode(agent_name, env_kw=None, seed=0, steps=None, agent=None):
    env = gym.make(ENV, **(env_kw or SMALL)).unwrapped
    agent = agent or make(agent_name, family="approxjobs")
    obs, info = env.reset(seed=seed)
    agent.reset(env.problem, seed=seed)
    total, repaired, actions = 0.0, 0, []
    for _ in range(steps or env.horizon):
        assert "metrics" not in public_info(info)
        a = agent.act(obs, public_info(info))
        actions.append(np.asarray(a).copy())
        nxt, r, term, trunc, info = env.step(a)
        agent.update(obs, a, r, nxt, public_info(info))
        total += r
        repaired += info["metrics"]["repaired"]
        obs = nxt
        if term or trunc:
            break
    return total, repaired, env, agent, actions


def test_registered_for_the_family():
    assert set(AGENTS) <= set(list_agents(ENV))


@pytest.mark.parametrize("name", list_agents(ENV))  # every registered P4 agent (AGENTS and any new one)
def test_agents_respect_budgets_without_repairs_and_are_deterministic(name):
    total, repaired, env, _, acts = episode(name)
    assert repaired == 0  # every agent enforces eq. 4 itself (Algorithm 1 lines 7-12)
    rec = env.job_records()
    assert np.all(rec["spent"] <= rec["budget"] + 1e-9)
    assert total > 0
    total2, _, _, _, acts2 = episode(name)
    assert total == total2 and all(np.array_equal(a, b) for a, b in zip(acts, acts2))


def test_theorem3_defaults_and_options():
    _, _, env, agent, _ = episode("opm", steps=1)
    M, T = env.problem.num_machines, env.problem.horizon
    assert agent.a_ == pytest.approx(1 / (2 * math.sqrt(T)))
    assert agent.mu_ == pytest.approx(math.sqrt(T) / M)
    assert agent.gamma_ == pytest.approx(math.log(M * T / 0.05))
    assert agent.eps_ == 0.0
    a = make("opm[alpha=0.5,mu=2,gamma=3,eps=0.1]", family="approxjobs")
    a.reset(env.problem, seed=0)
    assert (a.a_, a.mu_, a.gamma_, a.eps_) == (0.5, 2.0, 3.0, 0.1)
    with pytest.raises(ValueError, match="alpha"):
        make("opm[alpha=-1]", family="approxjobs")
    with pytest.raises(ValueError, match="progress"):
        make("opm[progress=magic]", family="approxjobs")


def test_opm_noest_keeps_constant_estimates_and_opm_learns_rates():
    kw = dict(SMALL, service="iid", horizon=1500, arrival_rate=0.03)
    _, _, env, noest, _ = episode("opm-noest", kw)
    assert np.all(noest.theta_hat() == 1.0)
    _, _, env, opm, _ = episode("opm", kw)
    th, theta = opm.theta_hat(), env.scenario.truth.mean_rate
    played = opm.plays > 200
    assert played.sum() >= 8
    # UCB (eq. 66): an upper confidence bound, and informative: it ranks machines like θ does.
    assert np.mean(th[played] >= theta[played]) > 0.9
    assert np.corrcoef(th[played], theta[played])[0, 1] > 0.8


def test_opm_dual_update_follows_eq_73_where_budgets_bind():
    """Eq. 73 checked on every slot of a run whose budgets bind (small q_j), so λ_j > 0 occurs."""
    kw = dict(SMALL, budget_low=0.5, budget_high=2.0)  # a job affords ≈ 1–2 of the 16 machines per slot
    env = gym.make(ENV, **kw).unwrapped
    agent = make("opm", family="approxjobs")  # Theorem 3's parameters
    obs, info = env.reset(seed=2)
    agent.reset(env.problem, seed=2)
    positive = 0
    for _ in range(150):
        lam, g1, g2 = agent.lam.copy(), agent.g1.copy(), agent.g2.copy()
        ids = agent.ids.copy()
        a = agent.act(obs, public_info(info))
        same = (agent.ids == ids) & (ids >= 0)
        feats = obs["jobs"]
        live = same & (feats[:, 3] - feats[:, 4] >= env.problem.price.min())
        expect = np.maximum(0.0, lam + 2 * agent.mu_ * g1 - agent.mu_ * g2)
        np.testing.assert_allclose(agent.lam[live], expect[live])
        positive += int((agent.lam[live] > 0).sum())
        # g_j(x_j(t)) = Σ_i p_i x_j^i(t) − (1−ε) B_j/(d_j − a_j) (eq. 64) for the new iterate
        target = feats[:, 3] / np.maximum(feats[:, 2] - feats[:, 1], 1)
        np.testing.assert_allclose(agent.g1[live], (env.problem.price @ agent.x - target)[live], rtol=1e-6, atol=1e-6)
        assert np.all(agent.x >= 0) and np.all(agent.x.sum(axis=1) <= 1 + 1e-6)  # P4 feasible (float32 iterate)
        nxt, r, term, trunc, info = env.step(a)
        agent.update(obs, a, r, nxt, public_info(info))
        obs = nxt
    assert positive >= 50  # the dual is active, not stuck at 0


def test_opm_gradient_step_is_eq_69_by_hand():
    """One OPM decision on a hand-made state: λ by eq. 73, y = x + α(θ̂_i f_j' − λ_j p_i) (eqs. 68–69),
    z = projection of each machine's row (P4). θ̂ differs across machines and λ > 0, so dropping
    either term of the gradient changes the result."""
    from clustergym.envs.approxjobs.scenario import ApproxProblem

    price = np.array([0.5, 1.0, 0.25])
    pb = ApproxProblem(num_machines=3, max_jobs=2, horizon=400, price=price, beta=0.5)
    ag = make("opm[alpha=0.5,mu=1,gamma=1,dtype=float64]", family="approxjobs")
    ag.reset(pb, seed=0)
    ag.plays[:] = [99.0, 99.0, 0.0]
    ag.work_sum[:] = [20.0, 60.0, 0.0]
    # eq. 66 by hand (γ = 1): θ̄ = 0.2, 0.6, 0; P = 100, 100, 1; rad = sqrt(θ̄/P) + 1/P
    th = np.array([0.2 + 2 * (np.sqrt(0.2 / 100) + 0.01), 0.6 + 2 * (np.sqrt(0.6 / 100) + 0.01), 1.0])
    np.testing.assert_allclose(ag.theta_hat(), th)
    ag.ids[:] = [0, 1]
    x0 = np.array([[0.2, 0.1], [0.0, 0.5], [0.3, 0.3]])
    ag.x[:] = x0
    ag.lam[:] = [0.5, 0.0]
    ag.g1[:] = [0.3, 0.2]
    ag.g2[:] = [0.1, -0.4]
    ag.W[:] = [30.0, 4.0]
    #                 job_id  a   d    B     spent  v    β    X
    jobs = np.array([[0.0, 0.0, 100.0, 100.0, 10.0, 2.0, 0.5, 25.0],
                     [1.0, 5.0, 50.0, 20.0, 5.0, 3.0, 0.5, 3.0]])
    obs = {"jobs": jobs, "job_mask": np.array([1, 1], dtype=np.int8), "t": np.array([20.0], dtype=np.float32)}
    ag.act(obs, {})
    lam = np.array([max(0.0, 0.5 + 2 * 0.3 - 0.1), max(0.0, 0.0 + 2 * 0.2 + 0.4)])  # eq. 73: 1.0, 0.8
    np.testing.assert_allclose(ag.lam, lam)
    # f_j' at the average estimated work per slot of age t−1−a_j = 20, 15: 30/20 = 1.5; 4/15 < 1 → floor 1
    fp = np.array([2.0 * 0.5 * 1.5 ** -0.5, 3.0 * 0.5 * 1.0 ** -0.5])
    y = x0 + 0.5 * (th[:, None] * fp[None, :] - lam[None, :] * price[:, None])  # eq. 69
    z = np.array([_project_reference(row) for row in y])  # P4
    np.testing.assert_allclose(ag.x, z, atol=1e-9)
    np.testing.assert_allclose(ag.g1, price @ z - jobs[:, 3] / (jobs[:, 2] - jobs[:, 1]))  # eq. 64
    np.testing.assert_allclose(ag.W, [30.0 + th @ z[:, 0], 4.0 + th @ z[:, 1]])  # eq. 68


def test_agent_copies_continue_identically():
    total, _, env, agent, _ = episode("opm", steps=50)
    env2, agent2 = pickle.loads(pickle.dumps(env)), copy.deepcopy(agent)
    obs = env._obs()
    info = {"action_mask": env.action_masks(), "t": env._t}
    for _ in range(30):
        a1, a2 = agent.act(obs, info), agent2.act(obs, info)
        np.testing.assert_array_equal(a1, a2)
        o1, r1, *_, i1 = env.step(a1)
        o2, r2, *_, i2 = env2.step(a2)
        assert r1 == r2
        agent.update(obs, a1, r1, o1, public_info(i1))
        agent2.update(obs, a2, r2, o2, public_info(i2))
        obs, info = o1, public_info(i1)


def test_fair_shares_machines_equally_and_edf_serves_earliest_deadline():
    kw = dict(num_machines=30, max_jobs=4, arrival_rate=0.2, life_min=50, life_max=200, horizon=60,
              budget_low=200.0, budget_high=300.0)  # large budgets: machines are the bottleneck
    env = gym.make(ENV, **kw).unwrapped
    for name in ("fair", "edf"):
        agent = make(name, family="approxjobs")
        obs, info = env.reset(seed=0)
        agent.reset(env.problem, seed=0)
        for _ in range(20):
            obs, *_ = env.step(agent.act(obs, info))
        mask = obs["job_mask"].astype(bool)
        assert mask.sum() >= 2
        a = agent.act(obs, info)
        counts = np.bincount(a, minlength=5)[1:][mask]
        if name == "fair":
            assert counts.max() - counts.min() <= 1 and counts.sum() == 30
        else:
            d = obs["jobs"][mask, 2]
            assert counts[np.argmin(d)] == counts.max() and counts.max() >= 15


def test_opm_with_default_parameters_beats_random_in_the_papers_regime():
    """Theorem 3's parameters, scale="paper" (1000 machines, ≈ 24 jobs at once, each affording a few
    % of the cluster) with the speed-factor extension (speed_low=0.3, the setting this test was
    written for before scale="paper" became identical machines), short horizon, three job
    lists: OPM beats random on every one. (At the small default scale it does not reliably, and on the
    paper's identical machines it loses to random: docs/opm.md.)"""
    for inst in range(3):
        kw = dict(scale="paper", speed_low=0.3, horizon=600, scenario_seed=inst)
        u = {n: episode(n, kw, seed=inst)[0] for n in ("opm", "random")}
        assert u["opm"] > u["random"], inst


def _ops_gap(T, seed):
    env = gym.make(ENV, scenario="single", horizon=T, service="iid").unwrapped
    total, repaired, env, _, _ = episode("ops", seed=seed, agent=make("ops", family="approxjobs"),
                                         env_kw=dict(scenario="single", horizon=T, service="iid"))
    jb = env.scenario.truth.jobs
    f = lambda x: jb.value[0] * x ** jb.beta[0]  # noqa: E731
    X_star = offline_single_optimum(env.scenario)  # eq. 7 benchmark (θ_i in place of θ_i^t)
    X = env.job_records()["work"][0]
    assert total == pytest.approx(f(X))
    assert repaired == 0 and env.job_records()["spent"][0] <= jb.budget[0] + 1e-9
    return T * f(X_star / T) - T * f(X / T), T * f(X_star / T)  # eq. 6


def test_ops_gap_to_offline_optimum_is_sublinear_in_T():
    Ts = (250, 1000, 4000)
    gaps, opts = zip(*[np.mean([_ops_gap(T, s) for s in (0, 1)], axis=0) for T in Ts])
    assert all(g > 0 for g in gaps)
    slope = np.polyfit(np.log(Ts), np.log(gaps), 1)[0]
    assert slope < 0.6  # a linear gap would have slope 1
    rel = np.array(gaps) / np.array(opts)
    assert rel[0] > rel[1] > rel[2]


# -- kernels ---------------------------------------------------------------------------------


def _project_reference(y):
    """Bisection on τ >= 0 for one row: z = max(y − τ, 0) with Σ z <= 1 (KKT of P4)."""
    z = np.maximum(y, 0)
    if z.sum() <= 1:
        return z
    lo, hi = 0.0, float(y.max())
    for _ in range(200):
        mid = (lo + hi) / 2
        if np.maximum(y - mid, 0).sum() > 1:
            lo = mid
        else:
            hi = mid
    return np.maximum(y - hi, 0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.floats(-3, 3), min_size=4, max_size=4), min_size=1, max_size=8))
def test_projection_matches_kkt_reference(rows):
    Y = np.array(rows)
    Z = project_capped_simplex(Y)
    assert np.all(Z >= 0) and np.all(Z.sum(axis=1) <= 1 + 1e-9)
    ref = np.array([_project_reference(y) for y in Y])
    np.testing.assert_allclose(Z, ref, atol=1e-7)


def test_rounding_is_unbiased_and_one_task_per_machine():
    rng = np.random.default_rng(0)
    Z = project_capped_simplex(rng.normal(0.2, 0.5, size=(5, 4)))
    n = 40_000
    counts = np.zeros((5, 5))
    for _ in range(n // 1000):
        k = np.stack([round_rows(Z, rng.random(5)) for _ in range(1000)])  # (1000, 5) values 0..4
        for i in range(5):
            counts[i] += np.bincount(k[:, i], minlength=5)
    freq = counts[:, 1:] / n
    np.testing.assert_allclose(freq, Z, atol=0.01)  # eq. 72: E[x̃] = x


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3), st.floats(0.1, 2.0)), max_size=15),
       st.lists(st.floats(0.0, 5.0), min_size=3, max_size=3))
def test_budget_prefix_matches_a_loop(tasks, rem):
    slot = np.array([s for s, _ in tasks], dtype=np.int64)
    cost = np.array([c for _, c in tasks])
    rem = np.array(rem)
    keep = budget_prefix(slot, cost, rem)
    spent, stopped, ref = np.zeros(3), np.zeros(3, bool), []
    for s, c in tasks:  # Algorithm 1 lines 7-12, job by job in machine order
        ok = not stopped[s - 1] and spent[s - 1] + c <= rem[s - 1] + 1e-9
        stopped[s - 1] |= not ok
        spent[s - 1] += c if ok else 0.0
        ref.append(ok)
    np.testing.assert_array_equal(keep, np.array(ref, dtype=bool))


def test_ucb_is_eq_66():
    th = ucb_rates(np.array([0.0, 50.0, 5.0]), np.array([0.0, 99.0, 9.0]), gamma=2.0)
    bar = np.array([0.0, 0.5, 0.5])
    P = np.array([1.0, 100.0, 10.0])
    rad = np.sqrt(2.0 * bar / P) + 2.0 / P
    np.testing.assert_allclose(th, np.minimum(1.0, bar + 2 * rad))


def test_experiment_module_is_discovered_and_episode_is_consistent():
    from clustergym.experiments import list_papers
    from clustergym.experiments.opm_runs import episode as exp_episode

    assert "opm" in list_papers()
    r = exp_episode(dict(SMALL, horizon=150), "fair", 0, records=True)
    assert r["total_reward"] == pytest.approx(sum(r["records"]["utility"]))
    assert r["budget_spent"] == pytest.approx(sum(r["records"]["spent"]))
    assert r["repaired"] == 0 and r["fit"] == 0.0


def test_coupled_rounding_keeps_jobs_on_machines_and_stays_unbiased():
    """eq. 72 with one uniform per machine per episode (``rounding="coupled"``): every slot's rounding
    is still unbiased (the uniform is uniform over seeds), and machines migrate far less often than
    with a fresh draw every slot (the default, the paper's text)."""
    assert make("opm", family="approxjobs").rounding == "per_slot"

    def migrations(spec):
        _, repaired, env, _, acts = episode(spec, steps=300)
        assert repaired == 0
        a = np.stack(acts)  # (T, M) window slot run by each machine, 0 = idle
        both = (a[1:] > 0) & (a[:-1] > 0)
        return float(np.mean(a[1:][both] != a[:-1][both]))

    per_slot, coupled = migrations("opm"), migrations("opm[rounding=coupled]")
    assert coupled < 0.5 * per_slot, (coupled, per_slot)
    # unbiased: over seeds, the coupled uniform of a machine falls in each job's share as often as Z says
    rng = np.random.default_rng(1)
    Z = project_capped_simplex(rng.normal(0.2, 0.5, size=(5, 4)))
    counts = np.zeros((5, 5))
    n = 4000
    env = gym.make(ENV, **SMALL).unwrapped
    ag = make("opm[rounding=coupled]", family="approxjobs")
    for seed in range(n):
        ag.reset(env.problem, seed=seed)
        k = round_rows(Z, ag.u[:5])
        counts[np.arange(5), k] += 1
    np.testing.assert_allclose(counts[:, 1:] / n, Z, atol=0.03)
    with pytest.raises(ValueError, match="rounding"):
        make("opm[rounding=sometimes]", family="approxjobs")
