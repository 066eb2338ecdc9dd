"""Instances per episode and fixed-shape spaces, and ``step`` after the end.

Parametrised over the shipped families of the registry (P1..P4): ``reset(options={"scenario_seed": k})``
gives exactly the episode of ``gym.make(..., scenario_seed=k)``; junk options raise; the ``instances``
kwarg draws seeded instances without touching the dynamics' randomness; padding (``FamilySpec.pad_kwargs``)
leaves rewards, oracle totals and regret on the real entries unchanged and keeps padded entries inert; the
native vector envs and the PettingZoo envs switch too.
"""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest

import clustergym
from clustergym.runner import testing
from clustergym.core.scenario import Scenario
from clustergym.core.env import ResetNeeded, env_padding
from clustergym.envs.multiagent import parallel_env

SHIPPED = [f for f in clustergym.family_specs() if f.number in ("P1", "P2", "P3", "P4")]
ENVS = [(f, e) for f in SHIPPED for e in f.envs]
IDS = [e.id for _, e in ENVS]
P1, P2, P3, P4 = "clustergym/MultiServerChannel-v0", "clustergym/MultiServerAllocation-v0", \
    "clustergym/RingAllReduce-v0", "clustergym/ApproxJobs-v0"
# small instances whose natural spaces vary by instance (P3: racks drawn, so not check_kwargs' num_racks=2)
SMALL = {P1: {"num_servers": 12}, P2: {"num_servers": 16}, P3: {"num_servers": 10, "max_jobs": 6, "arrival_rate": 2.0},
         P4: {"num_machines": 10, "max_jobs": 5, "arrival_rate": 0.1}}
ORACLE = {P1: True, P2: True, P3: False, P4: True}  # P3's MILP oracle is slow; its switch is tested without it
POOL = range(12)


def spec_of(env_id):
    return next(f for f, e in ENVS if e.id == env_id)


def pads(env_id, pool=POOL) -> dict:
    """The padding kwargs that fit every instance of ``pool`` (maxima of ``FamilySpec.instance_sizes``)."""
    spec = spec_of(env_id)
    if not spec.pad_kwargs:
        return {}
    sizes = [spec.instance_sizes(gym.make(env_id, scenario_seed=k, **SMALL[env_id]).unwrapped.problem) for k in pool]
    return {n: max(s[n] for s in sizes) for n in spec.pad_kwargs}


def kwargs(env_id, padded=True, **kw) -> dict:
    base = {**SMALL[env_id], "oracle": ORACLE[env_id], "horizon": 12}
    if padded:
        base.update(pads(env_id))
    return {**base, **kw}


def episode(env, seed, options=None, steps=12, action_seed=0):
    """(obs, info) then every (obs, reward, term, trunc, info) of one episode with seeded valid random actions."""
    env.action_space.seed(action_seed)
    obs, info = env.reset(seed=seed, options=options)
    traj = [(obs, info)]
    for _ in range(steps):
        obs, r, term, trunc, info = env.step(testing.valid_random_action(env, info))
        traj.append((obs, r, term, trunc, info))
        if term or trunc:
            break
    return traj


def totals(traj) -> dict:
    """Episode totals: reward and every oracle-side metric (per-slot sums, end-of-episode values)."""
    out = {"reward": sum(s[1] for s in traj[1:])}
    for s in traj[1:]:
        for key, v in s[4].get("metrics", {}).items():
            if key in ("oracle_reward", "regret", "expected_reward") or key.startswith("episode_"):
                out[key] = out.get(key, 0.0) + float(v)
    return out


