"""PettingZoo ParallelEnv versions: API, seeding, reward split, no hidden truth, one core."""

from __future__ import annotations

import ast
import copy
import dataclasses
import inspect
import pickle
import warnings

import numpy as np
import pytest
from gymnasium import spaces
from pettingzoo.test import parallel_api_test, parallel_seed_test

from clustergym.envs.multiagent import PARALLEL_ENVS, parallel_env, parallel_env_ids
from clustergym.envs.multiserver.allocation.env import MultiServerAllocationEnv
from clustergym.envs.multiserver.channel.env import MultiServerChannelEnv
from clustergym.envs.approxjobs.env import ApproxJobsEnv
from clustergym.core.parallel import ClusterParallelEnv
from tests.helpers import deep_equal

SINGLE = {"clustergym/MultiServerChannel-v0": MultiServerChannelEnv,
          "clustergym/MultiServerAllocation-v0": MultiServerAllocationEnv,
          "clustergym/ApproxJobs-v0": ApproxJobsEnv}
# Small but paper-shaped instances; P4 with more arrivals so that the window fills within a test.
KWARGS = {"clustergym/MultiServerChannel-v0": dict(oracle=False),
          "clustergym/MultiServerAllocation-v0": dict(oracle=False, num_servers=32),
          "clustergym/ApproxJobs-v0": dict(num_machines=12, max_jobs=4, arrival_rate=0.1)}
IDS = list(parallel_env_ids())
TOL = 1e-9  # |Σ_agents r − r_single| <= TOL · max(1, |r_single|)


def make(env_id, **kw):
    return parallel_env(env_id, **{**KWARGS[env_id], **kw})


def make_single(env_id, **kw):
    return SINGLE[env_id](**{**KWARGS[env_id], **kw})


def agent_actions(env, obs, infos, rng, feasible=True):
    """One seeded action per live agent; ``feasible`` respects the per-agent masks (P1, P4) or stays small
    (P2); joint capacity/budget may still be exceeded (the single env repairs)."""
    out = {}
    for a in env.agents:
        sp = env.action_space(a)
        if isinstance(sp, spaces.Discrete):
            allowed = np.flatnonzero(infos[a]["action_mask"]) if feasible else np.arange(sp.n)
            out[a] = np.int64(rng.choice(allowed))
        elif isinstance(sp, spaces.MultiBinary):
            x = rng.integers(0, 2, size=sp.n).astype(np.int8)
            out[a] = x & infos[a]["action_mask"] if feasible else x
        else:
            out[a] = (rng.uniform(0, 1, size=sp.shape) * sp.high * (0.1 if feasible else 1.0)).astype(np.float32)
    return out


def joint_random(single, obs, info, rng, feasible):
    """A seeded joint action of the single env: ``feasible`` ones satisfy every constraint (built greedily
    from the public problem), the others mostly need repair."""
    sp, pb = single.action_space, single.problem
    if isinstance(sp, spaces.MultiBinary):  # P1: eq. 4 by the mask, eq. 2 greedily
        if not feasible:
            return rng.integers(0, 2, size=sp.n).astype(np.int8)
        x = np.zeros(sp.n, dtype=np.int8)
        used = np.zeros(pb.num_device_types)
        for e in rng.permutation(np.flatnonzero(info["action_mask"])):
            if rng.random() < 0.5 and np.all(used + pb.demand[e] <= pb.capacity):
                x[e], used = 1, used + pb.demand[e]
        return x
    if isinstance(sp, spaces.MultiDiscrete):  # P4: masks, and each job's remaining budget greedily
        if not feasible:
            return rng.integers(0, sp.nvec)
        rem = obs["jobs"][:, 3] - obs["jobs"][:, 4]  # B_j − spent_j per window slot
        a = np.zeros(sp.shape[0], dtype=np.int64)
        for i in rng.permutation(sp.shape[0]):
            ok = np.flatnonzero(obs["job_mask"].astype(bool) & (rem >= pb.price[i] + 1e-9))
            if ok.size and rng.random() < 0.8:
                k = rng.choice(ok)
                a[i], rem[k] = k + 1, rem[k] - pb.price[i]
        return a
    y = rng.uniform(0, 1, size=sp.shape) * sp.high  # P2: eq. 3, then scale each (r, k) into eq. 4
    if not feasible:
        return 3.0 * y
    sums = np.zeros((pb.num_servers, pb.num_device_types))
    np.add.at(sums, pb.edge_server, y)
    scale = np.minimum(1.0, pb.capacity / np.where(sums > 0, sums, 1.0)) * (1 - 1e-9)
    return y * scale[pb.edge_server]


