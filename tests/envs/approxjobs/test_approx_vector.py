"""P4's native vector env: every sub-env replays the single env exactly, step by step."""


import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import clustergym  # noqa: F401
from tests.helpers import assert_vector_runs_repeat, batch_row, deep_equal

P4 = "clustergym/ApproxJobs-v0"
# A long queue behind a small window (queued jobs expire), a rate block boundary (slot 256) and truncations
# on a pool of instances (built on the one with the fewest jobs, 64: the per-job arrays must grow); and the
# one-job scenario, whose job runs out of budget: early terminations.
QUEUE = dict(num_machines=12, max_jobs=4, arrival_rate=0.25, horizon=280, instances=range(6), scenario_seed=1)
SINGLE = dict(scenario="single", num_machines=8, horizon=40, budget_rate=1.0, instances=range(4))


def make_vec(n, **kw):
    return gym.make_vec(P4, num_envs=n, vectorization_mode="vector_entry_point", **kw)


def actions(vec, info, rng, t):
    """A batch of actions: sampled (machine mode: nearly all need repair), masked, sparse or idle."""
    a = vec.action_space.sample()
    if t % 4 == 1:  # only what the mask allows (job mode: levels of live jobs; machine mode: affordable slots)
        m = info["action_mask"].reshape(a.shape[0], a.shape[1], -1)
        a = np.where(m[np.arange(a.shape[0])[:, None], np.arange(a.shape[1])[None, :], a], a, 0)
    elif t % 4 == 2:
        a = a * (rng.random(a.shape) < 0.2)
    elif t % 9 == 3:
        a = np.zeros_like(a)
    return a


def assert_info_row_equals_single(info, i, s_info):
    assert info["t"][i] == s_info["t"]
    assert np.array_equal(info["action_mask"][i], s_info["action_mask"])
    if "feedback" not in s_info:  # the reset of an autoreset step
        absent = np.zeros(len(info["t"]), dtype=bool)
        assert not info.get("_feedback", absent)[i] and not info.get("_metrics", absent)[i]
        return
    assert info["_feedback"][i] and info["_metrics"][i]
    assert deep_equal(batch_row(info["feedback"], i), s_info["feedback"])
    masks = info["metrics"]
    for key, value in s_info["metrics"].items():
        assert masks[f"_{key}"][i], key
        assert np.array_equal(masks[key][i], value), (key, masks[key][i], value)
    for key in masks:  # no extra metrics for this sub-env
        if not key.startswith("_") and masks[f"_{key}"][i]:
            assert key in s_info["metrics"], key


