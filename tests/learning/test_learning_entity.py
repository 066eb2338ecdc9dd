"""The per-entity policy network for P1 (``clustergym train --net entity``, clustergym.learning.entity).

Behaviour checked: the gathered channel features are the observation's and the statistics' own values;
permuting channels permutes the logits (value unchanged); padding to another ``max_edges`` changes
neither the real channels' logits nor the value; the parameter count does not depend on |E| and one
``state_dict`` acts on instances of different sizes; training + evaluation through ``clustergym run``;
same-seed training is bitwise identical; other families get a clear error."""

import dataclasses
import io
import json
import zipfile

import gymnasium as gym
import numpy as np
import pytest
import torch as th

import clustergym  # noqa: F401
from clustergym.cli.main import main
from clustergym.core import family as family_registry
from clustergym.envs.multiserver.channel.entity import CHANNEL_FEATURES
from clustergym.learning.entity import (EntityActorCriticPolicy, EntityMaskableActorCriticPolicy, check_net,
                                        entity_families, entity_layout, entity_policy)
from clustergym.learning.grouped import PAD_LOGIT
from clustergym.learning.train_envs import make_train_env
from clustergym.learning.training import TrainConfig, train
from clustergym.core.env import TIME_CAP

P1 = "clustergym/MultiServerChannel-v0"
SMALL = {"num_servers": 12, "horizon": 30}


def _lr(_):
    return 3e-4


def _policy(env, cls=EntityMaskableActorCriticPolicy, seed=0):
    th.manual_seed(seed)
    return cls(env.observation_space, env.action_space, _lr, entity=entity_layout(env))


def _num_edges(k, **kw):
    return gym.make(P1, scenario_seed=k, oracle=False, **kw).unwrapped.problem.num_edges


def _trajectory(env, steps, seed=0):
    """Flat observations along an episode with seeded random feasible actions (the statistics fill up)."""
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    out = [obs]
    E = env.unwrapped.problem.num_edges
    for _ in range(steps):  # the same draws whatever the padding
        a = np.zeros(env.action_space.n, dtype=np.int8)
        a[:E] = (rng.random(E) < 0.5) & info["action_mask"][:E].astype(bool)
        obs, _, _, _, info = env.step(a)
        out.append(obs)
    return np.stack(out).astype(np.float32)


def _logits_values(policy, x):
    with th.no_grad():
        obs = th.as_tensor(x)
        logits = policy.mlp_extractor.forward_actor(obs)
        values = policy.value_net(policy.mlp_extractor.forward_critic(obs)).squeeze(-1)
    return logits.numpy(), values.numpy()


def test_features_are_the_observations_and_statistics_values():
    E = _num_edges(0, **SMALL)
    env = make_train_env(P1, {**SMALL, "max_edges": E + 3})
    pol = _policy(env)
    rng = np.random.default_rng(1)
    obs, info = env.reset(seed=3)
    for _ in range(13):
        a = (rng.random(env.action_space.n) < 0.5) & info["action_mask"].astype(bool)
        obs, _, _, _, info = env.step(a.astype(np.int8))
    dict_obs = env.unwrapped._obs()  # the Dict observation behind the flat one
    mean, use, jobs = dict_obs["utility_mean"], dict_obs["channel_share"], dict_obs["arrival_share"]  # the statistics
    x, present, glob = pol.mlp_extractor.gather(th.as_tensor(obs[None]))
    x = x[0].numpy()
    assert x.shape == (E + 3, len(CHANNEL_FEATURES) + env.unwrapped.problem.num_device_types)
    np.testing.assert_array_equal(x[:, 0], dict_obs["edge_present"])
    np.testing.assert_array_equal(x[:, 1], dict_obs["edge_arrival"])
    np.testing.assert_allclose(x[:, 2], mean, rtol=1e-6)
    np.testing.assert_allclose(x[:, 3], use, rtol=1e-6)
    np.testing.assert_array_equal(x[:, 4:], dict_obs["edge_demand"])
    assert (mean[:E] > 0).any() and (use[:E] > 0).any(), "the statistics are exercised"
    assert present[0].numpy().sum() == E
    active = dict_obs["edge_present"].astype(bool) & dict_obs["edge_arrival"].astype(bool)
    assert 0 < active.sum() < E, "some present channels are inactive: the active share and load are exercised"
    g = glob[0].numpy()
    np.testing.assert_allclose(g[0], min(dict_obs["t"][0], TIME_CAP) / (TIME_CAP + 1), rtol=1e-6)
    np.testing.assert_allclose(g[1], dict_obs["arrivals"].mean(), rtol=1e-6)
    np.testing.assert_allclose(g[2], jobs.mean(), rtol=1e-6)
    np.testing.assert_allclose(g[3], active.sum() / E, rtol=1e-6)
    np.testing.assert_allclose(g[4:], dict_obs["edge_demand"][active].sum(axis=0), rtol=1e-5)