def rollout(env, seed, steps, action_seed=0):
    rng = np.random.default_rng(action_seed)
    obs, infos = env.reset(seed=seed)
    traj = [(obs, infos, env.state())]
    for _ in range(steps):
        if not env.agents:
            obs, infos = env.reset()
            traj.append((obs, infos, env.state()))
        out = env.step(agent_actions(env, obs, infos, rng))
        obs, infos = out[0], out[4]
        traj.append((*out, env.state()))
    return traj


# -- PettingZoo's own checkers -------------------------------------------------------------------
@pytest.mark.parametrize("env_id", IDS)
def test_parallel_api(env_id):
    env = make(env_id, horizon=60)  # the episode ends inside the 100 cycles: truncation is checked too
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parallel_api_test(env, num_cycles=100)
    pz = [str(w.message) for w in caught if "pettingzoo" in str(w.filename)]
    assert not pz, pz
    env = make(env_id, horizon=2000)  # and 100 cycles inside one long episode
    parallel_api_test(env, num_cycles=100)


@pytest.mark.parametrize("env_id", IDS)
def test_pettingzoo_seed_test(env_id):
    parallel_seed_test(lambda: make(env_id, horizon=100), num_cycles=10)


def test_paper_defaults_build():
    """The kwargs-free constructors (paper defaults) give the documented agents."""
    p1, p2, p4 = (parallel_env(i, oracle=False) for i in IDS)
    assert p1.possible_agents == [f"port_{l}" for l in range(p1.problem.num_ports)]
    assert p2.possible_agents == [f"server_{r}" for r in range(p2.problem.num_servers)]
    assert p4.possible_agents == [f"machine_{i}" for i in range(p4.problem.num_machines)]


# -- spaces, state, lifecycle --------------------------------------------------------------------
@pytest.mark.parametrize("env_id", IDS)
def test_spaces_state_and_end(env_id):
    env = make(env_id, horizon=30)
    assert isinstance(env, ClusterParallelEnv)
    for a in env.possible_agents:
        assert env.action_space(a) is env.action_space(a) and env.observation_space(a) is env.observation_space(a)
    rng = np.random.default_rng(0)
    obs, infos = env.reset(seed=1)
    assert env.state_space.contains(env.state())
    for t in range(30):
        for a in env.agents:
            assert env.observation_space(a).contains(obs[a]), (a, obs[a])
        out = env.step(agent_actions(env, obs, infos, rng))
        obs, rew, term, trunc, infos = out
        assert env.state_space.contains(env.state())
        assert set(rew) == set(term) == set(trunc) == set(infos) == set(env.possible_agents)
        for a, i in infos.items():
            assert {"feedback", "metrics", "t"} <= set(i) and i["t"] == t + 1
    assert all(trunc.values()) and not env.agents
    with pytest.raises(RuntimeError, match="reset"):
        env.step({})


