"""Action modes: the paper's fine-grained action without zero-width bounds, and the compact modes
(P2 ``"port"`` / ``"port_device"``, P4 ``"job"``) that the env completes by a stated rule. The best simple
baseline expressed in a compact mode gives the baseline's own total, so the mode caps no learner below it."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import clustergym  # noqa: F401
from clustergym.core.agent import make
from clustergym.envs.multiserver.allocation.actions import PortFill, drf_order
from clustergym.envs.multiserver.allocation.dynamics import AllocationDynamics
from clustergym.learning.pipeline import box_bounds
from clustergym.learning.wrappers import RescaleBox, action_bounds
from tests.helpers import deep_equal

P2 = "clustergym/MultiServerAllocation-v0"
P2_MODES = ["port", "port_device"]


def p2(mode="channel", **kw):
    return gym.make(P2, action_mode=mode, oracle=False, **kw).unwrapped


# -- P2, the paper's action: no zero-width entries ---------------------------------------------------------
def test_p2_channel_box_has_no_zero_width_entry_and_standard_wrappers_work():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = gym.make(P2, oracle=False, horizon=20)
        check_env(env.unwrapped)
    assert not [w for w in caught if "maximum and minimum values are equal" in str(w.message)]
    u = env.unwrapped
    a = u.problem.edge_demand
    assert (a == 0).any()  # the instance has entries without a request: the case at hand
    sp = env.action_space
    assert np.all(sp.high > sp.low)
    lo, hi = u.action_bounds()
    assert np.array_equal(hi, np.where(a > 0, a, 1.0)) and np.all(lo == 0)
    # gymnasium's own RescaleAction (it divides by high − low) now works, and agrees with RescaleBox
    wrapped = gym.wrappers.RescaleAction(gym.make(P2, oracle=False, horizon=20), -1.0, 1.0)
    mine = RescaleBox(gym.make(P2, oracle=False, horizon=20))
    wrapped.reset(seed=3)
    mine.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(5):
        z = rng.uniform(-1, 1, size=sp.shape).astype(np.float32)
        r1, i1 = wrapped.step(z)[1::3]
        r2, i2 = mine.step(z)[1::3]
        assert np.isfinite(r1) and r1 == pytest.approx(r2, rel=1e-6)
        assert np.all(i1["feedback"]["allocation"][a == 0] == 0)


def test_p2_ignored_entries_change_nothing():
    """Values on entries with a_l^k = 0 are ignored: same reward, allocation and repair count as with zeros."""
    env_a, env_b = p2(horizon=40), p2(horizon=40)
    env_a.reset(seed=1)
    env_b.reset(seed=1)
    closed = env_a.problem.edge_demand == 0
    env_a.action_space.seed(4)
    for t in range(30):
        y = env_a.action_space.sample()
        if t % 2:  # feasible on the requested entries
            y = np.where(closed, y, 0.3 * env_a.problem.edge_demand / 4).astype(np.float32)
        assert (y[closed] > 0).any()
        z = np.where(closed, 0.0, y).astype(np.float32)
        sa, sb = env_a.step(y), env_b.step(z)
        assert sa[1] == sb[1]
        assert sa[4]["metrics"]["repaired"] == sb[4]["metrics"]["repaired"]
        assert np.array_equal(sa[4]["feedback"]["allocation"], sb[4]["feedback"]["allocation"])
        assert np.all(sa[4]["feedback"]["allocation"][closed] == 0)
    with pytest.raises(ValueError, match="NaN"):  # NaN is refused everywhere, ignored entries included
        y = np.zeros(env_a.action_space.shape)
        y[np.argwhere(closed)[0][0], np.argwhere(closed)[0][1]] = np.nan
        env_a.step(y)


@pytest.mark.parametrize("agent", ["ogasched", "drf", "fairness", "binpacking", "spreading", "random"])
def test_p2_paper_agents_totals_unchanged(agent):
    """Each agent's action, as sent, gives the same reward in the env as in the dynamics alone (the env
    before entries with a_l^k = 0 were ignored), at every slot: the same totals as before."""
    env = p2(horizon=120)
    ref = AllocationDynamics(env.problem)
    ag = make(agent, family=env.family)
    obs, info = env.reset(seed=2)
    ag.reset(env.problem, seed=2)
    closed = env.problem.edge_demand == 0
    total = ref_total = 0.0
    for _ in range(120):
        x = obs["arrivals"].astype(bool)
        y = np.asarray(ag.act(obs, {k: v for k, v in info.items() if k != "metrics"}), dtype=np.float64)
        assert np.all(y[closed] == 0)
        expected = float(ref.step(np.ascontiguousarray(y), x).port_reward.sum())
        obs, r, _, _, info = env.step(y)
        ag.update(obs, y, r, obs, {k: v for k, v in info.items() if k != "metrics"})
        assert r == expected
        total += r
        ref_total += expected
    assert total == ref_total > 0


@pytest.mark.parametrize("mode", ["channel", *P2_MODES])
@pytest.mark.parametrize("padded", [False, True])
def test_p2_bounds_agree_across_env_wrapper_and_drl_hook(mode, padded):
    kw = {"max_edges": 400} if padded else {}
    env = p2(mode, horizon=10, **kw)
    lo, hi = env.action_bounds()
    w_lo, w_hi = action_bounds(gym.make(P2, action_mode=mode, oracle=False, horizon=10, **kw))
    h_lo, h_hi = box_bounds(env.family, env.problem, pad=kw or None)
    for a, b in [(lo, w_lo), (lo, h_lo), (hi, w_hi), (hi, h_hi)]:
        assert a.dtype == b.dtype == np.float64 and np.array_equal(a, b)
    sp = env.action_space
    assert lo.shape == sp.shape and np.all(hi > lo)
    assert np.allclose(sp.high, hi, rtol=1e-6) and np.array_equal(sp.low, lo.astype(np.float32))
    if mode != "channel":
        assert sp.shape == ((10,) if mode == "port" else (10, 6)) and np.all(hi == 1)


# -- P2, compact modes -----------------------------------------------------------------------------------
def fill_reference(pb, u, x):
    """The port modes' rule in plain Python: requests d = u a on the channels of ports with a job; on each
    (r, k) the ports in DRF order take min(d, what is left)."""
    u = np.broadcast_to(u[:, None] if u.ndim == 1 else u, (pb.num_ports, pb.num_device_types))
    rank = drf_order(pb)
    y = np.zeros((pb.num_edges, pb.num_device_types))
    for r in range(pb.num_servers):
        edges = sorted(np.flatnonzero(pb.edge_server == r), key=lambda e: rank[pb.edge_port[e]])
        for k in range(pb.num_device_types):
            left = pb.capacity[r, k]
            for e in edges:
                l = pb.edge_port[e]
                d = u[l, k] * pb.demand[l, k] if x[l] else 0.0
                y[e, k] = min(d, max(left, 0.0))
                left -= d
    return y


@pytest.mark.parametrize("mode", P2_MODES)
def test_p2_port_modes_follow_the_stated_rule(mode):
    env = p2(mode, horizon=30)
    pb = env.problem
    fill = PortFill(pb)
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(1)
    for t in range(20):
        u = rng.random(env.action_space.shape)
        if t % 4 == 0:
            u[rng.random(u.shape) < 0.3] = 0.0
        x = obs["arrivals"].astype(bool)
        obs, r, _, _, info = env.step(u)
        y = info["feedback"]["allocation"]
        assert np.allclose(y, fill_reference(pb, u, x), rtol=1e-12, atol=1e-12)
        assert np.array_equal(y, fill.fill_numpy(u[None], x[None])[0])  # the compiled kernel = the numpy rule
        assert info["metrics"]["repaired"] == 0  # in Y by construction (eqs. 3–4)
        assert np.all(y[~x[pb.edge_port]] == 0)  # ports without a job get nothing
        request = ((u[:, None] if u.ndim == 1 else u) * pb.demand)[pb.edge_port]  # (E, K) d = u a
        assert np.all(y <= request)
    env.reset(seed=0)
    assert env.step(np.zeros(env.action_space.shape))[1] == 0.0


@pytest.mark.parametrize("mode", P2_MODES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_p2_drf_expressed_in_port_modes_gives_drf_total(mode, seed):
    """DRF (the best simple baseline on P2) is the all-ones request in both port modes, slot by slot."""
    horizon = 150
    fine, compact = p2(horizon=horizon, scenario_seed=seed), p2(mode, horizon=horizon, scenario_seed=seed)
    drf = make("drf", family=fine.family)
    obs, info = fine.reset(seed=seed)
    compact.reset(seed=seed)
    drf.reset(fine.problem, seed=seed)
    ones = np.ones(compact.action_space.shape, dtype=np.float32)
    totals = [0.0, 0.0]
    for _ in range(horizon):
        obs, r1, _, _, i1 = fine.step(drf.act(obs, info))
        r2, i2 = compact.step(ones)[1::3]
        assert np.array_equal(i1["feedback"]["allocation"], i2["feedback"]["allocation"])
        totals[0] += r1
        totals[1] += r2
    assert totals[0] == totals[1] > 0


@pytest.mark.parametrize("mode", P2_MODES)
def test_p2_fractions_outside_unit_interval_repaired_or_raised(mode):
    env = p2(mode, horizon=10)
    env.reset(seed=0)
    u = np.full(env.action_space.shape, 0.5)
    u.flat[0], u.flat[-1] = 1.5, -0.2
    clipped = np.clip(u, 0.0, 1.0)
    ref = p2(mode, horizon=10)
    ref.reset(seed=0)
    r, info = env.step(u)[1::3]
    r_ref = ref.step(clipped)[1]
    assert r == r_ref and info["metrics"]["repaired"] == 2
    strict = p2(mode, horizon=10, infeasible="raise")
    strict.reset(seed=0)
    with pytest.raises(ValueError, match="outside"):
        strict.step(u)
    for bad in (np.full(env.action_space.shape, np.nan), np.zeros(3)):
        with pytest.raises(ValueError):
            env.step(bad)


@pytest.mark.parametrize("mode", P2_MODES)
def test_p2_port_modes_action_does_not_depend_on_the_instance(mode):
    """The port modes' action space is the same on every instance and with or without padding; a padded
    env switches instances as the channel mode does (the observation needs the padding)."""
    spaces_ = [p2(mode, horizon=10, scenario_seed=k, **kw).action_space for k in (0, 5) for kw in ({}, {"max_edges": 400})]
    assert all(sp == spaces_[0] for sp in spaces_)
    env = p2(mode, horizon=10, max_edges=400)
    other = p2(mode, horizon=10, scenario_seed=5, max_edges=400)
    a = env.reset(seed=1, options={"scenario_seed": 5})
    b = other.reset(seed=1)
    assert deep_equal(a, b)
    u = np.full(env.action_space.shape, 0.7)
    assert deep_equal(env.step(u), other.step(u))


@pytest.mark.parametrize("mode", P2_MODES)
@pytest.mark.parametrize("kw", [{}, {"max_edges": 400, "instances": range(3)}], ids=["one", "pool"])
def test_p2_vector_env_port_modes_replay_single_env(mode, kw):
    N, horizon = 4, 25
    vec = gym.make_vec(P2, num_envs=N, vectorization_mode="vector_entry_point", action_mode=mode, oracle=False,
                       horizon=horizon, **kw)
    singles = [p2(mode, horizon=horizon, **kw) for _ in range(N)]
    obs, _ = vec.reset(seed=3)
    for i, s in enumerate(singles):
        s.reset(seed=3 + i)
    rng = np.random.default_rng(0)
    ended = np.zeros(N, dtype=bool)
    repaired = 0
    for t in range(2 * horizon + 2):
        u = rng.uniform(-0.1, 1.1, size=(N, *vec.single_action_space.shape))  # some entries repaired
        obs, reward, term, trunc, info = vec.step(u)
        for i, s in enumerate(singles):
            if ended[i]:
                s_obs, _ = s.reset()
                s_r = 0.0
            else:
                s_obs, s_r, _, _, s_info = s.step(u[i])
                assert np.array_equal(info["feedback"]["allocation"][i], s_info["feedback"]["allocation"])
                assert info["metrics"]["repaired"][i] == s_info["metrics"]["repaired"]
                repaired += s_info["metrics"]["repaired"]
            assert reward[i] == s_r
            assert deep_equal({k: v[i] for k, v in obs.items()}, s_obs)
        ended = term | trunc
    assert repaired > 0


# -- P4, the "job" mode -----------------------------------------------------------------------------------
P4 = "clustergym/ApproxJobs-v0"


def p4(mode="machine", **kw):
    return gym.make(P4, action_mode=mode, **kw).unwrapped


def fair_in_index_order(env, seed):
    """The ``fair`` baseline with the machines in index order (the order the "job" mode deals them in)."""
    fair = make("fair", family=env.family)
    fair.reset(env.problem, seed=seed)
    fair.order = np.arange(env.problem.num_machines)
    return fair


@pytest.mark.parametrize("kw", [{}, {"num_machines": 37, "max_jobs": 6, "arrival_rate": 0.08},
                                {"num_machines": 37, "max_jobs": 6, "arrival_rate": 0.08, "budget_low": 0.5,
                                 "budget_high": 30.0}], ids=["default", "busy", "tight"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_p4_fair_expressed_in_job_mode_gives_fair_total(seed, kw):
    """Fair (the best simple baseline on P4) is the all-S level in "job" mode: the same machine
    assignment at every slot, so the same total."""
    horizon = 600
    fine, compact = p4(horizon=horizon, scenario_seed=seed, **kw), p4("job", horizon=horizon, scenario_seed=seed, **kw)
    fair = fair_in_index_order(fine, seed)
    obs, info = fine.reset(seed=seed)
    compact.reset(seed=seed)
    top = np.full(compact.action_space.shape, compact.action_space.nvec[0] - 1)
    totals, busy, several = [0.0, 0.0], 0, 0
    for _ in range(horizon):
        several += int(obs["job_mask"].sum() > 1)
        obs, r1, te1, tr1, i1 = fine.step(fair.act(obs, {k: v for k, v in info.items() if k != "metrics"}))
        _, r2, te2, tr2, i2 = compact.step(top)
        assert np.array_equal(i1["feedback"]["slot"], i2["feedback"]["slot"])
        assert (r1, te1, tr1) == (r2, te2, tr2) and i2["metrics"]["repaired"] == 0
        totals[0] += r1
        totals[1] += r2
        busy += i1["metrics"]["busy"]
        if te1 or tr1:
            break
    assert totals[0] == totals[1] > 0
    assert busy > 0 and several > 0  # slots with several jobs: the round-robin deal was exercised


def deal_reference(price, rem, live, cap):
    """The "job" mode's deal in plain Python: machines in index order dealt round-robin, level by level, to
    the live jobs below their cap (fewest machines first); each keeps the affordable prefix of its deal;
    the rest is dealt again among the jobs that paid for all they were dealt and are below their cap."""
    M = price.size
    action = np.zeros(M, dtype=np.int64)
    count = {j: 0 for j in live}
    rem = {j: rem[j] for j in live}
    pool, jobs = list(range(M)), [j for j in live if cap[j] > 0]
    while pool and jobs:
        jobs.sort(key=lambda j: count[j])  # stable
        seq = [j for level in range(1, len(pool) + 1) for j in jobs if cap[j] - count[j] >= level][:len(pool)]
        dealt = {j: [] for j in jobs}
        for m, j in zip(pool, seq):
            dealt[j].append(m)
        kept, short = set(), set()
        for j in jobs:
            spent = 0.0
            for m in dealt[j]:
                if spent + price[m] <= rem[j] + 1e-9 and j not in short:
                    spent += price[m]
                    kept.add(m)
                    action[m] = j + 1
                    count[j] += 1
                else:
                    short.add(j)
            rem[j] -= spent
        pool = [m for m in pool if m not in kept]
        jobs = [j for j in jobs if j not in short and count[j] < cap[j]]
    return action


@pytest.mark.parametrize("budget", [{}, {"budget_low": 0.5, "budget_high": 30.0}], ids=["paper", "tight"])
def test_p4_job_mode_follows_the_stated_rule(budget):
    """Level s caps a job at round(s·M/S) machines; the machine assignment is the stated deal, computed
    from the observation alone (with tight budgets, jobs run short and their machines are dealt again);
    no job overspends; nothing is repaired."""
    M = 37
    env = p4("job", horizon=400, num_machines=M, max_jobs=6, arrival_rate=0.08, **budget)
    obs, info = env.reset(seed=4)
    S = env.action_space.nvec[0] - 1
    price = np.asarray(env.problem.price, dtype=np.float64)
    rng = np.random.default_rng(0)
    several = 0
    for _ in range(400):
        levels = rng.integers(0, S + 1, size=env.action_space.shape)
        mask = info["action_mask"].reshape(-1, S + 1)
        assert np.array_equal(mask[:, 1:].any(axis=1), mask[:, 1:].all(axis=1))  # live: every level
        rem = np.where(obs["job_mask"] == 1, obs["jobs"][:, 3] - obs["jobs"][:, 4], -1.0)
        live = np.flatnonzero((obs["job_mask"] == 1) & (rem >= price.min() - 1e-9))
        assert np.array_equal(np.flatnonzero(mask[:, 1]), live)
        cap = np.floor(levels * M / S + 0.5).astype(np.int64)
        expected = deal_reference(price, rem, live, cap)
        obs, _, te, tr, info = env.step(levels)
        slot = info["feedback"]["slot"]  # (M,) window slot of each machine, 0 = idle
        assert np.array_equal(slot, expected)
        spent = np.bincount(slot, weights=price * (slot > 0), minlength=levels.size + 1)[1:]
        assert np.all(spent[live] <= rem[live] + 1e-9)
        assert info["metrics"]["repaired"] == 0
        several += int(((np.bincount(slot, minlength=levels.size + 1)[1:] > 0).sum()) > 1)
        if te or tr:
            break
    assert several > 20


def test_p4_compiled_deal_equals_the_numpy_deal():
    """The env's compiled deal (``deal_kernel``) gives the action of ``deal_machines`` with caps, on random
    cases with ties (rounded prices and budgets), random machine orders and caps from 0 to above M."""
    from clustergym.envs.approxjobs.kernels import deal_kernel, deal_machines

    rng = np.random.default_rng(0)
    served = 0
    for it in range(3000):
        M, J = int(rng.integers(1, 40)), int(rng.integers(1, 8))
        price = rng.uniform(0.1, 2.0, M)
        rem = rng.uniform(0, 3 * price.sum() / J, J)
        if it % 3 == 0:
            price, rem = np.round(price, 1), np.round(rem, 1)
        cap = rng.integers(0, M + 3, J)
        live = np.flatnonzero(rng.random(J) < 0.7)
        live = live[cap[live] > 0]
        order = rng.permutation(M) if it % 2 else np.arange(M)
        a = deal_machines(order, price, rem, live, cap)
        assert np.array_equal(a, deal_kernel(order, price, rem, live, cap, np.zeros(M, dtype=np.int64))), it
        served += int((a > 0).sum())
    assert served > 10_000


def test_p4_job_mode_rejects_bad_levels_and_masks_for_maskable_ppo():
    env = p4("job", horizon=20)
    _, info = env.reset(seed=0)
    S = env.action_space.nvec[0] - 1
    assert env.action_space.shape == (env.problem.max_jobs,)
    assert info["action_mask"].shape == (env.problem.max_jobs * (S + 1),)
    assert np.array_equal(env.action_masks(), info["action_mask"])
    from clustergym.learning.pipeline import sb3_mask

    assert np.array_equal(sb3_mask(env.family, info), info["action_mask"])
    for bad in (np.full(env.action_space.shape, S + 1), np.full(env.action_space.shape, -1), np.zeros(3, int)):
        with pytest.raises(ValueError):
            env.step(bad)
    assert env.problem.action_mode == "job"


def test_p4_and_p2_parallel_envs_refuse_the_compact_modes():
    from clustergym.envs.multiagent import parallel_env

    for env_id, mode in [(P4, "job"), (P2, "port")]:
        with pytest.raises(ValueError, match="action_mode"):
            parallel_env(env_id, action_mode=mode)


# -- trained models act in their mode --------------------------------------------------------------------
@pytest.mark.parametrize("env_id,mode,algo,paper", [(P2, "port", "ppo", "ogasched"), (P2, "port_device", "sac", "drf"),
                                                    (P4, "job", "maskable_ppo", "fair")],
                         ids=["P2-port-ppo", "P2-port_device-sac", "P4-job-maskable_ppo"])
def test_model_trained_in_a_compact_mode_acts_in_it_beside_agents_that_keep_theirs(env_id, mode, algo, paper, tmp_path):
    """``action_mode`` is a ``FamilySpec.action_kwargs``: the runner gives a model's env the mode it trained
    in (its side-car), the ``sb3:`` agent maps its actions into that mode's bounds, and the other agents of
    the comparison keep the paper's action."""
    pytest.importorskip("stable_baselines3")
    if algo == "maskable_ppo":
        pytest.importorskip("sb3_contrib")
    from clustergym.cli.main import main

    small = {P2: ["--set", "num_servers=16"], P4: ["--set", "num_machines=10", "--set", "max_jobs=5"]}[env_id]
    kw = {P2: {"num_servers": 16}, P4: {"num_machines": 10, "max_jobs": 5}}[env_id]
    run = tmp_path / "run"
    assert main(["train", env_id, "--algo", algo, "--set", f'action_mode="{mode}"', *small, "--instances", "10-11",
                 "--timesteps", "64", "--horizon", "16", "--n-envs", "2", "--hp", "batch_size=32",
                 *(["--hp", "n_steps=32", "--hp", "n_epochs=1"] if "ppo" in algo else ["--hp", "learning_starts=16"]),
                 "--no-progress", "--out", str(run)]) == 0
    model = f"sb3:{run}/model.zip"
    mixed = clustergym.evaluate(env_id, [model, paper], [0, 1], 16, env_kwargs=kw, workers=1, progress=False,
                                score=False, instances=[0, 1])
    alone = clustergym.evaluate(env_id, [model], [0, 1], 16, env_kwargs={**kw, "action_mode": mode}, workers=1,
                                progress=False, score=False, instances=[0, 1])
    assert [r.total_reward for r in mixed.runs if r.agent == model] == [r.total_reward for r in alone.runs]
    own = clustergym.evaluate(env_id, [paper], [0, 1], 16, env_kwargs=kw, workers=1, progress=False, score=False,
                              instances=[0, 1])
    assert [r.total_reward for r in mixed.runs if r.agent == paper] == [r.total_reward for r in own.runs]
