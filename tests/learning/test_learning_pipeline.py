"""The training pipeline: reward normalisation with the algorithm's discount, run settings from the
hyperparameter files, and the SB3 VecEnv over the native vector envs (same trajectories as DummyVecEnv)."""

import json

import gymnasium as gym
import numpy as np
import pytest

import clustergym  # noqa: F401
from clustergym.cli.main import main
from clustergym.learning.train_envs import check_pipeline, make_train_env, normalizer
from clustergym.learning.training import TrainConfig, make_train_vec, train

P1, P2, P3, P4 = (f"clustergym/{n}-v0" for n in ("MultiServerChannel", "MultiServerAllocation",
                                                  "RingAllReduce", "ApproxJobs"))
TINY = {"n_steps": 32, "batch_size": 32, "n_epochs": 1}


@pytest.mark.parametrize("gamma", [0.0, 0.3])
def test_reward_normalisation_discounts_with_the_algorithms_gamma(tmp_path, gamma):
    meta = train(TrainConfig(P4, "ppo", 64, env_kwargs={"horizon": 24, "num_machines": 10, "max_jobs": 5}, n_envs=2,
                             hyperparams={**TINY, "gamma": gamma}), str(tmp_path / "run"), progress=False)
    assert meta["hyperparams"]["gamma"] == gamma
    assert meta["reward_normalization"] == {"gamma": gamma}  # read back from the VecNormalize that trained