@pytest.mark.parametrize("cls", [EntityActorCriticPolicy, EntityMaskableActorCriticPolicy], ids=["ppo", "maskable"])
def test_permuting_channels_permutes_the_logits(cls):
    E = _num_edges(0, **SMALL)
    env = make_train_env(P1, {**SMALL, "max_edges": E + 4})
    pol = _policy(env, cls)
    xs = _trajectory(env, 15)
    ci = np.asarray(entity_layout(env)["channel_index"])  # (P, f)
    perm = np.random.default_rng(0).permutation(E)  # the real channels, with their port flags and statistics
    xp = xs.copy()
    xp[:, ci[:E]] = xs[:, ci[perm]]  # channel e of the permuted observation is channel perm[e]
    lo, vo = _logits_values(pol, xs)
    lp, vp = _logits_values(pol, xp)
    per = 2 if cls is EntityMaskableActorCriticPolicy else 1
    lo, lp = lo.reshape(len(xs), -1, per)[..., -1], lp.reshape(len(xs), -1, per)[..., -1]
    np.testing.assert_allclose(lp[:, :E], lo[:, perm], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(vp, vo, rtol=1e-5, atol=1e-6)
    assert np.ptp(lo[:, :E]) > 1e-4, "logits differ between channels (the test could fail)"


def test_padding_changes_neither_real_logits_nor_value():
    E = _num_edges(0, **SMALL)
    envs = [make_train_env(P1, {**SMALL, "max_edges": m}) for m in (E, E + 7, 2 * E + 5)]
    pols = [_policy(env, seed=i) for i, env in enumerate(envs)]
    # the same weights; ortho_init gives tiny output weights: perturb the weights so the logits are far from 0 and differences show
    with th.no_grad():
        for prm in pols[0].parameters():
            prm.add_(0.3 * th.randn(prm.shape, generator=th.Generator().manual_seed(prm.numel())))
    for p in pols[1:]:
        p.load_state_dict(pols[0].state_dict())
    outs = [_logits_values(p, _trajectory(env, 15)) for p, env in zip(pols, envs)]
    l0, v0 = outs[0]
    for (l, v), env in zip(outs[1:], envs[1:]):
        l = l.reshape(len(l), -1, 2)
        np.testing.assert_allclose(l[:, :E, 1], l0.reshape(len(l0), -1, 2)[:, :, 1], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(v, v0, rtol=1e-5, atol=1e-5)
        assert (l[:, E:, 1] == PAD_LOGIT).all(), "padding channels are never selected"
    assert np.abs(v0).max() > 0.1


def test_parameter_count_independent_of_size_and_weights_act_on_other_instances():
    sizes = {}
    for k in range(12):
        sizes.setdefault(_num_edges(k, **SMALL), k)
    assert len(sizes) >= 2
    (e1, k1), (e2, k2) = sorted(sizes.items())[0], sorted(sizes.items())[-1]
    envs = [make_train_env(P1, {**SMALL, "scenario_seed": k, "max_edges": e}) for e, k in ((e1, k1), (e2, k2))]
    for cls in (EntityActorCriticPolicy, EntityMaskableActorCriticPolicy):
        pols = [_policy(env, cls) for env in envs]
        counts = [sum(p.numel() for p in pol.parameters()) for pol in pols]
        assert counts[0] == counts[1]
        pols[1].load_state_dict(pols[0].state_dict(), strict=True)
    big = make_train_env(P1, {**SMALL, "scenario_seed": k1, "max_edges": 10 * e2})
    assert sum(p.numel() for p in _policy(big).parameters()) == counts[0]
    for env, pol in zip(envs, pols):  # the same weights choose actions on both instances
        pol.load_state_dict(pols[0].state_dict())
        obs, info = env.reset(seed=0)
        chosen = 0
        for _ in range(20):
            mask = env.unwrapped.action_masks()
            a, _ = pol.predict(obs, deterministic=False, action_masks=mask)
            assert a.shape == (env.action_space.n,) and not a[~mask.reshape(-1, 2)[:, 1]].any(), "the mask holds"
            chosen += int(a.sum())
            obs, _, _, _, info = env.step(a)
        assert chosen > 0 and np.isfinite(obs).all()


def _train(out, algo="maskable_ppo", seed=0, **kw):
    config = TrainConfig(P1, algo, 128, env_kwargs={"num_servers": 12, "horizon": 24}, instances=range(100, 104),
                         n_envs=2, seed=seed, hyperparams={"n_steps": 32, "batch_size": 32, "n_epochs": 2},
                         net="entity", **kw)
    return train(config, str(out), progress=False)


@pytest.mark.parametrize("algo", ["maskable_ppo", "ppo"])
def test_train_then_evaluate_through_the_runner(tmp_path, algo, capsys):
    run = tmp_path / "run"
    meta = _train(run, algo, eval_freq=64, eval_episodes=1)
    assert meta["net"] == "entity" and meta["norm_obs"] is False and meta["normalize"] is True
    assert not (run / "vecnormalize.npz").exists()
    with zipfile.ZipFile(run / "model.zip") as z:
        data = json.loads(z.read("data"))
    assert "channel_index" in data["policy_kwargs"]["entity"], "the layout is plain JSON in the zip"
    out = tmp_path / "eval"
    rc = main(["run", P1, "--agents", f"sb3:{run}/model.zip,esdp,random", "--instances", "0-1", "--seeds", "0",
               "--horizon", "20", "--set", "num_servers=12", "--out", str(out), "--no-progress", "--no-plots"])
    assert rc == 0, capsys.readouterr().err
    res = json.loads((out / "results.json").read_text())
    runs = [r for r in res["runs"] if r["agent"].startswith("sb3:")]
    assert len(runs) == 2 and all(r["steps"] == 20 and np.isfinite(r["total_reward"]) for r in runs)
    from clustergym.core.agent import make

    agent = make(f"sb3:{run}/model.zip")
    assert isinstance(agent.model.policy, entity_policy(algo)), "the loader supplies the entity policy"


def test_same_seed_training_is_bitwise_identical(tmp_path):
    def weights(d):
        with zipfile.ZipFile(d / "model.zip") as z:
            return th.load(io.BytesIO(z.read("policy.pth")), weights_only=True)

    _train(tmp_path / "a")
    _train(tmp_path / "b")
    _train(tmp_path / "c", seed=1)
    a, b, c = weights(tmp_path / "a"), weights(tmp_path / "b"), weights(tmp_path / "c")
    assert a.keys() == b.keys() and all(th.equal(a[k], b[k]) for k in a)
    assert any(not th.equal(a[k], c[k]) for k in a), "another seed trains other weights"


def test_other_families_and_settings_fail_clearly(tmp_path, capsys):
    with pytest.raises(ValueError, match="multiserver-channel"):
        check_net("entity", "ringallreduce", "ppo")
    with pytest.raises(ValueError, match="net='wide' is invalid"):
        check_net("wide", "multiserver-channel", "ppo")
    with pytest.raises(ValueError, match="no-stats"):
        check_net("entity", "multiserver-channel", "ppo", stats=False)
    rc = main(["train", "clustergym/RingAllReduce-v0", "--algo", "ppo", "--net", "entity", "--timesteps", "10",
               "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert rc == 2 and "multiserver-channel" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


def test_the_family_spec_says_whether_a_family_trains_the_entity_net(monkeypatch):
    """check_net asks the registered specs: a family with an ``entity`` hooks module is accepted, one without it
    is refused with a message naming the families that have one."""
    assert entity_families() == ("multiserver-channel", "multiserver-allocation", "approxjobs")
    base = family_registry.family_spec("approxjobs")
    with_hooks = dataclasses.replace(base, name="toy-with-entity", number="T1", envs=())
    without = dataclasses.replace(base, name="toy-without-entity", number="T2", envs=(), entity=None)
    for spec in (with_hooks, without):  # registered for this test only (no env ids: nothing for Gymnasium)
        monkeypatch.setitem(family_registry._FAMILIES, spec.name, spec)
    check_net("entity", "toy-with-entity", "ppo")
    check_net("mlp", "toy-without-entity", "ppo")  # the flat MLP needs no hooks
    with pytest.raises(ValueError, match=r"supports the families multiserver-channel, multiserver-allocation, "
                                         r"approxjobs, toy-with-entity \(P1, P2, P4, T1\), not 'toy-without-entity'"):
        check_net("entity", "toy-without-entity", "ppo")


def test_single_instance_training_is_padded_for_the_entity_net(tmp_path):
    config = TrainConfig(P1, "ppo", 64, env_kwargs={"num_servers": 12, "horizon": 16, "scenario_seed": 3}, n_envs=2,
                         hyperparams={"n_steps": 32, "batch_size": 32, "n_epochs": 1}, net="entity")
    meta = train(config, str(tmp_path / "r"), progress=False)
    assert meta["env_kwargs"]["max_edges"] == _num_edges(3, num_servers=12)


def test_a_channels_logit_depends_on_the_other_channels_through_the_context():
    E = _num_edges(0, **SMALL)
    env = make_train_env(P1, {**SMALL, "max_edges": E + 2})
    pol = _policy(env, EntityActorCriticPolicy)
    with th.no_grad():
        for prm in pol.parameters():
            prm.add_(0.3 * th.randn(prm.shape, generator=th.Generator().manual_seed(prm.numel())))
    x = _trajectory(env, 10)[-1:]
    ci = np.asarray(entity_layout(env)["channel_index"])
    y = x.copy()
    y[0, ci[1:E, 2]] = 1.0 - y[0, ci[1:E, 2]]  # the other channels' v̂ changes; channel 0's features do not
    lx, _ = _logits_values(pol, x)
    ly, _ = _logits_values(pol, y)
    assert abs(ly[0, 0] - lx[0, 0]) > 1e-3, "channel 0's logit sees the other channels (the pooled context)"


def test_a_per_entity_model_acts_on_instances_larger_than_its_padding(tmp_path):
    """The per-entity network shares its weights across channels, so a model trained with max_edges = P acts on
    an instance with more channels: the runner pads the env to the largest instance and the agent rebuilds the
    layout for it. On an instance that fits P it acts exactly as at its own padding (the same run, to the bit);
    a flat MLP model still refuses such an instance before any run."""
    from clustergym.runner.evaluation import evaluate
    from clustergym.core.family import env_family, family_spec
    from clustergym.learning.instances import instance_problems

    run = tmp_path / "run"
    meta = _train(run, "ppo")
    pad = int(meta["env_kwargs"]["max_edges"])
    scen = {"num_servers": 12}
    spec = family_spec(env_family(P1))
    sizes = {k: spec.instance_sizes(pb)["max_edges"] for k, pb in instance_problems(P1, scen, range(2000, 2600))}
    big = next(k for k, v in sizes.items() if v > pad)
    fits = next(k for k, v in sizes.items() if v <= pad)
    agent = f"sb3:{run}/model.zip"
    alone = evaluate(P1, [agent], [0], 16, env_kwargs=scen, instances=[fits], progress=False, score=False)
    both = evaluate(P1, [agent], [0], 16, env_kwargs=scen, instances=[fits, big], progress=False, score=False)
    by = {r.instance: r for r in both.runs}
    assert by[big].steps == 16 and np.isfinite(by[big].total_reward)
    assert by[fits].total_reward == alone.runs[0].total_reward  # grown padding: the same decisions
    mlp = tmp_path / "mlp"
    train(TrainConfig(P1, "ppo", 64, env_kwargs={"num_servers": 12, "horizon": 24}, instances=range(100, 104), n_envs=1,
                      hyperparams={"n_steps": 32, "batch_size": 32, "n_epochs": 1}), str(mlp), progress=False)
    with pytest.raises(ValueError, match=f"does not fit instance {big}"):
        evaluate(P1, [f"sb3:{mlp}/model.zip"], [0], 16, env_kwargs=scen, instances=[fits, big], progress=False,
                 score=False)
