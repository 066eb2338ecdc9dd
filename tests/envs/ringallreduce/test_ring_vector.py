"""P3's native vector env (``action_mode="ring_size"``): every sub-env replays the single env exactly."""

import copy

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import clustergym  # noqa: F401
from tests.helpers import assert_vector_runs_repeat, batch_row, deep_equal

P3 = "clustergym/RingAllReduce-v0"
SMALL = dict(action_mode="ring_size", num_servers=12, max_jobs=8, arrival_rate=3.0)


def make_vec(n, **kw):
    return gym.make_vec(P3, num_envs=n, vectorization_mode="vector_entry_point", **kw)


def sizes(vec, rng, t):
    """(N, J) requested sizes: uniform over 0..workers_max (most above the cap, many on empty rows: the repair
    path), every third step within the caps (window["cap"], the greedy placement decides alone)."""
    nvec = vec.single_action_space.nvec
    a = rng.integers(0, nvec, size=(vec.num_envs, nvec.size))
    if t % 3 == 0:
        a = np.minimum(a, vec.unwrapped.action_masks().reshape(vec.num_envs, nvec.size, -1).sum(axis=2) - 1)
    return a


def assert_info_row(info, i, single_info, stepped):
    assert info["t"][i] == single_info["t"]
    assert np.array_equal(info["action_mask"][i], single_info["action_mask"])
    assert deep_equal(batch_row(info["window"], i), single_info["window"])
    if not stepped:
        assert not info.get("_feedback", np.zeros(len(info["t"]), bool))[i]
        return
    assert info["_feedback"][i] and info["_metrics"][i]
    assert deep_equal(batch_row(info["feedback"], i), single_info["feedback"])
    m = batch_row(info["metrics"], i)
    assert set(m) == set(single_info["metrics"])
    for key, value in single_info["metrics"].items():
        if key == "link_util":  # summed in another order
            assert m[key] == pytest.approx(value, rel=1e-12, abs=1e-15)
        else:
            assert m[key] == value, (key, m[key], value)


CASES = {
    # a 256-slot block boundary inside the episode (horizon 270), one autoreset
    "paper": (dict(SMALL, horizon=270), 300),
    # an instance pool padded to 5 racks: instances with 2..5 racks and other GPUs, many autoresets
    "pool": (dict(SMALL, horizon=40, instances=range(8), max_racks=5), 300),
    # the default size (50 servers, 32 visible jobs) on the trace scenario
    "philly": (dict(action_mode="ring_size", scenario="philly", horizon=90), 200),
}


@pytest.mark.parametrize("case", list(CASES))
def test_sub_envs_replay_single_envs_exactly(case):
    kw, steps = CASES[case]
    N, seed = 3, 11
    vec = make_vec(N, **kw)
    singles = [gym.make(P3, **kw).unwrapped for _ in range(N)]
    obs, info = vec.reset(seed=seed)
    for i, s in enumerate(singles):
        s_obs, s_info = s.reset(seed=seed + i)
        assert deep_equal(batch_row(obs, i), s_obs)
        assert_info_row(info, i, s_info, stepped=False)
    rng = np.random.default_rng(seed)
    ended = np.zeros(N, dtype=bool)
    autoresets = repaired = 0
    racks = set()
    for t in range(steps):
        a = sizes(vec, rng, t)
        obs, reward, terminated, truncated, info = vec.step(a)
        for i, s in enumerate(singles):
            if ended[i]:  # NEXT_STEP autoreset: this step resets sub-env i without a seed
                s_obs, s_info = s.reset()
                s_r, s_term, s_trunc = 0.0, False, False
                autoresets += 1
            else:
                s_obs, s_r, s_term, s_trunc, s_info = s.step(a[i])
                repaired += s_info["metrics"]["repaired"] > 0
                assert reward[i] == pytest.approx(s_info["feedback"]["gain"].sum())
            racks.add(s.problem.topology.num_racks)
            assert s.scenario_seed == vec.unwrapped.scenario_seeds[i]
            assert deep_equal(batch_row(obs, i), s_obs), (t, i)
            assert reward[i] == s_r, (t, i, reward[i], s_r)
            assert terminated[i] == s_term and truncated[i] == s_trunc
            assert_info_row(info, i, s_info, stepped=not ended[i])
        ended = terminated | truncated
    assert autoresets >= N and repaired >= steps  # episode ends and the repair path, many times
    assert vec.observation_space.contains(obs)
    if case == "pool":
        assert len(racks) >= 2  # sub-envs ran instances with different numbers of racks (padded arrays)