@pytest.mark.parametrize("mode", ["job", "machine"])
@pytest.mark.parametrize("case", ["queue", "single"])
def test_sub_envs_replay_single_envs_exactly(mode, case):
    """N sub-envs seeded s+i against N single envs reset with s+i, same kwargs, same actions: observations,
    rewards, episode ends, action masks, feedback and every metric equal exactly, across truncations or
    terminations, autoresets and instance draws."""
    kw = dict(QUEUE if case == "queue" else SINGLE, action_mode=mode, oracle=False)
    N, seed, steps = 3, 4, 600
    vec = make_vec(N, **kw)
    singles = [gym.make(P4, **kw).unwrapped for _ in range(N)]
    obs, info = vec.reset(seed=seed)
    for i, s in enumerate(singles):
        s_obs, s_info = s.reset(seed=seed + i)
        assert deep_equal(batch_row(obs, i), s_obs)
        assert_info_row_equals_single(info, i, s_info)
    vec.action_space.seed(seed)
    rng = np.random.default_rng(seed)
    ended = np.zeros(N, dtype=bool)
    seen = {"autoresets": 0, "terminated": 0, "truncated": 0, "repaired": 0, "instances": set(), "reward": 0.0,
            "left": 0, "queued": 0}
    for t in range(steps):
        a = actions(vec, info, rng, t)
        obs, reward, terminated, truncated, info = vec.step(a)
        assert reward.dtype == np.float64 and reward.shape == (N,)
        for i, s in enumerate(singles):
            if ended[i]:  # NEXT_STEP autoreset: this step resets sub-env i without a seed
                seen["left"] += int(s.job_records()["left"].sum())
                s_obs, s_info = s.reset()
                s_r, s_term, s_trunc = 0.0, False, False
                seen["autoresets"] += 1
            else:
                s_obs, s_r, s_term, s_trunc, s_info = s.step(a[i])
                seen["repaired"] += s_info["metrics"]["repaired"]
            assert deep_equal(batch_row(obs, i), s_obs), (t, i)
            assert reward[i] == s_r, (t, i, reward[i], s_r)
            assert terminated[i] == s_term and truncated[i] == s_trunc, (t, i)
            assert_info_row_equals_single(info, i, s_info)
            assert vec.unwrapped.scenario_seeds[i] == s.scenario_seed
            seen["instances"].add(s.scenario_seed)
        seen["queued"] = max(seen["queued"], int(vec.unwrapped._state.ctr[:, 1].max()))  # jobs waiting
        seen["terminated"] += int(terminated.sum())
        seen["truncated"] += int(truncated.sum())
        seen["reward"] += float(reward.sum())
        ended = terminated | truncated
    assert vec.observation_space.contains(obs)
    # every path ran: episode ends of the case's kind and their autoresets, instance switches, rewards, repairs
    assert seen["autoresets"] >= N and len(seen["instances"]) > 1 and seen["reward"] > 0
    assert seen["truncated" if case == "queue" else "terminated"] >= N
    if mode == "machine":
        assert seen["repaired"] > 0
    assert seen["left"] > 0
    if case == "queue":  # the queue outgrew the window; the episodes crossed a rate block
        assert seen["queued"] > 0 and vec.unwrapped.horizon > 256
        assert vec.unwrapped._state.cap > len(gym.make(P4, **{**kw, "instances": None}).unwrapped.scenario.truth.jobs)


def test_episode_summaries_and_bound_only_where_an_episode_ends():
    kw = dict(SINGLE, action_mode="job", oracle=True)
    vec = make_vec(3, **kw)
    single = gym.make(P4, **kw).unwrapped
    vec.reset(seed=0)
    single.reset(seed=1)
    full = np.full((3, vec.single_action_space.shape[0]), 10)
    for t in range(40):
        _, _, term, trunc, info = vec.step(full)
        _, _, s_term, s_trunc, s_info = single.step(full[1])
        ended = term | trunc
        m = info["metrics"]
        if "_episode_utility" in m:
            assert np.array_equal(m["_episode_utility"], ended) and np.array_equal(m["_episode_bound"], ended)
        else:
            assert not ended.any()
        if s_term or s_trunc:
            assert ended[1]
            for key in ("episode_utility", "episode_bound", "episode_jobs_served", "episode_migrations"):
                assert m[key][1] == s_info["metrics"][key], key
            assert m["episode_bound"][1] >= m["episode_utility"][1] > 0
            break
    else:
        pytest.fail("the single env's episode did not end")


def test_seed_list_reset_mask_and_instance_option():
    kw = dict(QUEUE, action_mode="job")
    vec = make_vec(3, **kw)
    obs, _ = vec.reset(seed=[4, None, 6])
    single = gym.make(P4, **kw).unwrapped
    assert deep_equal(batch_row(obs, 2), single.reset(seed=6)[0])
    assert deep_equal(batch_row(obs, 0), batch_row(make_vec(3, **kw).reset(seed=4)[0], 0))
    vec.step(np.zeros((3, 4), dtype=np.int64))
    mask = np.array([False, True, False])
    obs, info = vec.reset(seed=[None, 9, None], options={"reset_mask": mask})
    assert np.array_equal(info["_t"], mask) and list(info["t"]) == [1, 0, 1]
    assert deep_equal(batch_row(obs, 1), single.reset(seed=9)[0])
    assert list(obs["t"][:, 0]) == [1.0, 0.0, 1.0]
    vec.reset(seed=0, options={"scenario_seed": 5, "reset_mask": np.array([True, False, False])})
    assert vec.unwrapped.scenario_seeds[0] == 5
    assert vec.unwrapped.problems[0].price.tolist() == gym.make(P4, **{
        **kw, "scenario_seed": 5, "instances": None}).unwrapped.problem.price.tolist()
    with pytest.raises(ValueError, match="scenario_seed"):
        vec.reset(seed=0, options={"foo": 1})