# -- reset(options={"scenario_seed": k}) == gym.make(..., scenario_seed=k) ----------------------
@pytest.mark.parametrize("env_id", IDS)
def test_reset_option_gives_exactly_the_episode_of_make_with_that_scenario_seed(env_id):
    kw = kwargs(env_id)
    env = gym.make(env_id, **kw)
    episode(env, seed=1)  # an episode of instance 0 first: the switch must leave nothing of it behind
    for k, seed in ((3, 0), (7, 5), (3, 5)):  # instance 3 again: from the env's cache
        got = episode(env, seed, {"scenario_seed": k})
        want = episode(gym.make(env_id, scenario_seed=k, **kw), seed)
        assert testing.deep_equal(got, want), (env_id, k)
        t = totals(got)
        assert t == totals(want) and t["reward"] != 0.0
        if ORACLE[env_id]:
            assert set(t) - {"reward", "expected_reward"}, t  # oracle totals were compared too
        u = env.unwrapped
        assert u.scenario_seed == k and u.scenario.params == want_params(env_id, k, kw)
        ref = gym.make(env_id, scenario_seed=k, **kw).unwrapped
        assert testing.deep_equal(dataclasses.asdict(u.problem), dataclasses.asdict(ref.problem))  # instance k's problem
    # different instances really differ
    assert not testing.deep_equal(episode(env, 0, {"scenario_seed": 3}), episode(env, 0, {"scenario_seed": 7}))


def want_params(env_id, k, kw):
    return gym.make(env_id, scenario_seed=k, **kw).unwrapped.scenario.params


@pytest.mark.parametrize("env_id", IDS)
def test_junk_reset_options_raise_naming_the_valid_options(env_id):
    env = gym.make(env_id, **kwargs(env_id))
    for bad in ({"scenario": 3}, {"seed": 1}, {"scenario_seed": -1}, {"scenario_seed": 1.0}, {"scenario_seed": True},
                {"scenario_seed": "3"}, {"scenario_seed": [3]}, "scenario_seed=3", [("scenario_seed", 3)]):
        with pytest.raises(ValueError, match="scenario_seed"):
            env.reset(seed=0, options=bad)
    env.reset(seed=0, options={})  # empty options and an explicit None are fine
    env.reset(seed=0, options={"scenario_seed": None})
    assert env.unwrapped.scenario_seed == 0


@pytest.mark.parametrize("env_id", IDS)
def test_instances_draw_is_seeded_deterministic_covers_the_set_and_keeps_the_dynamics(env_id):
    kw = kwargs(env_id)
    pool = (2, 4, 6, 9)
    drawn = {}
    for seed in range(6):
        a, b = gym.make(env_id, instances=pool, **kw), gym.make(env_id, instances=range(2, 10), **kw)
        ta = episode(a, seed)
        k = a.unwrapped.scenario_seed
        assert k in pool
        assert testing.deep_equal(ta, episode(gym.make(env_id, instances=pool, **kw), seed))  # same seed, same episode
        # the draw does not consume np_random: the dynamics are those of scenario_seed=k with the same seed
        assert testing.deep_equal(ta, episode(gym.make(env_id, scenario_seed=k, **kw), seed))
        episode(b, seed)
        assert b.unwrapped.scenario_seed in range(2, 10)
        drawn[seed] = k
    assert len(set(drawn.values())) > 1
    env = gym.make(env_id, instances=pool, **kw)
    env.reset(seed=3)
    seen = set()
    for _ in range(40):  # unseeded resets continue the draw and cover the set
        env.reset()
        seen.add(env.unwrapped.scenario_seed)
    assert seen == set(pool)
    # an explicit option wins over the draw
    env.reset(seed=0, options={"scenario_seed": 11})
    assert env.unwrapped.scenario_seed == 11


@pytest.mark.parametrize("bad", [[], [-1], [1, 1], "abc", [True], 3, [1.5], {1, 2}, range(0)])
def test_bad_instances_kwarg_is_one_value_error(bad):
    with pytest.raises(ValueError, match="instances="):
        gym.make(P1, instances=bad, **kwargs(P1))


def test_a_scenario_object_cannot_switch_instance():
    sc = gym.make(P1, **SMALL[P1]).unwrapped.scenario
    assert isinstance(sc, Scenario)
    env = gym.make(P1, scenario=sc, horizon=5)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="Scenario object"):
        env.reset(seed=0, options={"scenario_seed": 2})
    with pytest.raises(ValueError, match="Scenario object"):
        gym.make(P1, scenario=sc, instances=range(3))
    with pytest.raises(ValueError, match="unknown reset option"):
        env.reset(seed=0, options={"foo": 1})


