"""The per-entity network on P4 (one set of weights per window slot, "job" mode) and P2 (per port, "port" mode).

Behaviour checked: the gathered columns are the observation's own values and the features the documented
functions of them (docs/drl.md); permuting the entities permutes the outputs (value unchanged); an empty window
slot's features are zero whatever its row holds; the network has no horizon input (one state_dict, the same
outputs at any horizon); training and evaluation through the runner; other action modes fail clearly."""

import json

import numpy as np
import pytest
import torch as th

import clustergym  # noqa: F401
from clustergym.cli.main import main
from clustergym.core.env import TIME_CAP
from clustergym.learning.entity import EntityActorCriticPolicy, EntityMaskableActorCriticPolicy, entity_layout
from clustergym.learning.train_envs import make_train_env

P2 = "clustergym/MultiServerAllocation-v0"
P4 = "clustergym/ApproxJobs-v0"


def _lr(_):
    return 3e-4


def _env(env_id, **kw):
    mode = {"action_mode": "job"} if env_id == P4 else {"action_mode": "port"}
    return make_train_env(env_id, {**mode, "horizon": 40, **kw})


def _policy(env, cls=EntityActorCriticPolicy, seed=0):
    th.manual_seed(seed)
    return cls(env.observation_space, env.action_space, _lr, entity=entity_layout(env))


def _observations(env, steps=30, seed=0):
    obs, _ = env.reset(seed=seed)
    out = [obs]
    for _ in range(steps):
        obs, *_ = env.step(env.action_space.sample())
        out.append(obs)
    return np.stack(out).astype(np.float32)


def _outputs(policy, x):
    with th.no_grad():
        obs = th.as_tensor(x)
        return (policy.mlp_extractor.forward_actor(obs).numpy(),
                policy.value_net(policy.mlp_extractor.forward_critic(obs)).squeeze(-1).numpy())


def test_p4_gathers_the_window_rows_and_machine_statistics_of_the_observation():
    env = _env(P4)
    env.action_space.seed(0)
    obs, _ = env.reset(seed=3)
    for _ in range(25):
        obs, *_ = env.step(env.action_space.sample())
    d = env.unwrapped._obs()  # the Dict observation behind the flat one
    lay = entity_layout(env)
    x = np.asarray(obs, dtype=np.float64)
    ent = x[np.asarray(lay["entity_index"])]  # (J, 8): mask + the job row without its id
    assert np.array_equal(ent[:, 0], d["job_mask"])
    assert np.allclose(ent[:, 1:], d["jobs"][:, 1:], rtol=1e-6)
    mach = x[np.asarray(lay["pool_index"])]
    for c, k in enumerate(("machine_rate", "machine_share", "last_executed", "last_work")):
        assert np.allclose(mach[:, c], d[k], rtol=1e-6)
    assert x[lay["t_index"]] == d["t"][0]
    assert lay["logits_per_entity"] == env.action_space.nvec[0]


def _gathered(env, steps, seed, ready=lambda d: True):
    """The Dict observation after at least ``steps`` random actions, once ``ready(it)``, and the entity net's
    (x, present, glob) of its flat one."""
    env.action_space.seed(seed)
    obs, _ = env.reset(seed=seed)
    for k in range(env.unwrapped.horizon - 1):
        obs, *_ = env.step(env.action_space.sample())
        if k + 1 >= steps and ready(env.unwrapped._obs()):
            break
    x, present, glob = _policy(env).mlp_extractor.gather(th.as_tensor(obs[None]))
    return env.unwrapped._obs(), x[0].numpy(), present[0].numpy(), glob[0].numpy()


def test_p4_features_are_the_documented_functions_of_the_observation():
    """docs/drl.md's P4 row, computed here from the Dict observation: per slot [present, window left share,
    log time left, budget left share, log budget, log value, β, log work, log age, spent share] (0 when empty);
    global [mean, max over machines of rate, share, last executed, last work; occupied share; log time]."""
    d, x, present, glob = _gathered(_env(P4, horizon=400), 30, 4, lambda d: d["job_mask"].sum() >= 2)
    t = float(d["t"][0])
    _, a, dl, bud, spent, v, beta, work = d["jobs"].T.astype(np.float64)
    left, safe = np.maximum(dl - t, 0.0), np.maximum(bud, 1e-9)
    want = np.stack([np.ones_like(a), left / np.maximum(dl - a, 1.0), np.log1p(left) / 5,
                     np.clip((bud - spent) / safe, 0, 1), np.log1p(np.maximum(bud, 0)) / 5,
                     np.log1p(np.maximum(v, 0)) / 5, beta, np.log1p(np.maximum(work, 0)) / 5,
                     np.log1p(np.maximum(t - a, 0)) / 5, np.clip(spent / safe, 0, 1)], axis=1)
    mask = d["job_mask"].astype(bool)
    assert mask.sum() >= 2 and np.array_equal(present, mask)
    np.testing.assert_allclose(x, want * mask[:, None], rtol=1e-5, atol=1e-6)
    m = np.stack([d[k] for k in ("machine_rate", "machine_share", "last_executed", "last_work")], axis=1)
    np.testing.assert_allclose(glob, [*m.mean(axis=0), *m.max(axis=0), mask.mean(), np.log1p(min(t, TIME_CAP)) / 10],
                               rtol=1e-5, atol=1e-6)


