"""Warm start by behaviour cloning: the teacher's actions mapped into the training
env's action space, the supervised fit, determinism, the no-pickle loader, and the cloned policy (step 0 of
fine-tuning) within 10% of its teacher on held-out instances."""

import json

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("stable_baselines3")
pytest.importorskip("sb3_contrib")

import clustergym  # noqa: E402
from clustergym.core.agent import make, public_info  # noqa: E402
from clustergym.cli.main import main  # noqa: E402
from clustergym.learning.imitation import BC_BOX_STD, FINETUNE_HP, to_train_action  # noqa: E402
from clustergym.learning.instances import padding_for  # noqa: E402
from clustergym.learning.train_envs import make_train_env  # noqa: E402
from clustergym.learning.training import TrainConfig, train  # noqa: E402

P1 = "clustergym/MultiServerChannel-v0"
P2 = "clustergym/MultiServerAllocation-v0"
P3 = "clustergym/RingAllReduce-v0"
P4 = "clustergym/ApproxJobs-v0"
# (env, algo, teacher, small scenario kwargs)
CASES = [(P1, "maskable_ppo", "esdp", {"num_servers": 12}), (P2, "ppo", "ogasched", {}),
         (P3, "ppo", "gadget", {}), (P4, "maskable_ppo", "fair", {})]


def _leading(a, shape):
    return np.asarray(a)[tuple(slice(0, n) for n in shape)]


@pytest.mark.parametrize("env_id,algo,teacher,kw", CASES, ids=["P1", "P2", "P3", "P4"])
def test_mapped_teacher_action_replays_the_teacher_in_the_training_env(env_id, algo, teacher, kw):
    """The teacher acts on the unpadded env; its action mapped by to_train_action and executed in the padded,
    rescaled training env (as train() builds it) gives the same rewards and the same next observations (the
    unpadded entries of every key)."""
    pool = (100, 101, 102)
    base = {"horizon": 25, **kw}
    pads = padding_for(env_id, base, pool)
    if env_id != P4:
        assert pads, "the padded case is the one under test"
    train_env = make_train_env(env_id, {**base, **pads, "scenario_seed": pool[0], "instances": pool}, algo=algo)
    raw_train = train_env.unwrapped
    agent = make(teacher, env_id=env_id)
    checked = 0
    for s in (0, 1):
        x, info = train_env.reset(seed=s)
        k = raw_train.scenario_seed
        ref = gym.make(env_id, **base, scenario_seed=k, oracle=False)
        obs, rinfo = ref.reset(seed=s)
        agent.reset(ref.unwrapped.problem, seed=s)
        for _ in range(25):
            a = agent.act(obs, public_info(rinfo))
            mapped = to_train_action(a, ref, train_env)
            assert train_env.action_space.contains(mapped.astype(train_env.action_space.dtype))
            x, r_train, te, tr, info = train_env.step(mapped)
            obs2, r, te2, tr2, rinfo2 = ref.step(a)
            agent.update(obs, a, r, obs2, public_info(rinfo2))
            # Box: the mapped action is float32, as SB3 emits it (1e-6 relative); discrete: exact
            tol = 1e-6 if isinstance(train_env.action_space, gym.spaces.Box) else 1e-12
            assert r_train == pytest.approx(r, rel=tol, abs=tol)
            assert (te, tr) == (te2, tr2)
            padded_obs = raw_train._obs() if hasattr(raw_train, "_obs") else None
            if padded_obs is not None:
                for key, val in obs2.items():
                    np.testing.assert_allclose(_leading(padded_obs[key], np.shape(val)), val, rtol=1e-6, atol=1e-6)
            fb, fb_train = rinfo2.get("feedback", {}), info.get("feedback", {})
            for key, val in fb.items():
                if isinstance(val, np.ndarray):
                    np.testing.assert_allclose(_leading(fb_train[key], val.shape), val, rtol=tol, atol=tol)
            obs, rinfo = obs2, rinfo2
            checked += 1
            if te or tr:
                break
        ref.close()
    assert checked >= 40


def _bc(out, **kw):
    args = dict(env_kwargs={"horizon": 200}, instances=range(100, 200), warm_start="fair", bc_steps=4000,
                bc_epochs=30)
    args.update(kw)
    return train(TrainConfig(P4, "maskable_ppo", 0, **args), str(out), progress=False)