@pytest.mark.parametrize("env_id", [P1, P2, P3])
def test_without_padding_another_shape_is_one_error_naming_the_padding_kwarg(env_id):
    spec = spec_of(env_id)
    env = gym.make(env_id, **kwargs(env_id, padded=False))
    env.reset(seed=0)
    space = env.action_space
    shapes = {k: gym.make(env_id, scenario_seed=k, **kwargs(env_id, padded=False)).unwrapped for k in POOL}
    other = next(k for k, u in shapes.items() if u.action_space != space or u.observation_space != env.observation_space)
    with pytest.raises(ValueError, match=spec.pad_kwargs[0]) as err:
        env.reset(seed=0, options={"scenario_seed": other})
    assert f"scenario_seed={other}" in str(err.value) and "\n" not in str(err.value)
    assert env.unwrapped.scenario_seed == 0 and env.action_space is space  # nothing changed
    # an instance of the same shape switches without padding (P1: same |E|)
    same = [k for k, u in shapes.items() if k and u.action_space == space and u.observation_space == env.observation_space]
    for k in same[:1]:
        assert testing.deep_equal(episode(env, 4, {"scenario_seed": k}),
                                  episode(gym.make(env_id, scenario_seed=k, **kwargs(env_id, padded=False)), 4))


@pytest.mark.parametrize("env_id", [P1, P2, P3])
def test_padding_maxima_below_an_instance_size_is_one_error(env_id):
    spec = spec_of(env_id)
    name = spec.pad_kwargs[0]
    sizes = {k: spec.instance_sizes(gym.make(env_id, scenario_seed=k, **SMALL[env_id]).unwrapped.problem)[name]
             for k in POOL}
    small = min(sizes, key=sizes.get)
    natural = sizes[small]
    with pytest.raises(ValueError, match=rf"{name}={natural - 1}.*{name} >= {natural}"):
        gym.make(env_id, scenario_seed=small, **{**SMALL[env_id], name: natural - 1})
    env = gym.make(env_id, scenario_seed=small, **{**SMALL[env_id], name: natural})
    big = next(k for k in POOL if sizes[k] > natural)
    with pytest.raises(ValueError, match=rf"scenario_seed={big}.*{name}"):
        env.reset(seed=0, options={"scenario_seed": big})
    for bad in (0, -3, 2.5, "7", True):
        with pytest.raises(ValueError, match=name):
            gym.make(env_id, **{**SMALL[env_id], name: bad})


def test_family_spec_pad_kwargs_and_sizes():
    names = {f.number: f.pad_kwargs for f in SHIPPED}
    assert names == {"P1": ("max_edges",), "P2": ("max_edges",), "P3": ("max_racks",), "P4": ()}
    for f in SHIPPED:
        make = f.scenario_factory()
        for k in range(3):
            if f.number == "P4":
                assert f.instance_sizes(gym.make(P4, scenario_seed=k).unwrapped.problem) == {}
                continue
            pb = make("paper", seed=k).problem
            want = {"P1": pb.num_edges if f.number == "P1" else None, "P2": getattr(pb, "num_edges", None),
                    "P3": getattr(getattr(pb, "topology", None), "num_racks", None)}[f.number]
            assert f.instance_sizes(pb) == {f.pad_kwargs[0]: want}


# -- padding: real entries unchanged, padded entries inert ---------------------------------------------------
def real_actions(env_id, u, rng):
    """A (natural-shape) action of the unpadded env and the same action for the padded env."""
    if env_id == P1:
        E = u.problem.num_edges
        x = (rng.random(E) < 0.5).astype(np.int8)
        return x, x
    if env_id == P2:
        pb = u.problem
        f = rng.integers(0, 5, size=(pb.num_edges, pb.num_device_types)) / 4.0  # u·a is exact for these fractions
        return f * np.asarray(pb.edge_demand, dtype=np.float64), f
    nat = gym.make(P3, scenario_seed=u.scenario_seed, **kwargs(P3, padded=False)).action_space
    a = rng.integers(0, np.asarray(nat.nvec))  # within the natural ranges
    return a, a