@pytest.mark.parametrize("env_id", IDS)
def test_bad_actions(env_id):
    env = make(env_id, horizon=30)
    obs, infos = env.reset(seed=0)
    acts = agent_actions(env, obs, infos, np.random.default_rng(0))
    first = env.possible_agents[0]
    with pytest.raises(ValueError, match="missing"):
        env.step({a: v for a, v in acts.items() if a != first})
    with pytest.raises(ValueError, match="unknown"):
        env.step({**acts, "nobody": acts[first]})
    with pytest.raises(ValueError, match=first):
        env.step({**acts, first: np.zeros((7, 7, 7))})
    bad = np.full(env.action_space(first).shape, np.nan)
    with pytest.raises(ValueError):
        env.step({**acts, first: bad})
    _, _, _, _, infos = env.step(acts)  # still usable, and nothing happened before
    assert infos[first]["t"] == 1


def test_index():
    assert set(PARALLEL_ENVS) == set(IDS) and len(IDS) == 3
    assert type(parallel_env("MultiServerChannel-v0", horizon=5, oracle=False)).__name__ == "MultiServerChannelParallelEnv"
    with pytest.raises(ValueError, match="RingAllReduce"):
        parallel_env("clustergym/RingAllReduce-v0")


def test_kwargs_are_the_single_envs():
    with pytest.raises(ValueError, match="num_ports"):
        parallel_env("MultiServerChannel-v0", num_ports=0)
    with pytest.raises(ValueError, match="horizon"):
        parallel_env("ApproxJobs-v0", horizon=0)


# -- determinism ----------------------------------------------------------------------
@pytest.mark.parametrize("env_id", IDS)
def test_same_seed_same_trajectory(env_id):
    steps = 150  # > the horizon of 120: covers an episode end and a reset
    a = rollout(make(env_id, horizon=120), seed=7, steps=steps)
    b = rollout(make(env_id, horizon=120), seed=7, steps=steps)
    assert len(a) == len(b) > steps
    for x, y in zip(a, b):
        assert deep_equal(x, y)
    c = rollout(make(env_id, horizon=120), seed=8, steps=steps)
    assert not all(deep_equal(x, y) for x, y in zip(a, c))


@pytest.mark.parametrize("env_id", IDS)
def test_pickle_and_deepcopy_continue_identically(env_id):
    env = make(env_id, horizon=100)
    rollout(env, seed=3, steps=10)
    for dup in (copy.deepcopy, lambda e: pickle.loads(pickle.dumps(e))):
        clone = dup(env)
        r1 = rollout_from_here(env, 20)
        r2 = rollout_from_here(clone, 20)
        assert all(deep_equal(x, y) for x, y in zip(r1, r2))
        env = clone


def rollout_from_here(env, steps):
    rng = np.random.default_rng(5)
    out = []
    for _ in range(steps):
        out.append((*env.step(agent_actions(env, None, None, rng, feasible=False)), env.state()))
    return out


# -- reward split: Σ_agents r = the single env's reward ------------------------------------------
@pytest.mark.parametrize("env_id", IDS)
@pytest.mark.parametrize("infeasible", ["repair", "raise"])
def test_rewards_sum_to_single_env_reward(env_id, infeasible):
    """Same seed, same joint action: the agents' rewards sum to the single env's reward at every step,
    with feasible actions and with actions the single env repairs; obs/done/metrics agree too."""
    T = 150
    single = make_single(env_id, horizon=T, infeasible=infeasible)
    par = make(env_id, horizon=T, infeasible=infeasible)
    rng = np.random.default_rng(11)
    s_obs, s_info = single.reset(seed=4)
    par.reset(seed=4)
    repaired = 0
    nonzero = 0
    for t in range(T):
        feasible = infeasible == "raise" or t % 2 == 0
        joint = joint_random(single, s_obs, s_info, rng, feasible)
        s_obs, r, s_term, s_trunc, s_info = single.step(joint)
        p_obs, rewards, term, trunc, infos = par.step(par.split_action(joint))
        assert abs(sum(rewards.values()) - r) <= TOL * max(1.0, abs(r)), (t, sum(rewards.values()), r)
        assert all(v == s_term for v in term.values()) and all(v == s_trunc for v in trunc.values())
        assert deep_equal(next(iter(infos.values()))["metrics"], s_info["metrics"])
        assert np.array_equal(par.state(), flat_public_obs(s_obs))
        repaired += s_info["metrics"]["repaired"]
        nonzero += r != 0
        if s_term or s_trunc:
            break
    assert nonzero > T // 4
    if infeasible == "repair":
        assert repaired > 0  # the repair path was exercised
        assert np.isclose(sum(rewards.values()), r)