def test_raise_mode_gives_the_single_envs_message_and_a_rejected_step_changes_nothing():
    """infeasible="raise": whenever some single env raises for its row, the vector env raises with the first such
    sub-env's message (eq. 6, eq. 2, eq. 11 and "no feasible ring placement" all occur) and changes nothing: it
    goes on exactly as the single envs, which did not step either."""
    kw = dict(SMALL, num_servers=6, arrival_rate=1.0, gpu_scale=0.5, bw_scale=0.05, horizon=60, infeasible="raise")
    N = 3
    vec = make_vec(N, **kw)
    singles = [gym.make(P3, **kw).unwrapped for _ in range(N)]
    vec.reset(seed=2)
    for i, s in enumerate(singles):
        s.reset(seed=2 + i)
    rng = np.random.default_rng(0)
    seen = set()
    for t in range(59):
        caps = np.stack([s.action_masks().reshape(-1, 6).sum(axis=1) - 1 for s in singles])
        a = np.minimum(rng.integers(0, 6, size=caps.shape), caps)  # feasible sizes; the placement may still fail
        if t % 2:
            a = np.minimum(a + (rng.random(a.shape) < 0.1), 5)  # now and then one worker too many, or one on an empty row
        errors = []
        for i, s in enumerate(singles):
            try:
                copy.deepcopy(s).step(a[i])
            except ValueError as exc:
                errors.append((i, str(exc)))
        if errors:
            i, msg = errors[0]
            seen.add(msg.rsplit("(", 1)[1])
            with pytest.raises(ValueError) as got:
                vec.step(a)
            assert str(got.value) == f"sub-env {i}: {msg}"
            a = np.zeros_like(a)  # a step every env takes
        obs, reward, *_ = vec.step(a)
        for i, s in enumerate(singles):
            s_obs, s_r, *_ = s.step(a[i])
            assert deep_equal(batch_row(obs, i), s_obs) and reward[i] == s_r, (t, i)
    assert seen >= {"eq. 6)", "eq. 2)", "eqs. 4, 19)"}, seen


def test_bad_action_forms_name_the_sub_env():
    vec = make_vec(3, **SMALL, horizon=20).unwrapped
    vec.reset(seed=0)
    shape = vec.action_space.shape
    with pytest.raises(ValueError, match=r"actions have shape \(3, 5\)"):
        vec.step(np.zeros((3, 5), dtype=np.int64))
    bad = np.zeros(shape, dtype=np.int64)
    bad[2, 1] = 6  # workers_max = 5
    with pytest.raises(ValueError, match="sub-env 2: action values out of range"):
        vec.step(bad)
    bad = np.zeros(shape)
    bad[1, 3] = np.nan
    with pytest.raises(ValueError, match="sub-env 1: action contains NaN or inf"):
        vec.step(bad)
    bad[1, 3] = 0.5
    with pytest.raises(ValueError, match="sub-env 1: action has non-integer values"):
        vec.step(bad)
    with pytest.raises(ValueError, match="actions have dtype"):
        vec.step(np.full(shape, "1"))
    ref = make_vec(3, **SMALL, horizon=20)
    ref.reset(seed=0)
    ok = np.ones(shape, dtype=np.float32)  # floats and bools of integer value are accepted, as by the single env
    assert deep_equal(list(vec.step(ok)), list(ref.step(ok.astype(np.int64))))


def test_placement_mode_is_refused_with_the_way_out():
    with pytest.raises(ValueError, match="action_mode='placement' is stepped by single envs only.*gym.make"):
        make_vec(2, horizon=10)
    with pytest.raises(ValueError, match="action_mode"):
        make_vec(2, horizon=10, action_mode="nope")  # the single env's check