@pytest.mark.parametrize("mode", ["job", "machine"])
def test_metadata_spaces_and_masks(mode):
    vec = make_vec(4, action_mode=mode, horizon=20)
    single = gym.make(P4, action_mode=mode, horizon=20).unwrapped
    assert vec.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    assert vec.single_action_space == single.action_space
    assert vec.single_observation_space == single.observation_space
    assert vec.action_space.shape == (4, *single.action_space.shape)
    obs, info = vec.reset(seed=0)
    assert vec.observation_space.contains(obs)
    m = vec.unwrapped.action_masks()
    assert m.shape == (4, single.action_masks().size) and np.array_equal(m, info["action_mask"])
    assert np.array_equal(m[2], single.reset(seed=2)[1]["action_mask"])


def test_same_seed_same_trajectory_pickle_and_deepcopy():
    kw = dict(QUEUE, action_mode="job", horizon=30)
    assert_vector_runs_repeat(lambda: make_vec(4, **kw), lambda vec, rng, t: (rng.random((4, 4)) * 11).astype(np.int64))


def test_bad_actions_name_the_sub_env_and_change_nothing():
    # small budgets: one job cannot pay for every machine
    kw = dict(num_machines=12, max_jobs=4, arrival_rate=0.25, horizon=60, action_mode="machine", budget_low=0.05,
              budget_high=0.1)
    vec = make_vec(3, infeasible="raise", **kw).unwrapped
    ref = make_vec(3, **kw).unwrapped
    single = gym.make(P4, infeasible="raise", **kw).unwrapped
    vec.reset(seed=2)
    ref.reset(seed=2)
    single.reset(seed=3)
    zero = np.zeros((3, 12), dtype=np.int64)
    for _ in range(5):  # jobs arrive
        vec.step(zero)
        ref.step(zero)
        single.step(zero[1])
    with pytest.raises(ValueError, match=r"actions have shape \(3, 5\)"):
        vec.step(np.zeros((3, 5)))
    bad = np.zeros((3, 12))
    bad[1, 3] = np.nan
    with pytest.raises(ValueError, match="sub-env 1: action contains NaN or inf"):
        vec.step(bad)
    bad = zero.copy()
    bad[2, 0] = 5
    with pytest.raises(ValueError, match=r"sub-env 2: action values must be in 0\.\.4"):
        vec.step(bad)
    occupied = ref.step(zero)[0]["job_mask"][1].astype(bool)  # ref one step ahead: step vec too
    vec.step(zero)
    single.step(zero[1])
    assert occupied.any() and not occupied.all()
    bad = zero.copy()
    bad[1, 0] = int(np.flatnonzero(~occupied)[0]) + 1
    with pytest.raises(ValueError, match="sub-env 1: infeasible action: machine 0 is given window slot .* no job"):
        vec.step(bad)
    bad = zero.copy()
    bad[1] = int(np.flatnonzero(occupied)[0]) + 1  # every machine on one job: over its budget (eq. 4)
    with pytest.raises(ValueError) as err:
        vec.step(bad)
    with pytest.raises(ValueError) as s_err:  # the single env's words for the same state and action
        single.step(bad[1])
    assert str(err.value) == f"sub-env 1: {s_err.value}" and "eq. 4" in str(err.value)
    assert deep_equal(list(vec.step(zero)), list(ref.step(zero)))  # nothing changed by the rejected steps