def test_p2_features_are_the_documented_functions_of_the_observation():
    """docs/drl.md's P2 row: per port [job this slot, share of slots with a job, signed log mean reward, signed log
    last reward]; global [signed log β, share of ports with a job, log time]; every port present."""
    d, x, present, glob = _gathered(_env(P2), 30, 5)

    def slog(z):
        return np.sign(z) * np.log1p(np.abs(z))

    arr = d["arrivals"].astype(np.float64)
    want = np.stack([arr, d["arrival_share"], slog(d["port_reward_mean"]), slog(d["last_port_reward"])], axis=1)
    assert present.all() and np.abs(want[:, 2:]).max() > 0
    np.testing.assert_allclose(x, want, rtol=1e-5, atol=1e-6)
    t = float(d["t"][0])
    np.testing.assert_allclose(glob, [*slog(d["beta"]), arr.mean(), np.log1p(min(t, TIME_CAP)) / 10], rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("env_id", [P4, P2])
def test_permuting_the_entities_permutes_the_outputs_and_keeps_the_value(env_id):
    env = _env(env_id, horizon=400)
    env.action_space.seed(1)
    pol = _policy(env)
    x = _observations(env, steps=300)[5:]
    lay = entity_layout(env)
    idx = np.asarray(lay["entity_index"])
    n, k = idx.shape[0], lay["logits_per_entity"]
    perm = np.random.default_rng(0).permutation(n)
    xp = x.copy()
    xp[:, idx] = x[:, idx[perm]]  # entity i now holds what entity perm[i] held
    logits, value = _outputs(pol, x)
    logits_p, value_p = _outputs(pol, xp)
    assert np.allclose(logits_p.reshape(len(x), n, k), logits.reshape(len(x), n, k)[:, perm], atol=1e-5)
    assert np.allclose(value_p, value, atol=1e-5)
    present = x[:, idx[:, 0]] > 0.5 if env_id == P4 else np.ones((len(x), n), dtype=bool)
    r = int(np.flatnonzero(present.sum(axis=1) >= 2)[0])  # a row with two present entities: their outputs differ
    i, j = np.flatnonzero(present[r])[:2]
    blocks = logits.reshape(len(x), n, k)[r]
    assert not np.array_equal(blocks[i], blocks[j])


def test_an_empty_window_slot_has_zero_features_whatever_its_row_holds():
    env = _env(P4)
    env.action_space.seed(2)
    pol = _policy(env)
    x = _observations(env)[10:12]
    lay = entity_layout(env)
    idx = np.asarray(lay["entity_index"])
    empty = np.flatnonzero(x[0, idx[:, 0]] < 0.5)
    if empty.size == 0:  # make one: clear slot 0's mask
        x[:, idx[0, 0]] = 0.0
        empty = np.array([0])
    j = int(empty[0])
    noisy = x.copy()
    noisy[:, idx[j, 1:]] = 123.0  # garbage in an empty row
    feats, present, _ = pol.mlp_extractor.gather(th.as_tensor(noisy))
    assert not present[:, j].any() and th.count_nonzero(feats[:, j]) == 0
    assert np.allclose(_outputs(pol, noisy)[0], _outputs(pol, x)[0], atol=1e-6)


def test_one_state_dict_gives_the_same_outputs_at_any_horizon():
    short, long = make_train_env(P4, {"action_mode": "job", "horizon": 40}), make_train_env(
        P4, {"action_mode": "job", "horizon": 2000})
    a, b = _policy(short), _policy(long, seed=5)
    b.load_state_dict(a.state_dict())
    x = _observations(short)
    assert np.allclose(_outputs(a, x)[0], _outputs(b, x)[0]) and np.allclose(_outputs(a, x)[1], _outputs(b, x)[1])


@pytest.mark.parametrize("env_id,algo,extra", [(P4, "ppo", []), (P4, "maskable_ppo", ["--set", 'action_mode="job"']),
                                               (P2, "ppo", [])])
def test_train_then_evaluate_through_the_runner(tmp_path, env_id, algo, extra, capsys):
    out = tmp_path / "m"
    rc = main(["train", env_id, "--algo", algo, "--net", "entity", "--timesteps", "256", "--horizon", "20",
               "--hp", "n_steps=64", "--out", str(out), "--no-progress", *extra])
    assert rc == 0, capsys.readouterr().err
    meta = json.load(open(out / "clustergym.json"))
    assert meta["net"] == "entity"
    rc = main(["run", env_id, "--agents", f"sb3:{out}/model.zip,random", "--instances", "900-901", "--seeds", "0",
               "--horizon", "20", "--out", str(tmp_path / "e"), "--no-progress", "--no-plots"])
    assert rc == 0, capsys.readouterr().err
    runs = json.load(open(tmp_path / "e" / "results.json"))["runs"]
    assert sum(r["agent"].startswith("sb3:") for r in runs) == 2


@pytest.mark.parametrize("env_id,mode", [(P4, "machine"), (P2, "channel")])
def test_other_action_modes_fail_clearly(tmp_path, capsys, env_id, mode):
    rc = main(["train", env_id, "--net", "entity", "--timesteps", "64", "--set", f'action_mode="{mode}"',
               "--out", str(tmp_path / "x"), "--no-progress"])
    assert rc == 2
    assert "net='entity' on" in capsys.readouterr().err


def test_masked_head_on_p4_gives_one_block_of_levels_per_slot():
    env = _env(P4)
    pol = _policy(env, EntityMaskableActorCriticPolicy)
    x = _observations(env, steps=3)
    logits, _ = _outputs(pol, x)
    assert logits.shape == (len(x), int(env.action_space.nvec.sum()))