def flat_public_obs(obs):
    if "jobs" in obs:
        return np.concatenate([obs["jobs"].ravel(), obs["job_mask"], obs["t"]]).astype(np.float64)
    return np.concatenate([obs["arrivals"], obs["t"]]).astype(np.float32)


def test_raise_mode_names_the_constraint():
    env = make("clustergym/MultiServerChannel-v0", horizon=10, infeasible="raise", rho=0.0)
    obs, infos = env.reset(seed=0)
    acts = {a: np.ones(env.action_space(a).n, dtype=np.int8) for a in env.agents}
    with pytest.raises(ValueError, match="eq. 4"):
        env.step(acts)


def test_allocation_split_is_per_edge_and_exact():
    """P2: each server's reward is its edges' gain minus its share of each port's overhead (eq. 5 split)."""
    from clustergym.envs.multiserver.allocation.parallel import server_reward_split

    env = parallel_env("MultiServerAllocation-v0", horizon=20, scenario="toy", oracle=False)
    env.reset(seed=0)
    # toy: port 0 -> servers 0, 1; port 1 -> server 1; a = 2, c = 2, α = (1.4, 1.0), β = 0.5, linear f
    y = {"server_0": np.array([[2.0]], np.float32), "server_1": np.array([[1.0], [1.0]], np.float32)}
    _, r, *_ = env.step(y)
    # port 0: gain 1.4·2 + 1.0·1 = 3.8, overhead 0.5·3 = 1.5 split 2:1; port 1: gain 1, overhead 0.5
    assert r["server_0"] == pytest.approx(2.8 - 1.0)
    assert r["server_1"] == pytest.approx((1.0 - 0.5) + (1.0 - 0.5))
    rm = env.reward_model
    yz = np.zeros((3, 1))
    assert np.array_equal(server_reward_split(rm, yz, np.array([True, True])), np.zeros(3))


def test_approx_split_by_work():
    """P4: machines serving the same job share its utility gain in proportion to their work."""
    env = make("clustergym/ApproxJobs-v0", horizon=200)
    obs, infos = env.reset(seed=2)
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(200):
        acts = agent_actions(env, obs, infos, rng)
        obs, rew, term, trunc, infos = env.step(acts)
        jobs = {}
        for a, i in infos.items():
            fb = i["feedback"]
            if fb["job_id"] >= 0:
                jobs.setdefault(fb["job_id"], []).append((fb["work"], rew[a]))
            else:
                assert rew[a] == 0.0 and fb["work"] == 0.0 and fb["cost"] == 0.0
        for pairs in jobs.values():
            w, r = np.array(pairs).T
            if len(pairs) > 1 and w.sum() > 0:
                assert np.allclose(r * w.sum(), w * r.sum(), atol=1e-12)
                checked += 1
        if not env.agents:
            break
    assert checked > 10


# -- hidden truth never reaches observations or state ---------------------------------------------
# each agent's slice of the single env's statistics and last feedback (the env's <family>/stats.py)
OWN_STATS = {"clustergym/MultiServerChannel-v0": ("arrival_share", "utility_mean", "channel_share", "last_executed",
                                                  "last_utility"),
             "clustergym/MultiServerAllocation-v0": ("arrival_share", "port_reward_mean"),
             "clustergym/ApproxJobs-v0": ("machine_rate", "machine_share", "last_executed", "last_work")}
