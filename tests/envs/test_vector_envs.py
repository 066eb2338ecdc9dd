"""Native vector envs: every sub-env replays the single env exactly, step by step."""


import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import clustergym  # noqa: F401
from tests.helpers import assert_vector_runs_repeat, batch_row, deep_equal

P1 = "clustergym/MultiServerChannel-v0"
P2 = "clustergym/MultiServerAllocation-v0"
VECTOR_IDS = [P1, P2]


def make_vec(env_id, n, **kw):
    return gym.make_vec(env_id, num_envs=n, vectorization_mode="vector_entry_point", **kw)


def actions_for(env_id, vec, rng, t):
    """A batch of actions, many of which need repair (or would raise)."""
    N = vec.num_envs
    if env_id == P1:
        a = (rng.random((N, vec.unwrapped._E)) < 0.4).astype(np.int8)  # idle channels and over capacity
        if t % 3 == 0:
            a &= vec.unwrapped._mask  # only active channels, often still over capacity
        return a
    hi = vec.single_action_space.high
    if t % 4 == 1:  # feasible: the fused kernel's fast path, with values within tol on some structural zeros
        from clustergym.agents.ogasched import proportional_share

        a = proportional_share(vec.unwrapped.problem) * rng.uniform(0.0, 0.99, size=(N, *hi.shape))
        stray = (a == 0) & (rng.random(a.shape) < 0.05)
        a[stray] = rng.uniform(-5e-7, 5e-7, size=int(stray.sum()))
        return a.astype(np.float32 if t % 3 else np.float64)
    a = (hi * rng.random((N, *hi.shape)) * (0.6 if t % 2 else 1.3)).astype(np.float32 if t % 3 else np.float64)
    if t % 7 == 0:
        a[:, 0, 0] = -0.1  # eq. 3 violated
    return a


def assert_row_equals_single(env_id, vec_info, i, single_info):
    """Sub-env i's info equals the single env's, key by key, exactly."""
    assert vec_info["t"][i] == single_info["t"]
    if env_id == P1:
        assert np.array_equal(vec_info["action_mask"][i], single_info["action_mask"])
    if "feedback" not in single_info:
        assert not vec_info.get("_feedback", np.zeros(len(vec_info["t"]), bool))[i]
        return
    assert vec_info["_feedback"][i] and vec_info["_metrics"][i]
    fb, sfb = batch_row(vec_info["feedback"], i), single_info["feedback"]
    if env_id == P1:
        assert np.array_equal(fb["executed"], sfb["executed"])
        assert np.array_equal(fb["utilities"], sfb["utilities"])
        assert np.all(fb["utilities"][~fb["executed"]] == 0.0)
    else:
        assert np.array_equal(fb["allocation"].astype(np.float64), sfb["allocation"])
        assert np.array_equal(fb["port_reward"], sfb["port_reward"])
    masks = vec_info["metrics"]
    for key, value in single_info["metrics"].items():
        assert masks[f"_{key}"][i], key
        assert np.array_equal(masks[key][i], value), (key, masks[key][i], value)
    for key in masks:  # no extra metrics for this sub-env
        if not key.startswith("_") and masks[f"_{key}"][i]:
            assert key in single_info["metrics"], key