def test_reward_normalisation_of_gamma_zero_scales_by_the_reward_itself():
    """With gamma 0 the discounted return VecNormalize tracks is the reward: its variance is the rewards'."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    venv = normalizer(DummyVecEnv([lambda: make_train_env(P1, {"horizon": 50, "num_servers": 12})]), gamma=0.0)
    venv.seed(0)
    venv.reset()
    rewards = []
    for _ in range(40):
        venv.step_async(np.array([venv.action_space.sample()]))
        venv.step_wait()
        rewards.append(venv.get_original_reward()[0])
    r = np.asarray(rewards, dtype=np.float64)
    assert r.std() > 0
    # RunningMeanStd starts at count 1e-4 with var 1: up to that prior, the variance of the rewards (with the
    # default gamma 0.99 it would be the variance of the running discounted sum, many times larger)
    assert float(venv.ret_rms.var) == pytest.approx(np.var(r), rel=0.01)


def test_pipeline_check_refuses_a_normaliser_with_another_discount():
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    venv = normalizer(DummyVecEnv([lambda: make_train_env(P4, {"horizon": 24, "num_machines": 10, "max_jobs": 5})]),
                      gamma=0.99)
    model = PPO("MlpPolicy", venv, gamma=0.5, n_steps=32, batch_size=32, device="cpu")
    with pytest.raises(ValueError, match="gamma"):
        check_pipeline(model, venv)
    model.gamma = 0.99
    check_pipeline(model, venv)


def test_hyperparameter_file_carries_env_kwargs_and_vec(tmp_path):
    hp = tmp_path / "ppo.yml"
    hp.write_text(f"{P3}:\n  n_envs: 2\n  vec: dummy\n  env_kwargs:\n    action_mode: ring_size\n    horizon: 16\n"
                  "  n_steps: 16\n  batch_size: 32\n  n_epochs: 1\n  gamma: 0.5\n")
    meta = train(TrainConfig(P3, "ppo", 32, hyperparams_file=str(hp)), str(tmp_path / "run"), progress=False)
    assert meta["env_kwargs"]["action_mode"] == "ring_size" and meta["env_kwargs"]["horizon"] == 16
    assert meta["vec"] == "dummy" and meta["hyperparams"]["gamma"] == 0.5
    # the caller's kwargs go on top of the file's
    meta = train(TrainConfig(P3, "ppo", 32, hyperparams_file=str(hp), env_kwargs={"horizon": 8}),
                 str(tmp_path / "run2"), progress=False)
    assert meta["env_kwargs"]["horizon"] == 8 and meta["env_kwargs"]["action_mode"] == "ring_size"
    bad = tmp_path / "bad.yml"
    bad.write_text(f"{P3}:\n  env_kwargs: 3\n")
    with pytest.raises(ValueError, match="env_kwargs"):
        train(TrainConfig(P3, "ppo", 32, hyperparams_file=str(bad)), str(tmp_path / "run3"), progress=False)
    with pytest.raises(ValueError, match="run setting"):
        train(TrainConfig(P3, "ppo", 32, hyperparams={"vec": "dummy"}), str(tmp_path / "run4"), progress=False)


def test_vec_choices_and_errors(tmp_path):
    from clustergym.learning.training import resolve_vec

    assert resolve_vec(P1, "auto") == "native" and resolve_vec(P2, "auto") == "native"
    assert resolve_vec(P4, "auto") == "native"  # both action modes
    assert resolve_vec(P1, "auto", net="entity") == "dummy"
    with pytest.raises(ValueError, match="no native vector env"):
        resolve_vec("FrozenLake-v1", "native")  # an id without a native vector env
    # P3's native vector env steps the ring_size action mode only: the env kwargs decide
    assert resolve_vec(P3, "auto", env_kwargs={"action_mode": "ring_size", "horizon": 9}) == "native"
    assert resolve_vec(P3, "auto", env_kwargs={"action_mode": "placement"}) == "dummy"
    assert resolve_vec(P3, "auto") == "dummy"  # the single env's default mode is placement
    with pytest.raises(ValueError, match="action_mode='placement' is stepped by single envs only"):
        resolve_vec(P3, "native", env_kwargs={"horizon": 9})
    with pytest.raises(ValueError, match="action_mode='placement'"):
        make_train_vec(P3, {"horizon": 9}, 2, vec="native")
    with pytest.raises(ValueError, match="vec='fast' is invalid"):
        resolve_vec(P1, "fast")
    with pytest.raises(ValueError, match="one process per env"):
        make_train_vec(P3, {}, 256, vec="subproc")


CASES = [(P1, {"num_servers": 12, "horizon": 7}), (P2, {"num_servers": 16, "horizon": 7}),
         (P2, {"num_servers": 16, "horizon": 7, "action_mode": "port"}),
         (P1, {"num_servers": 12, "horizon": 5, "instances": (3, 4, 5), "max_edges": 40}),
         (P2, {"num_servers": 16, "horizon": 5, "instances": (3, 4, 5), "max_edges": 60}),
         (P2, {"num_servers": 16, "horizon": 5, "instances": (3, 4, 5), "max_edges": 60, "action_mode": "port"}),
         (P3, {"num_servers": 10, "horizon": 7, "action_mode": "ring_size", "max_jobs": 6, "arrival_rate": 3.0}),
         (P3, {"num_servers": 10, "horizon": 5, "action_mode": "ring_size", "max_jobs": 6, "arrival_rate": 3.0,
               "instances": (3, 4, 5, 6), "max_racks": 5}),
         (P4, {"num_machines": 12, "max_jobs": 4, "arrival_rate": 0.3, "horizon": 7, "action_mode": "job"}),
         (P4, {"num_machines": 12, "max_jobs": 4, "arrival_rate": 0.3, "horizon": 7}),
         (P4, {"num_machines": 12, "max_jobs": 4, "arrival_rate": 0.3, "horizon": 5, "instances": (3, 4, 5),
               "action_mode": "job"})]


@pytest.mark.parametrize("env_id,kw", CASES, ids=["P1", "P2", "P2-port", "P1-pool", "P2-pool", "P2-port-pool", "P3",
                                                  "P3-pool", "P4-job", "P4-machine", "P4-job-pool"])
def test_native_vec_env_replays_dummy_vec_env(env_id, kw):
    """Same seeds, same actions: identical observations, rewards, episode ends and terminal observations,
    across several episode ends (horizon 5-7 over 25 steps) and instance switches."""
    n = 3
    stats = True
    native = make_train_vec(env_id, {**kw, "oracle": False}, n, vec="native", stats=stats)
    dummy = make_train_vec(env_id, {**kw, "oracle": False}, n, vec="dummy", stats=stats)
    assert native.observation_space == dummy.observation_space and native.action_space == dummy.action_space
    native.seed(5)
    dummy.seed(5)
    assert np.array_equal(native.reset(), dummy.reset())
    dummy.action_space.seed(1)
    ends = 0
    for t in range(25):
        a = np.stack([dummy.action_space.sample() for _ in range(n)])
        o1, r1, d1, i1 = native.step(a)
        o2, r2, d2, i2 = dummy.step(a)
        assert np.array_equal(o1, o2), t
        np.testing.assert_allclose(r1, r2, rtol=1e-6, atol=1e-9)
        assert np.array_equal(d1, d2)
        for i in np.flatnonzero(d1):
            ends += 1
            assert np.array_equal(i1[i]["terminal_observation"], i2[i]["terminal_observation"])
            assert i1[i]["TimeLimit.truncated"] == i2[i]["TimeLimit.truncated"]
            assert i1[i]["episode"]["r"] == pytest.approx(i2[i]["episode"]["r"], rel=1e-5)
    assert ends >= 2 * n
    if env_id in (P1, P3, P4):  # MaskablePPO's masks
        from sb3_contrib.common.maskable.utils import get_action_masks

        assert np.array_equal(get_action_masks(native), get_action_masks(dummy))


@pytest.mark.parametrize("layout", ["full", "compact"])
def test_native_and_dummy_vec_envs_cap_the_slot_index_alike(layout):
    """time_cap=3 on 7-slot episodes: both training paths read min(t, 3), and only t differs from no cap."""
    kw = {"num_servers": 16, "horizon": 7, "action_mode": "port", "oracle": False}
    envs = {(vec, cap): make_train_vec(P2, kw, 2, vec=vec, layout=layout, time_cap=cap)
            for vec in ("native", "dummy") for cap in (None, 3)}
    keys = envs["dummy", None].envs[0].get_wrapper_attr("pipeline").keys
    for e in envs.values():
        e.seed(5)
    first = {k: e.reset() for k, e in envs.items()}
    space = envs["dummy", None].envs[0].unwrapped.observation_space
    t_col = sum(gym.spaces.flatdim(space[k]) for k in keys[:keys.index("t")]) if layout == "full" else -1
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(10):
        a = rng.uniform(-1, 1, size=(2,) + envs["dummy", None].action_space.shape).astype(np.float32)
        obs = {k: e.step(a)[0] for k, e in envs.items()}
        assert np.array_equal(obs["native", 3], obs["dummy", 3])
        raw, capped = obs["dummy", None], obs["dummy", 3]
        np.testing.assert_array_equal(capped[:, t_col], np.minimum(raw[:, t_col], 3))
        assert np.array_equal(np.delete(capped, t_col, axis=1), np.delete(raw, t_col, axis=1))
        seen.update(raw[:, t_col].tolist())
    assert max(seen) > 3 and first["native", 3].shape == first["native", None].shape


def test_flatten_batch_equals_gymnasium_flatten():
    from gymnasium import spaces

    from clustergym.learning.pipeline import flatten_batch

    space = spaces.Dict({"a": spaces.Box(0, 1, (2, 3)), "b": spaces.MultiBinary(4), "c": spaces.Discrete(3, start=1),
                         "d": spaces.MultiDiscrete([2, 3, 4])})
    space.seed(0)
    rows = [space.sample() for _ in range(5)]
    batch = {k: np.stack([r[k] for r in rows]) for k in space.spaces}
    got = flatten_batch(space, batch)
    want = np.stack([spaces.flatten(space, r) for r in rows]).astype(np.float32)
    assert np.array_equal(got, want)


def test_cli_train_with_no_options_uses_the_defaults(tmp_path, monkeypatch):
    """``clustergym train ENV_ID`` needs no --algo or --out: the defaults file's algorithm, runs/train/... ."""
    monkeypatch.chdir(tmp_path)
    rc = main(["train", P4, "--timesteps", "64", "--no-progress", "--set", "num_machines=10", "--set", "max_jobs=5",
               "--horizon", "16", "--hp", "n_steps=32", "--hp", "batch_size=32", "--hp", "n_epochs=1"])
    assert rc == 0
    side = tmp_path / "runs" / "train" / "ApproxJobs-v0-ppo-s0" / "clustergym.json"
    meta = json.loads(side.read_text())
    assert meta["algo"] == "ppo" and meta["vec"] == "native"  # P4's native vector env (vec="auto")