@pytest.mark.parametrize("infeasible", ["repair", "raise"])
@pytest.mark.parametrize("env_id", [P1, P2, P3])
def test_padded_and_unpadded_give_the_same_rewards_oracle_and_regret_on_real_entries(env_id, infeasible):
    for k in (0, 5):
        plain = gym.make(env_id, scenario_seed=k, **kwargs(env_id, padded=False, horizon=15, infeasible=infeasible))
        padded = gym.make(env_id, scenario_seed=k, **kwargs(env_id, horizon=15, infeasible=infeasible))
        plain.reset(seed=3)
        _, pinfo = padded.reset(seed=3)
        rng = np.random.default_rng(k)
        n_real = padded.action_space.shape[0]
        for t in range(15):
            a, b = real_actions(env_id, plain.unwrapped, rng)
            if infeasible == "raise":  # only what "raise" accepts: masked / feasible actions
                if env_id == P1:
                    a = b = a * pinfo["action_mask"][:a.shape[0]]
                    a = b = a * 0 if t % 2 else a  # P1 capacity: keep it feasible half the time at least
                elif env_id == P2:
                    a, b = a * 0.0, b * 0.0
                else:
                    a = b = a * 0
            if b.shape[0] != n_real:
                pad = np.zeros((n_real, *b.shape[1:]), dtype=b.dtype)
                pad[:b.shape[0]] = b
                b = pad
            try:
                r1 = plain.step(a)
            except ValueError as e1:
                with pytest.raises(ValueError) as e2:
                    padded.step(b)
                assert str(e1) == str(e2.value)
                break
            r2 = padded.step(b)
            pinfo = r2[4]
            assert r1[1] == r2[1] and r1[2:4] == r2[2:4], (env_id, k, t)
            m1, m2 = r1[4]["metrics"], r2[4]["metrics"]
            assert testing.deep_equal(m1, m2), (env_id, k, t)
            E = plain.unwrapped.problem.num_edges if env_id != P3 else None
            if E is not None:
                for key, v in r1[4]["feedback"].items():
                    w = r2[4]["feedback"][key]
                    if np.ndim(v) and np.shape(v)[0] == E and np.shape(w)[0] != E:
                        assert np.array_equal(w[:E], v) and not np.any(w[E:]), key
                    else:
                        assert testing.deep_equal(v, w), key


@pytest.mark.parametrize("env_id", [P1, P2])
def test_padded_entries_are_inert_masked_and_counted(env_id):
    kw = kwargs(env_id, horizon=30)
    k = min(POOL, key=lambda s: gym.make(env_id, scenario_seed=s, **SMALL[env_id]).unwrapped.problem.num_edges)
    env0, env1 = gym.make(env_id, scenario_seed=k, **kw), gym.make(env_id, scenario_seed=k, **kw)
    strict = gym.make(env_id, scenario_seed=k, **{**kw, "infeasible": "raise"})
    obs, info = env0.reset(seed=2)
    env1.reset(seed=2)
    strict.reset(seed=2)
    u = env0.unwrapped
    E, P = u.problem.num_edges, env0.action_space.shape[0]
    assert E < P
    assert obs["edge_present"].sum() == E and not obs["edge_present"][E:].any()
    assert not info["action_mask"][E:].any() and not obs["edge_arrival"][E:].any()
    assert not obs["edge_demand"][E:].any() and obs["edge_demand"][:E].any()
    if env_id == P1:
        m = u.action_masks().reshape(P, 2)
        assert m[E:, 0].all() and not m[E:, 1].any()
    rng = np.random.default_rng(0)
    for t in range(30):
        a = (rng.random(env0.action_space.shape) < 0.3).astype(env0.action_space.dtype)
        a[E:] = 0
        b = a.copy()
        b[E:] = 1  # every padding entry selected: never executed, never rewarded
        r0, r1 = env0.step(a), env1.step(b)
        assert r0[1] == r1[1] and r0[3] == r1[3]
        extra = b[E:].size
        assert r1[4]["metrics"]["repaired"] == r0[4]["metrics"]["repaired"] + extra
        assert testing.deep_equal({k2: v for k2, v in r0[4]["metrics"].items() if k2 != "repaired"},
                                  {k2: v for k2, v in r1[4]["metrics"].items() if k2 != "repaired"})
        ex = r1[4]["feedback"]["executed" if env_id == P1 else "allocation"]
        assert not np.any(ex[E:])
        assert testing.deep_equal(r0[0], r1[0])
        with pytest.raises(ValueError, match="padding"):
            strict.step(b)
        strict.step(np.zeros_like(a))  # 0 on padding is accepted (and keeps the env stepping)