PUBLIC_KEYS = {"clustergym/MultiServerChannel-v0": {"job", "t", *OWN_STATS["clustergym/MultiServerChannel-v0"]},
               "clustergym/MultiServerAllocation-v0": {"arrivals", "t", *OWN_STATS["clustergym/MultiServerAllocation-v0"]},
               "clustergym/ApproxJobs-v0": {"jobs", "job_mask", "t", "price", "action_mask",
                                            *OWN_STATS["clustergym/ApproxJobs-v0"]}}


@pytest.mark.parametrize("env_id", IDS)
def test_observations_are_slices_of_public_obs(env_id):
    """Every agent's observation and the state are made of the single env's public observation and
    the public problem only (the single env keeps truth out of its obs: tests/contract/test_env_api.py)."""
    env = make(env_id, horizon=80)
    pb = env.problem
    rng = np.random.default_rng(0)
    obs, infos = env.reset(seed=0)
    for _ in range(80):
        pub = env._obs  # the single env's observation this slot
        assert np.array_equal(env.state(), flat_public_obs(pub))
        for i, a in enumerate(env.possible_agents):
            assert set(obs[a]) == PUBLIC_KEYS[env_id]
            assert np.array_equal(obs[a]["t"], pub["t"])
            if "job" in obs[a]:
                l = env.agent_ports[i]
                assert obs[a]["job"][0] == pub["arrivals"][l]
                assert obs[a]["arrival_share"][0] == pub["arrival_share"][l]
                for k in OWN_STATS[env_id][1:]:  # the port's channels, in edge order
                    assert np.array_equal(obs[a][k], pub[k][env.agent_edges[a]]), k
            elif "jobs" in obs[a]:
                assert np.array_equal(obs[a]["jobs"], pub["jobs"]) and np.array_equal(obs[a]["job_mask"], pub["job_mask"])
                assert obs[a]["price"][0] == pb.price[i]
                assert np.array_equal(obs[a]["action_mask"], env.single_env.action_masks().reshape(len(env.possible_agents), -1)[i])
                for k in OWN_STATS[env_id]:
                    assert obs[a][k][0] == pub[k][i], k
            else:
                assert np.array_equal(obs[a]["arrivals"], pub["arrivals"][env.agent_ports[a]])
                for k in OWN_STATS[env_id]:
                    assert np.array_equal(obs[a][k], pub[k][env.agent_ports[a]]), k
        obs, _, _, _, infos = env.step(agent_actions(env, obs, infos, rng))
        if not env.agents:
            break


def _run_obs(env, steps, seed=0):
    rng = np.random.default_rng(1)
    obs, infos = env.reset(seed=seed)
    seen = [(obs, infos.copy(), env.state())]
    rewards = []
    for _ in range(steps):
        acts = agent_actions(env, obs, infos, rng)
        obs, r, _, _, infos = env.step(acts)
        seen.append((obs, {a: {k: v for k, v in i.items() if k == "action_mask"} for a, i in infos.items()}, env.state()))
        rewards.append(r)
    return seen, rewards


def test_channel_hidden_utilities_do_not_reach_observations():
    """P1: changing the hidden mean utilities ṽ (same public problem, same ρ) changes the rewards but not one
    observation, mask or state, except the entries made of the realised utilities (the feedback and its
    statistics: what a scheduler learns ṽ from)."""
    from clustergym.envs.multiserver.channel.scenario import make_channel_scenario

    sc = make_channel_scenario("paper", seed=0)
    tr = sc.truth
    other = dataclasses.replace(sc, truth=dataclasses.replace(tr, mean_utility=1.0 - tr.mean_utility))
    a, ra = _run_obs(parallel_env("MultiServerChannel-v0", scenario=sc, oracle=False, horizon=120), 120)
    b, rb = _run_obs(parallel_env("MultiServerChannel-v0", scenario=other, oracle=False, horizon=120), 120)
    learned = {"utility_mean", "last_utility"}  # realised Z̃ and their means: feedback, not the truth

    def strip(seen):
        return [({ag: {k: v for k, v in o.items() if k not in learned} for ag, o in obs.items()}, i, s)
                for obs, i, s in seen]

    assert all(deep_equal(x, y) for x, y in zip(strip(a), strip(b)))
    assert not deep_equal(ra, rb)
    assert not all(deep_equal(x, y) for x, y in zip(a, b))  # the learned entries differ