@pytest.fixture(scope="module")
def p4_clone(tmp_path_factory):
    out = tmp_path_factory.mktemp("bc") / "p4"
    return out, _bc(out)


def test_cloned_policy_is_within_10_percent_of_its_teacher_on_held_out_instances(p4_clone):
    """Step 0 of fine-tuning (timesteps=0: the BC policy) vs the teacher, through the runner, on
    instances 0-4 (the training pool is 100-199), same horizon and seed."""
    out, meta = p4_clone
    assert meta["timesteps_trained"] == 0 and meta["warm_start"]["teacher"] == "fair"
    assert not set(meta["instances"]) & set(range(5))
    assert meta["warm_start"]["reward_gap"] <= 1e-9 and meta["warm_start"]["mask_violations"] == 0
    with np.load(out / "vecnormalize.npz") as z:  # the observation statistics were fitted on the 4,000 demonstrations
        assert float(z["count"]) == pytest.approx(4000, abs=1e-3) and float(np.abs(z["mean"]).max()) > 0
    res = clustergym.evaluate(P4, [f"sb3:{out}/model.zip", "fair"], seeds=[0], horizon=200, instances=range(5),
                              progress=False, score=False)
    tot: dict = {}
    for r in res.runs:
        tot.setdefault(r.agent, []).append(r.total_reward)
    bc, teacher = np.mean(tot[f"sb3:{out}/model.zip"]), np.mean(tot["fair"])
    assert len(tot["fair"]) == 5 and teacher > 0
    assert abs(bc - teacher) <= 0.10 * teacher, (bc, teacher)
    assert all(r.trained_on is False for r in res.runs if r.agent.startswith("sb3:"))


def test_bc_loss_decreases_and_the_value_head_is_fitted(p4_clone):
    ws = p4_clone[1]["warm_start"]
    assert len(ws["loss_history"]) == 30
    assert ws["loss_history"][-1] < 0.25 * ws["loss_history"][0]
    assert ws["value_loss_history"][-1] < 0.5 * ws["value_loss_history"][0]
    assert ws["accuracy_per_dim"] > 0.95 and ws["accuracy_nonzero"] > 0.9
    assert ws["demo_steps"] == 4000 and ws["demo_episodes"] >= 20 and ws["bc_wall_s"] > 0
    assert set(ws["demo_instances"]) <= set(range(100, 200))


def test_same_seed_clones_are_bitwise_identical(tmp_path):
    import torch

    runs = [_bc(tmp_path / f"r{i}", bc_steps=600, bc_epochs=3) for i in range(2)]
    assert runs[0]["warm_start"]["loss_history"] == runs[1]["warm_start"]["loss_history"]
    sd = [make(f"sb3:{tmp_path / f'r{i}'}/model.zip", family="approxjobs").model.policy.state_dict() for i in range(2)]
    assert sd[0].keys() == sd[1].keys()
    assert all(torch.equal(sd[0][k], sd[1][k]) for k in sd[0])
    z = [np.load(tmp_path / f"r{i}" / "vecnormalize.npz") for i in range(2)]
    assert all(np.array_equal(z[0][k], z[1][k]) for k in ("mean", "var", "count"))
    other = _bc(tmp_path / "r2", bc_steps=600, bc_epochs=3, seed=1)
    assert other["warm_start"]["loss_history"] != runs[0]["warm_start"]["loss_history"]