@pytest.mark.parametrize("env_id", VECTOR_IDS)
@pytest.mark.parametrize("seed", [0, 11])
def test_sub_envs_replay_single_env_exactly(env_id, seed):
    """300 steps, horizon 260: crosses the 256-slot block boundary and one autoreset (NEXT_STEP)."""
    N, horizon, steps = 3, 260, 300
    kw = dict(horizon=horizon, oracle=True)
    vec = make_vec(env_id, N, **kw)
    singles = [gym.make(env_id, **kw).unwrapped for _ in range(N)]
    obs, info = vec.reset(seed=seed)
    for i, s in enumerate(singles):
        s_obs, s_info = s.reset(seed=seed + i)
        assert deep_equal(batch_row(obs, i), s_obs)
        assert_row_equals_single(env_id, info, i, s_info)
    rng = np.random.default_rng(seed)
    ended = np.zeros(N, dtype=bool)
    autoresets = 0
    for t in range(steps):
        a = actions_for(env_id, vec, rng, t)
        obs, reward, terminated, truncated, info = vec.step(a)
        for i, s in enumerate(singles):
            if ended[i]:  # NEXT_STEP autoreset: this step resets sub-env i without a seed
                s_obs, s_info = s.reset()
                s_r, s_term, s_trunc = 0.0, False, False
                autoresets += 1
            else:
                s_obs, s_r, s_term, s_trunc, s_info = s.step(a[i])
            assert deep_equal(batch_row(obs, i), s_obs), (t, i)
            assert reward[i] == s_r and isinstance(s_r, float), (t, i, reward[i], s_r)
            assert terminated[i] == s_term and truncated[i] == s_trunc
            assert_row_equals_single(env_id, info, i, s_info)
        ended = terminated | truncated
    assert autoresets == N
    assert vec.observation_space.contains(obs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_p2_sampled_actions_repaired_in_the_vector_kernel_equal_the_single_env(dtype):
    """action_space.sample() (what a random policy or PPO sends): nearly every row is outside Y and
    repaired inside ``step_batch``; each sub-env still equals a single env exactly (reward, executed
    allocation, every metric), also in batches where some rows are feasible and across an autoreset."""
    N, horizon = 4, 30
    vec = make_vec(P2, N, horizon=horizon, oracle=False)
    singles = [gym.make(P2, horizon=horizon, oracle=False).unwrapped for _ in range(N)]
    vec.reset(seed=5)
    for i, s in enumerate(singles):
        s.reset(seed=5 + i)
    vec.action_space.seed(1)
    ended = np.zeros(N, dtype=bool)
    repaired = 0
    kept = None
    for t in range(2 * horizon + 3):
        a = vec.action_space.sample().astype(dtype)
        if t % 5 == 2:  # a mixed batch: row 1 feasible (zeros), the others repaired
            a[1] = 0
        obs, reward, terminated, truncated, info = vec.step(a)
        if kept is not None:  # an allocation handed out earlier is never overwritten by a later step
            assert np.array_equal(kept[0], kept[1])
        kept = (info["feedback"]["allocation"], info["feedback"]["allocation"].copy())
        for i, s in enumerate(singles):
            if ended[i]:
                s_obs, s_info = s.reset()
                s_r = 0.0
            else:
                s_obs, s_r, _, _, s_info = s.step(a[i])
                repaired += s_info["metrics"]["repaired"] > 0
            assert deep_equal(batch_row(obs, i), s_obs)
            assert reward[i] == s_r, (t, i, reward[i], s_r)
            assert_row_equals_single(P2, info, i, s_info)
        ended = terminated | truncated
    assert repaired >= 0.7 * N * 2 * horizon  # the repair path, not the feasible one, was exercised


@pytest.mark.parametrize("env_id", VECTOR_IDS)
def test_seed_list_and_reset_mask(env_id):
    vec = make_vec(env_id, 3, horizon=50, oracle=False)
    obs_list, _ = vec.reset(seed=[4, None, 6])
    obs_int, _ = make_vec(env_id, 3, horizon=50, oracle=False).reset(seed=4)
    assert np.array_equal(obs_list["arrivals"][0], obs_int["arrivals"][0])
    single = gym.make(env_id, horizon=50, oracle=False).unwrapped
    assert np.array_equal(obs_list["arrivals"][2], single.reset(seed=6)[0]["arrivals"])
    vec.step(actions_for(env_id, vec, np.random.default_rng(0), 1) * 0)
    mask = np.array([False, True, False])
    obs, info = vec.reset(seed=[None, 9, None], options={"reset_mask": mask})
    assert np.array_equal(info["_t"], mask) and list(info["t"]) == [1, 0, 1]
    assert np.array_equal(obs["arrivals"][1], single.reset(seed=9)[0]["arrivals"])
    assert list(obs["t"][:, 0]) == [1.0, 0.0, 1.0]


@pytest.mark.parametrize("env_id", VECTOR_IDS)
def test_metadata_spaces_and_masks(env_id):
    vec = make_vec(env_id, 4, horizon=20, oracle=False)
    assert vec.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    single = gym.make(env_id, horizon=20).unwrapped
    assert vec.single_action_space == single.action_space
    assert vec.single_observation_space == single.observation_space
    assert vec.action_space.shape == (4, *single.action_space.shape)
    obs, info = vec.reset(seed=0)
    assert vec.observation_space.contains(obs)
    if env_id == P1:
        m = vec.unwrapped.action_masks()
        E = single.problem.num_edges
        assert m.shape == (4, 2 * E) and m[:, 0::2].all()
        assert np.array_equal(m[:, 1::2], info["action_mask"])


@pytest.mark.parametrize("env_id", VECTOR_IDS)
def test_same_seed_same_trajectory_and_copies(env_id):
    assert_vector_runs_repeat(lambda: make_vec(env_id, 4, horizon=30, oracle=False),
                              lambda vec, rng, t: actions_for(env_id, vec, rng, t))


@pytest.mark.parametrize("env_id", VECTOR_IDS)
def test_bad_actions_name_the_sub_env_and_change_nothing(env_id):
    vec = make_vec(env_id, 3, horizon=40, oracle=False, infeasible="raise").unwrapped
    ref = make_vec(env_id, 3, horizon=40, oracle=False).unwrapped
    vec.reset(seed=2)
    ref.reset(seed=2)
    shape = vec.action_space.shape
    with pytest.raises(ValueError, match=r"actions have shape \(3, 5\)"):
        vec.step(np.zeros((3, 5)))
    bad = np.zeros(shape, dtype=np.float32)
    bad[1].flat[3] = np.nan
    with pytest.raises(ValueError, match="sub-env 1: action contains NaN or inf"):
        vec.step(bad)
    if env_id == P1:
        bad = np.zeros(shape, dtype=np.int64)
        bad[2, 0] = 2
        with pytest.raises(ValueError, match="sub-env 2: action values must be 0 or 1"):
            vec.step(bad)
        over = np.broadcast_to(vec._mask[1], shape).astype(np.int8)  # every active channel: over capacity
        over = np.where(np.arange(3)[:, None] == 1, over, 0)
        with pytest.raises(ValueError, match=r"sub-env 1: infeasible action: device type \d .* \(excess \d+, eq. 2\)"):
            vec.step(over)
    else:
        bad = np.zeros(shape)
        bad[2, 4, 0] = -1.0
        with pytest.raises(ValueError, match=r"sub-env 2: infeasible action: y\[4, 0\] = -1 .*\(eq. 3\)"):
            vec.step(bad)
    zero = np.zeros(shape, dtype=vec.single_action_space.dtype)
    assert deep_equal(list(vec.step(zero)), list(ref.step(zero)))  # nothing changed by the rejected steps


def test_numpy_sum_matches_numpy():
    from clustergym.envs.multiserver.channel.dynamics import numpy_sum

    rng = np.random.default_rng(0)
    for n in list(range(0, 40)) + [127, 128, 129, 255, 256, 257, 1000, 3001]:
        a = rng.random(n) * 10.0 ** rng.integers(-3, 4, size=n)
        assert numpy_sum(a, n) == a.sum(), n