def test_fast_heads_with_plain_sb3():
    """The documented one-liner: SB3's PPO with clustergym's policy class on a plain Gymnasium chain."""
    from gymnasium.wrappers import FlattenObservation
    from stable_baselines3 import PPO

    from clustergym.learning import policy_class
    from clustergym.learning.heads import FastActorCriticPolicy

    env = FlattenObservation(gym.make(P3, action_mode="ring_size", horizon=16))
    model = PPO(policy_class("ppo"), env, n_steps=32, batch_size=32, n_epochs=1, device="cpu", seed=0)
    assert isinstance(model.policy, FastActorCriticPolicy)
    model.learn(64)
    a, _ = model.predict(env.observation_space.sample(), deterministic=True)
    assert env.action_space.contains(a.astype(env.action_space.dtype))


def test_native_vec_env_without_statistics_matches_the_wrapper():
    kw = {"num_servers": 12, "horizon": 6, "oracle": False}
    native = make_train_vec(P1, kw, 2, vec="native", stats=False)
    dummy = make_train_vec(P1, kw, 2, vec="dummy", stats=False)
    assert native.observation_space == dummy.observation_space
    assert native.observation_space.shape[0] < make_train_vec(P1, kw, 1, vec="native").observation_space.shape[0]
    native.seed(3)
    dummy.seed(3)
    assert np.array_equal(native.reset(), dummy.reset())
    for _ in range(8):
        a = np.stack([dummy.action_space.sample() for _ in range(2)])
        assert np.array_equal(native.step(a)[0], dummy.step(a)[0])