def test_approx_future_jobs_do_not_reach_observations():
    """P4: changing jobs that have not arrived yet (hidden future) leaves every observation and the state
    unchanged until they arrive."""
    from clustergym.envs.approxjobs.scenario import make_approx_scenario

    kw = dict(num_machines=12, max_jobs=4, arrival_rate=0.1)
    sc = make_approx_scenario("paper", seed=0, horizon=300, **kw)
    jobs = sc.truth.jobs
    t0 = 80
    late = jobs.arrival >= t0
    assert late.any() and (~late).any()
    new_jobs = dataclasses.replace(jobs, budget=np.where(late, jobs.budget * 3.0, jobs.budget),
                                   value=np.where(late, jobs.value + 1.0, jobs.value))
    other = dataclasses.replace(sc, truth=dataclasses.replace(sc.truth, jobs=new_jobs))
    a, _ = _run_obs(parallel_env("ApproxJobs-v0", scenario=sc, horizon=300), t0)
    b, _ = _run_obs(parallel_env("ApproxJobs-v0", scenario=other, horizon=300), t0)
    assert all(deep_equal(x, y) for x, y in zip(a, b))
    c, _ = _run_obs(parallel_env("ApproxJobs-v0", scenario=other, horizon=300), 299)
    a2, _ = _run_obs(parallel_env("ApproxJobs-v0", scenario=sc, horizon=300), 299)
    assert not all(deep_equal(x, y) for x, y in zip(a2, c))  # once they arrive they are public


# -- one core, two interfaces --------------------------------------------------------------------
@pytest.mark.parametrize("env_id", IDS)
def test_drives_the_single_env(env_id, monkeypatch):
    """The ParallelEnv holds one single env and calls its reset/step once per reset/step."""
    env = make(env_id, horizon=50)
    assert type(env.single_env) is SINGLE[env_id]
    calls = {"step": 0, "reset": 0}
    for name in calls:
        orig = getattr(env.single_env, name)

        def spy(*args, _orig=orig, _name=name, **kw):
            calls[_name] += 1
            return _orig(*args, **kw)

        monkeypatch.setattr(env.single_env, name, spy)
    rollout(env, seed=0, steps=20)
    assert calls == {"step": 20, "reset": 1}


def test_parallel_modules_hold_no_dynamics():
    """Structural check: the parallel modules import only the single env (and its RewardModel), the
    base class and spaces; no scenario, arrival, knapsack, projection, service or kernel code."""
    import clustergym.envs.approxjobs.parallel as p4
    import clustergym.envs.multiserver.allocation.parallel as p2
    import clustergym.envs.multiserver.channel.parallel as p1

    allowed = {"__future__", "typing", "numpy", "gymnasium", "clustergym.core.parallel",
               "clustergym.envs.multiserver.channel.env", "clustergym.envs.multiserver.allocation.env",
               "clustergym.envs.approxjobs.env"}
    for mod in (p1, p2, p4):
        tree = ast.parse(inspect.getsource(mod))
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert imported <= allowed, (mod.__name__, imported - allowed)
        names = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        names |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        forbidden = {"np_random", "_rngs", "_refill", "_slot", "_truth", "truth", "scenario_truth", "_z", "_arrivals",
                     "_check", "_rates", "_admit", "_utility", "child_generators", "knapsack_max", "knapsack_value", "project",
                     "utility_value", "budget_prefix"}
        assert not names & forbidden, (mod.__name__, names & forbidden)