def test_metadata_spaces_masks_and_observations_within_spaces():
    vec = make_vec(4, **SMALL, horizon=20)
    single = gym.make(P3, **SMALL, horizon=20).unwrapped
    assert vec.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    assert vec.single_action_space == single.action_space
    assert vec.single_observation_space == single.observation_space
    assert vec.action_space.shape == (4, single.max_jobs)
    obs, info = vec.reset(seed=5)
    masks = vec.unwrapped.action_masks()
    for i in range(4):
        single.reset(seed=5 + i)
        assert np.array_equal(masks[i], single.action_masks())
    assert np.array_equal(masks.reshape(4, single.max_jobs, -1)[:, :, 0], np.ones((4, single.max_jobs), bool))
    assert vec.observation_space.contains(obs)


def test_seed_list_reset_mask_and_instance_option():
    kw = dict(SMALL, horizon=30, max_racks=5)
    vec = make_vec(3, **kw)
    single = gym.make(P3, **kw).unwrapped
    obs, _ = vec.reset(seed=[4, None, 6])
    assert deep_equal(batch_row(obs, 0), single.reset(seed=4)[0])
    assert deep_equal(batch_row(obs, 2), single.reset(seed=6)[0])
    vec.step(np.zeros((3, 8), dtype=np.int64))
    mask = np.array([False, True, False])
    obs, info = vec.reset(seed=[None, 9, None], options={"reset_mask": mask, "scenario_seed": 7})
    assert np.array_equal(info["_t"], mask) and list(info["t"]) == [1, 0, 1]
    assert list(vec.unwrapped.scenario_seeds) == [0, 7, 0]
    assert deep_equal(batch_row(obs, 1), single.reset(seed=9, options={"scenario_seed": 7})[0])
    assert list(obs["t"][:, 0]) == [1.0, 0.0, 1.0]
    # without padding only instances with the construction instance's racks fit
    plain = make_vec(2, **SMALL, horizon=30)
    plain.reset(seed=0)
    R0 = plain.unwrapped.problem.topology.num_racks
    other = next(k for k in range(1, 40)
                 if gym.make(P3, **SMALL, scenario_seed=k).unwrapped.problem.topology.num_racks != R0)
    with pytest.raises(ValueError, match="max_racks"):
        plain.reset(seed=0, options={"scenario_seed": other})
    assert list(plain.unwrapped.scenario_seeds) == [0, 0]


def test_same_seed_same_trajectory_and_copies_continue_identically():
    kw = dict(SMALL, horizon=25, instances=range(4), max_racks=5)
    assert_vector_runs_repeat(lambda: make_vec(4, **kw), sizes, steps=60)


def test_active_job_arrays_grow_past_their_first_capacity():
    """A heavy load (10 arrivals per slot, one visible job): the active-job arrays double, the replay stays exact."""
    kw = dict(action_mode="ring_size", num_servers=8, max_jobs=1, arrival_rate=10.0, horizon=40)
    vec = make_vec(2, **kw)
    first = vec.unwrapped.jobs_capacity
    singles = [gym.make(P3, **kw).unwrapped for _ in range(2)]
    obs, _ = vec.reset(seed=1)
    for i, s in enumerate(singles):
        s.reset(seed=1 + i)
    for t in range(39):
        a = np.full((2, 1), 5)
        obs, r, *_ = vec.step(a)
        for i, s in enumerate(singles):
            s_obs, s_r, *_ = s.step(a[i])
            assert deep_equal(batch_row(obs, i), s_obs) and r[i] == s_r
    assert vec.unwrapped.jobs_capacity > first


def test_oracle_metrics_equal_the_single_envs():
    kw = dict(action_mode="ring_size", num_servers=8, max_jobs=4, arrival_rate=1.0, horizon=3, oracle=True)
    vec = make_vec(2, **kw)
    singles = [gym.make(P3, **kw).unwrapped for _ in range(2)]
    vec.reset(seed=0)
    for i, s in enumerate(singles):
        s.reset(seed=i)
    for t in range(3):
        a = np.full((2, 4), 2)
        *_, info = vec.step(a)
        for i, s in enumerate(singles):
            *_, s_info = s.step(a[i])
            for key in ("oracle_reward", "regret"):
                assert info["metrics"][key][i] == s_info["metrics"][key], (key, t, i)