def test_bench_throughput_rows_name_cartpole_and_the_ratio():
    from clustergym.bench.throughput import throughput_rows

    envs = (("P1", P1, {"num_servers": 12}, "auto"), ("P3", P3, {"horizon": 16}, "auto"))
    rows = throughput_rows(quick=True, n_envs_list=(2,), envs=envs, rollout=64)
    assert rows[0].what.startswith("PPO training, env-steps/s, 2 envs: CartPole-v1") and rows[0].ok is None
    assert "P1 (native)" in rows[1].what and "P3 (native, action_mode=ring_size)" in rows[2].what
    for r in rows:
        assert r.measured > 0 and r.unit == "env-steps/s"
    for r in rows[1:]:
        ratio = float(r.what.rsplit(", ", 1)[1].split("x")[0])
        assert ratio == pytest.approx(r.measured / rows[0].measured, abs=0.006)
        assert r.ok == (r.measured >= 0.5 * rows[0].measured)


def test_training_vec_env_passes_sb3_only_the_info_keys_it_reads():
    """SB3 deep-copies every sub-env's info each step; the training envs pass only episode ends' keys."""
    venv = make_train_vec(P3, {"horizon": 3, "action_mode": "ring_size"}, 2, vec="dummy")
    venv.seed(0)
    venv.reset()
    keys = set()
    for _ in range(4):
        *_, infos = venv.step(np.stack([venv.action_space.sample() for _ in range(2)]))
        for info in infos:
            keys |= set(info)
    assert "episode" in keys and keys <= {"episode", "TimeLimit.truncated", "is_success", "terminal_observation"}
    full = make_train_env(P3, {"horizon": 3, "action_mode": "ring_size"})  # the public chain keeps the whole info
    full.reset(seed=0)
    assert {"feedback", "metrics", "window"} <= set(full.step(full.action_space.sample())[4])


def test_p2_compact_layout_keeps_the_per_port_keys_only(tmp_path):
    """P2's shipped entry trains on the per-port observation keys; the side-car records the layout and the sb3:
    agent rebuilds the same vector."""
    from clustergym.learning.pipeline import layout_keys

    env = gym.make(P2, action_mode="port")
    keys = layout_keys("multiserver-allocation", env.observation_space, "compact")
    assert set(keys) == {"arrivals", "t", "beta", "arrival_share", "port_reward_mean", "last_port_reward"}
    assert sum(gym.spaces.flatdim(env.observation_space[k]) for k in keys) == 47  # L = 10, K = 6
    meta = train(TrainConfig(P2, "ppo", 64, env_kwargs={"horizon": 16}, n_envs=2, hyperparams=TINY),
                 str(tmp_path / "run"), progress=False)
    assert meta["obs_layout"] == "compact" and meta["env_kwargs"]["action_mode"] == "port"
    res = clustergym.evaluate(P2, [f"sb3:{tmp_path / 'run'}/model.zip"], seeds=[0], horizon=8, instances=[5],
                              progress=False, score=False)
    assert np.isfinite(res.runs[0].total_reward)