def test_padded_observation_holds_only_public_problem_data():
    env = gym.make(P1, **kwargs(P1))
    obs, info = env.reset(seed=0)
    pb = env.unwrapped.problem
    E = pb.num_edges
    assert np.allclose(obs["edge_demand"][:E], pb.demand / pb.capacity[None, :])
    assert np.array_equal(obs["edge_arrival"][:E], obs["arrivals"][pb.edge_port])
    env = gym.make(P2, **kwargs(P2))
    obs, _ = env.reset(seed=0)
    pb = env.unwrapped.problem
    cap = pb.capacity[pb.edge_server]
    want = np.divide(pb.edge_demand, cap, out=np.zeros_like(cap), where=cap > 0)
    assert np.allclose(obs["edge_demand"][:pb.num_edges], want)


@pytest.mark.parametrize("env_id", [P1, P2, P3])
def test_padded_envs_pass_the_env_contract_checks(env_id):
    # Gymnasium and SB3 check_env, same-seed determinism, pickle/deepcopy continuation, truncation,
    # invalid actions, info keys, render, bad kwargs: on the padded env, and on one drawing instances
    testing.check_env(env_id, {**kwargs(env_id, oracle=False), "horizon": 60}, steps=40)
    testing.check_determinism(env_id, {**kwargs(env_id, oracle=False), "instances": range(6)}, steps=40, horizon=10)
    testing.check_copy_continues(env_id, {**kwargs(env_id, oracle=False), "instances": range(6)}, how="pickle")


# -- DRL statistics on padded envs and after a switch --------------------------------------------------------
@pytest.mark.parametrize("env_id", [P1, P2, P4])
def test_flattened_observation_with_stats_has_one_size_across_instances(env_id):
    from clustergym.learning.wrappers import FlattenWithStats

    env = FlattenWithStats(gym.make(env_id, instances=range(8), **kwargs(env_id, oracle=False, horizon=6)))
    size = env.observation_space.shape[0]
    seen = set()
    for seed in range(6):
        obs, info = env.reset(seed=seed)
        seen.add(env.unwrapped.scenario_seed)
        assert env.pipeline.problem is env.unwrapped.problem  # rebuilt from the instance's problem
        for _ in range(6):
            obs, *_ = env.step(testing.valid_random_action(env.unwrapped, info))
            assert obs.shape == (size,)
    assert len(seen) > 1
    pad = env_padding(env)
    assert pad == pads(env_id)
    if env_id == P1:  # the per-channel statistics are zero on padding
        from clustergym.learning.pipeline import EmpiricalStats

        st = EmpiricalStats("multiserver-channel", env.unwrapped.problem, pad)
        assert st.size == 2 * pad["max_edges"] + env.unwrapped.problem.num_ports
        assert EmpiricalStats("multiserver-channel", env.unwrapped.problem).size == \
            2 * env.unwrapped.problem.num_edges + env.unwrapped.problem.num_ports