def test_box_clone_sets_a_small_std_and_fine_tuning_loads_without_pickle(tmp_path):
    """P2 (Box, padded, [-1, 1]): BC fits the Gaussian mean, sets log_std = log(BC_BOX_STD); then PPO fine-tunes
    with FINETUNE_HP under the caller's hyperparameters, and the sb3: loader (no unpickling) acts with it."""
    out = tmp_path / "p2"
    with pytest.raises(ValueError, match="action_mode=channel"):  # the shipped P2 entry trains in port mode
        train(TrainConfig(P2, "ppo", 64, env_kwargs={"horizon": 16}, instances=range(100, 103), warm_start="drf",
                          bc_steps=64, bc_epochs=2, n_envs=2), str(tmp_path / "port"), progress=False)
    config = TrainConfig(P2, "ppo", 64, env_kwargs={"horizon": 16, "action_mode": "channel"},
                         instances=range(100, 103), warm_start="drf", bc_steps=64, bc_epochs=2, n_envs=2,
                         hyperparams={"n_steps": 32, "batch_size": 32, "n_epochs": 1, "clip_range": 0.15})
    meta = train(config, str(out), progress=False)
    assert meta["hyperparams"]["learning_rate"] == FINETUNE_HP["learning_rate"]
    assert meta["hyperparams"]["clip_range"] == 0.15  # the caller's value wins
    ws = meta["warm_start"]
    assert ws["log_std_after"] == pytest.approx(np.log(BC_BOX_STD)) and ws["mse_deterministic"] >= 0
    assert ws["loss_history"][-1] < ws["loss_history"][0]
    agent = make(f"sb3:{out}/model.zip", family="multiserver-allocation")
    res = clustergym.evaluate(P2, [f"sb3:{out}/model.zip"], seeds=[0], horizon=8, instances=[0], progress=False,
                              score=False)
    assert len(res.runs) == 1 and np.isfinite(res.runs[0].total_reward)
    assert agent.meta["warm_start"]["teacher"] == "drf"


def test_warm_start_bad_input_is_one_line(tmp_path, capsys):
    with pytest.raises(ValueError, match="warm_start needs algo"):
        train(TrainConfig(P2, "sac", 0, warm_start="drf"), str(tmp_path / "a"), progress=False)
    with pytest.raises(ValueError, match="warm_start='nosuch' is invalid"):
        train(TrainConfig(P4, "ppo", 0, warm_start="nosuch"), str(tmp_path / "b"), progress=False)
    with pytest.raises(ValueError, match="timesteps=0 is invalid"):
        train(TrainConfig(P4, "ppo", 0), str(tmp_path / "c"), progress=False)
    with pytest.raises(ValueError, match="bc_steps=0 is invalid"):
        train(TrainConfig(P4, "ppo", 0, warm_start="fair", bc_steps=0), str(tmp_path / "d"), progress=False)
    capsys.readouterr()
    rc = main(["train", P4, "--algo", "ppo", "--timesteps", "0", "--warm-start", "esdp", "--out", str(tmp_path / "e"),
               "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "esdp" in err


def test_cli_warm_start_writes_the_clone(tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["train", P4, "--algo", "maskable_ppo", "--timesteps", "0", "--warm-start", "fair", "--bc-steps", "200",
                 "--bc-epochs", "2", "--horizon", "50", "--instances", "100-109", "--out", str(out),
                 "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "behaviour cloning from fair: 200 demonstration steps, 2 epochs" in text
    meta = json.loads((out / "clustergym.json").read_text())
    assert meta["warm_start"]["demo_steps"] == 200 and meta["timesteps_trained"] == 0


def test_a_teacher_value_outside_the_mask_keeps_the_loss_finite():
    from clustergym.learning.imitation import _allow_targets

    masks = np.array([[1, 0, 1, 1], [1, 1, 1, 0]], dtype=bool)  # two slots, two dimensions of two values
    actions = np.array([[1, 0], [0, 1]], dtype=np.float32)  # slot 0 dim 0 and slot 1 dim 1: masked out
    out = _allow_targets(masks, actions)
    np.testing.assert_array_equal(out, [[1, 1, 1, 1], [1, 1, 1, 1]])
    np.testing.assert_array_equal(_allow_targets(masks, np.array([[0, 1], [1, 0]], np.float32)), masks)


def test_unpadded_box_mapping_replays_the_teacher():
    """P2 trained on one instance (no padding): device units -> [-1, 1] by the inverse of RescaleBox; entries with
    a_l^k = 0 (low == high) map to -1."""
    from clustergym.learning.imitation import collect_demonstrations

    d = collect_demonstrations(P2, {"horizon": 30, "scenario_seed": 7}, "ogasched", 60, seed=3)
    assert d.reward_gap <= 1e-6 * np.abs(d.rewards).max() and d.instances == [7, 7]
    assert d.actions.min() >= -1 and d.actions.max() <= 1
    env = gym.make(P2, horizon=30, scenario_seed=7)
    _, hi = env.unwrapped.action_bounds()
    assert (d.actions.reshape(-1, *hi.shape)[:, hi == 0] == -1).all()