def test_p3_compact_layout_leaves_out_only_entries_that_repeat_others(tmp_path):
    """P3's compact vector is the full one without job_mask, link_present and the download columns of links;
    along episodes on padded pool instances those entries always equal what the kept ones say."""
    from clustergym.learning.pipeline import layout_columns, layout_keys

    kw = {"action_mode": "ring_size", "horizon": 30, "instances": (3, 4, 5), "max_racks": 5, "arrival_rate": 3.0}
    env = gym.make(P3, **kw)
    space = env.observation_space
    keys = layout_keys("ringallreduce", space, "compact")
    assert keys == tuple(k for k in space.spaces if k not in ("job_mask", "link_present"))
    cols = layout_columns("ringallreduce", space, "compact")
    full, compact = make_train_env(P3, kw), make_train_env(P3, kw, layout="compact")
    L = space["links"].shape[0]  # S + max_racks link rows; 32 window rows
    assert compact.observation_space.shape == (full.observation_space.shape[0] - 32 - L - 2 * L,)
    obs, _ = env.reset(seed=2)
    f, _ = full.reset(seed=2)
    c, _ = compact.reset(seed=2)
    env.action_space.seed(0)
    for t in range(60):
        d = obs
        assert np.array_equal(d["job_mask"], (d["jobs"][:, 1] > 0).astype(np.int8)), t  # remaining budget > 0
        assert np.array_equal(d["link_present"], (d["links"][:, 0] > 0).astype(np.int8)), t
        assert np.array_equal(d["links"][:, 1], d["links"][:, 0]) and np.array_equal(d["links"][:, 3], d["links"][:, 2])
        # the full vector is rebuilt from the compact one: nothing is lost
        J, L = space["jobs"].shape[0], space["links"].shape[0]
        jobs = c[:J * 10].reshape(J, 10)  # the compact keys in the space's order: jobs, links, servers, t
        links = c[J * 10:J * 10 + 2 * L].reshape(L, 2)  # upload capacity, upload load
        servers = c[J * 10 + 2 * L:-1]
        rebuilt = {"job_mask": (jobs[:, 1] > 0).astype(np.float32), "jobs": jobs.reshape(-1),
                   "link_present": (links[:, 0] > 0).astype(np.float32),
                   "links": links[:, [0, 0, 1, 1]].reshape(-1), "servers": servers, "t": c[-1:]}
        assert np.array_equal(np.concatenate([rebuilt[k] for k in space.spaces]), f), t
        assert sorted(set(cols["links"] % 4)) == [0, 2]
        a = env.action_space.sample()
        obs, _, _, trunc, _ = env.step(a)
        f, *_ = full.step(a)
        c, *_ = compact.step(a)
        if trunc:
            obs, _ = env.reset()
            f, _ = full.reset()
            c, _ = compact.reset()
    # the native path gives the same compact vectors as single envs in DummyVecEnv
    native = make_train_vec(P3, kw, 2, vec="native", layout="compact")
    dummy = make_train_vec(P3, kw, 2, vec="dummy", layout="compact")
    native.seed(1)
    dummy.seed(1)
    assert np.array_equal(native.reset(), dummy.reset())
    dummy.action_space.seed(3)
    for t in range(40):
        a = np.stack([dummy.action_space.sample() for _ in range(2)])
        assert np.array_equal(native.step(a)[0], dummy.step(a)[0]), t
    # the shipped entry trains P3 on it, natively; the sb3: agent rebuilds the same vector
    meta = train(TrainConfig(P3, "ppo", 64, env_kwargs={"horizon": 16}, n_envs=2, hyperparams=TINY),
                 str(tmp_path / "run"), progress=False)
    assert meta["obs_layout"] == "compact" and meta["vec"] == "native"
    res = clustergym.evaluate(P3, [f"sb3:{tmp_path / 'run'}/model.zip"], seeds=[0], horizon=8, instances=[5],
                              progress=False, score=False)
    assert np.isfinite(res.runs[0].total_reward)