# -- native vector envs ------------------------------------------------------------------------------------
@pytest.mark.parametrize("env_id", [P1, P2])
@pytest.mark.parametrize("padded, pool", [(True, range(10)), (True, (3,)), (False, (0,))])
def test_vector_sub_envs_replay_single_envs_drawing_instances(env_id, padded, pool):
    # without padding only same-shape instances fit: the pool of the construction instance; P2 steps groups
    # of <= 4 sub-envs on one instance with the serial kernel, larger ones with the batch kernel (pool (3,))
    kw = {**kwargs(env_id, padded=padded, horizon=6, oracle=True), "instances": pool}
    N, steps = 6, 14  # two autoresets
    vec = gym.make_vec(env_id, num_envs=N, vectorization_mode="vector_entry_point", **kw)
    vec.action_space.seed(1)
    obs, info = vec.reset(seed=20)
    acts, vrew, vinst, vinfo, vobs = [], [], [vec.unwrapped.scenario_seeds], [], []
    for t in range(steps):
        a = vec.action_space.sample()
        if env_id == P1 and t % 2:  # every other step: masked actions (else idle channels and padding to repair)
            a = a * info["action_mask"]
        acts.append(a)
        obs, r, term, trunc, info = vec.step(a)
        vrew.append(r)
        vinst.append(vec.unwrapped.scenario_seeds)
        vinfo.append(info)
        vobs.append(obs)
    assert len(pool) == 1 or len({int(k) for s in vinst for k in s}) > 1
    for i in range(N):
        env = gym.make(env_id, **kw)
        env.reset(seed=20 + i)
        assert env.unwrapped.scenario_seed == vinst[0][i]
        done = False
        for t in range(steps):
            if done:
                env.reset()
                assert vrew[t][i] == 0.0 and env.unwrapped.scenario_seed == vinst[t + 1][i]
                done = False
                continue
            o, r, term, trunc, inf = env.step(acts[t][i])
            assert r == vrew[t][i], (env_id, i, t)
            assert all(np.array_equal(o[key], vobs[t][key][i]) for key in o), (env_id, i, t)
            for part in ("feedback", "metrics"):
                for key, v in inf[part].items():
                    assert np.array_equal(np.asarray(v), np.asarray(vinfo[t][part][key][i])), (part, key, i, t)
            done = term or trunc


@pytest.mark.parametrize("env_id", [P1, P2])
def test_vector_reset_option_switches_sub_envs_and_junk_raises(env_id):
    kw = kwargs(env_id, horizon=8)
    vec = gym.make_vec(env_id, num_envs=2, vectorization_mode="vector_entry_point", **kw)
    vec.reset(seed=0, options={"scenario_seed": 5})
    assert list(vec.unwrapped.scenario_seeds) == [5, 5]
    vec.reset(seed=0, options={"scenario_seed": 7, "reset_mask": np.array([False, True])})
    assert list(vec.unwrapped.scenario_seeds) == [5, 7]
    assert vec.unwrapped.problems[1].num_edges == gym.make(env_id, scenario_seed=7, **kw).unwrapped.problem.num_edges
    for bad in ({"foo": 1}, {"scenario_seed": -2}, {"scenario_seed": "1"}):
        with pytest.raises(ValueError, match="scenario_seed"):
            vec.reset(seed=0, options=bad)
    plain = gym.make_vec(env_id, num_envs=2, vectorization_mode="vector_entry_point", **kwargs(env_id, padded=False))
    plain.reset(seed=0)
    E0 = plain.unwrapped.problem.num_edges
    other = next(k for k in POOL if gym.make(env_id, scenario_seed=k, **SMALL[env_id]).unwrapped.problem.num_edges != E0)
    with pytest.raises(ValueError, match="max_edges"):
        plain.reset(seed=0, options={"scenario_seed": other})
    assert list(plain.unwrapped.scenario_seeds) == [0, 0]  # a bad instance changes nothing


# -- PettingZoo ---------------------------------------------------------------------------------------------
def pz_episode(env, seed, options=None):
    obs, infos = env.reset(seed=seed, options=options)
    rng = np.random.default_rng(0)
    total, steps = 0.0, []
    while env.agents:
        acts = {}
        for a in env.agents:
            sp = env.action_space(a)
            if isinstance(sp, gym.spaces.Box):
                v = rng.random(sp.shape) * sp.high
            elif isinstance(sp, gym.spaces.Discrete):
                v = np.int64(rng.choice(np.flatnonzero(infos[a]["action_mask"])))
            else:
                v = (rng.random(sp.shape) < 0.5).astype(np.int8) * infos[a]["action_mask"]
            acts[a] = v
        obs, r, te, tr, infos = env.step(acts)
        steps.append(r)
        total += sum(r.values())
    return total, steps


@pytest.mark.parametrize("env_id", [P1, P2, P4])
def test_pettingzoo_envs_switch_instances(env_id):
    from pettingzoo.test import parallel_api_test

    kw = kwargs(env_id, horizon=10)
    env = parallel_env(env_id, **kw)
    pz_episode(env, 0)
    for k in (4, 9):
        ref = parallel_env(env_id, scenario_seed=k, **kw)
        assert pz_episode(env, 3, {"scenario_seed": k}) == pz_episode(ref, 3)
        assert env.problem is env.single_env.problem and env.single_env.scenario_seed == k
    drawn = parallel_env(env_id, instances=range(3, 8), **kw)
    drawn.reset(seed=1)
    assert drawn.single_env.scenario_seed in range(3, 8)
    with pytest.raises(ValueError, match="scenario_seed"):
        env.reset(seed=0, options={"bogus": 1})
    if spec_of(env_id).pad_kwargs:
        parallel_api_test(parallel_env(env_id, **kw), num_cycles=25)
        plain = parallel_env(env_id, **kwargs(env_id, padded=False, horizon=10))
        plain.reset(seed=0)
        with pytest.raises(ValueError, match="max_edges"):
            plain.reset(seed=0, options={"scenario_seed": 4})


# -- step after the end -------------------------------------------------------------------------------------
@pytest.mark.parametrize("env_id", IDS)
def test_step_after_truncation_raises_until_reset(env_id):
    env = gym.make(env_id, **kwargs(env_id, padded=False, horizon=3, oracle=False))
    u = env.unwrapped
    _, info = env.reset(seed=0)
    trunc = term = False
    while not (trunc or term):
        _, _, term, trunc, info = env.step(testing.valid_random_action(u, info))
    t_end = u._t
    for _ in range(2):
        with pytest.raises(ResetNeeded, match="reset"):
            env.step(testing.valid_random_action(u, info))
        with pytest.raises(RuntimeError):
            u.step(testing.valid_random_action(u, info))
        with pytest.raises(gym.error.ResetNeeded):
            u.step(testing.valid_random_action(u, info))
    assert u._t == t_end  # the refused steps changed nothing
    _, info = env.reset()
    env.step(testing.valid_random_action(u, info))  # stepping again after reset


@pytest.mark.parametrize("env_id", [e.id for _, e in ENVS if e.parallel_entry_point])
def test_pettingzoo_step_after_the_end_raises(env_id):
    env = parallel_env(env_id, **kwargs(env_id, padded=False, horizon=2, oracle=False))
    pz_episode(env, 0)
    assert env.agents == []
    acts = {a: env.action_space(a).sample() for a in env.possible_agents}
    with pytest.raises(RuntimeError, match="reset"):
        env.step(acts)


@pytest.mark.parametrize("env_id", [P1, P2])
def test_pettingzoo_padding_entries_are_inert(env_id):
    kw = kwargs(env_id, horizon=6, oracle=False)
    envs = [parallel_env(env_id, **kw), parallel_env(env_id, **kw)]
    strict = parallel_env(env_id, **{**kw, "infeasible": "raise"})
    obs = [e.reset(seed=4)[0] for e in envs]
    strict.reset(seed=4)
    rng = np.random.default_rng(0)
    while envs[0].agents:
        clean, dirty, n_pad = {}, {}, 0
        for a in envs[0].agents:
            present = obs[0][a]["channel_present"].astype(bool)
            shape = envs[0].action_space(a).shape
            v = (rng.random(shape) < 0.5).astype(np.int8) if env_id == P1 else rng.random(shape)
            c = v * (present if env_id == P1 else present[:, None])
            d = c.copy()
            d[~present] = 1  # every padding entry (servers / ports without a channel) set
            n_pad += int(np.count_nonzero(d[~present]))
            clean[a], dirty[a] = c, d
        assert n_pad > 0
        r0, r1 = envs[0].step(clean), envs[1].step(dirty)
        assert r0[1] == r1[1]
        a0 = envs[0].possible_agents[0]
        rep0, rep1 = r0[4][a0]["metrics"]["repaired"], r1[4][a0]["metrics"]["repaired"]
        assert rep1 == rep0 + n_pad
        obs = [r0[0], r1[0]]
        with pytest.raises(ValueError, match="padding"):
            strict.step(dirty)
        strict.step({a: np.zeros_like(v) for a, v in clean.items()})
