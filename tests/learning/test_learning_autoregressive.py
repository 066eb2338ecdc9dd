"""The masked autoregressive decoder (``--net autoregressive``) on P3's ring sizes.

Behaviour checked: the hooks read each job's cap and the cluster's GPUs from the raw flat observation (the env's
own values); sampled actions never exceed a job's cap or the GPUs left by the jobs before it, and absent jobs get
0; the teacher-forced log-probability of an action equals the sum of the sequential sampler's per-step ones;
the greedy action takes each step's most likely count; with ``order="attained"`` the jobs are decided least
attained service first (the continuous LAS's priority) and the action still comes back in the window's order; each
heuristic order ("attained", "remaining", "density") visits the jobs exactly in its teacher's priority; the
same torch seed samples the same actions; training through ``train`` and loading through ``sb3:`` (no pickle)
gives the trained policy's actions, its decoding order included; unsupported families, algorithms and orders fail
clearly."""

import json
import zipfile

import numpy as np
import pytest
import torch as th

import clustergym  # noqa: F401
from clustergym.core.agent import make
from clustergym.learning.autoregressive import AutoregressiveDistribution, DecoderActorCriticPolicy, check_decoder, decoder_layout
from clustergym.learning.policies import check_net, policy_class
from clustergym.learning.train_envs import make_train_env
from clustergym.learning.training import TrainConfig, train

P3 = "clustergym/RingAllReduce-v0"
KW = {"scenario": "gpu-short", "action_mode": "ring_size", "horizon": 40}


def _env(layout="compact", **kw):
    return make_train_env(P3, {**KW, **kw}, layout=layout)


def _policy(env, seed=0, order="window"):
    th.manual_seed(seed)
    return DecoderActorCriticPolicy(env.observation_space, env.action_space, lambda _: 3e-4,
                                    decoder=decoder_layout(env), order=order)


def _rollout(env, steps=40, seed=0):
    """Flat observations and the env's window caps and GPU total of each."""
    env.action_space.seed(seed)
    obs, info = env.reset(seed=seed)
    X, caps = [], []
    for _ in range(steps):
        X.append(obs)
        caps.append(info["window"]["cap"] * info["window"]["present"])
        obs, _, _, _, info = env.step(env.action_space.sample())
    return th.as_tensor(np.stack(X)), np.stack(caps), int(env.unwrapped._gpus.sum())


@pytest.mark.parametrize("layout", ["compact", "full"])
def test_the_hooks_read_the_env_caps_and_gpus(layout):
    env = _env(layout)
    X, caps, gpus = _rollout(env)
    with th.no_grad():
        d = _policy(env).get_distribution(X)
    np.testing.assert_array_equal(d.cap.numpy(), caps)
    assert (d.pool.numpy() == gpus).all() and gpus == env.unwrapped._gpus.sum()
    assert (caps.sum(axis=1) > gpus).any(), "the GPUs bind on this scenario: the free-GPU mask matters"


def _scarce(X, env, gpus_left=4):
    """The same observations with the cluster cut to ``gpus_left`` GPUs on server 0 (C_s columns of servers)."""
    lay = decoder_layout(env)
    X = X.clone()
    idx = np.asarray(lay["server_index"])[:, 0]
    X[:, idx] = 0.0
    X[:, idx[0]] = float(gpus_left)
    return X


@pytest.mark.parametrize("order", ["window", "attained"])
def test_sampled_actions_respect_the_caps_and_the_gpus_left(order):
    env = _env()
    X, caps, gpus = _rollout(env)
    pol = _policy(env, order=order)
    for x, pool in ((X, gpus), (_scarce(X, env), 4)):
        xb = x.repeat(8, 1)  # 8 samples per observation
        cb = np.tile(caps, (8, 1))
        with th.no_grad():
            a = pol.get_distribution(xb).sample().numpy()
        assert (a <= cb).all() and (a[cb == 0] == 0).all()
        assert (a.sum(axis=1) <= pool).all()
        assert (a > 0).any()
    with th.no_grad():  # with 4 GPUs the decoder still uses them: some sample takes all 4
        a = pol.get_distribution(_scarce(X, env).repeat(8, 1)).sample().numpy()
    assert (a.sum(axis=1) == 4).any()


@pytest.mark.parametrize("order", ["window", "attained"])
def test_teacher_forcing_equals_the_sequential_sampler(order):
    env = _env()
    X, _, _ = _rollout(env)
    net = _policy(env, order=order).mlp_extractor.to(th.float64)  # in float64 (SB3's preprocessing casts to float32)
    for x in (X.double(), _scarce(X, env).double()):
        with th.no_grad():
            d = AutoregressiveDistribution(net, net.forward_actor(x))
            for deterministic in (False, True):
                a, seq = d.decode(deterministic)
                np.testing.assert_allclose(d.log_prob(a).numpy(), seq.numpy(), rtol=0, atol=1e-9)
            ent = d.entropy()
        assert (ent >= 0).all() and (ent > 0).any()
    # the policy's own forward and evaluate_actions agree (float32, as PPO runs them)
    pol = _policy(env, order=order)
    with th.no_grad():
        acts, _, lp = pol(X)
        _, lp2, _ = pol.evaluate_actions(X, acts.float())
    np.testing.assert_allclose(lp.numpy(), lp2.numpy(), rtol=0, atol=1e-5)


def test_the_greedy_action_takes_each_steps_most_likely_count():
    env = _env()
    X, _, _ = _rollout(env)
    pol = _policy(env)
    with th.no_grad():
        for w in pol.mlp_extractor.out.parameters():  # logits of a trained size, so the argmax is not all zeros
            w.normal_(0.0, 1.0)
        d = pol.get_distribution(_scarce(X, env, 9))
        a = d.mode()
        free = d.free_before(a)
        logits = pol.mlp_extractor.step_logits(d.base, free, d.cap, d.demand, d.pool.unsqueeze(1).expand_as(free))
        greedy = pol.get_distribution(X[:5]).mode().numpy()
    assert th.equal(logits.argmax(dim=-1), a) and (a > 0).any()
    np.testing.assert_array_equal(pol.predict(X[:5].numpy(), deterministic=True)[0], greedy)


def _fill_in_order(X, env, order, gpus):
    """Each job's count when every step takes the largest count allowed, jobs visited in ``order`` (numpy)."""
    lay = decoder_layout(env)
    from clustergym.envs.ringallreduce.env import JOB_FEATURES

    rows = X.numpy()[:, np.asarray(lay["job_index"])]  # (B, J, F) raw
    col = {k: i for i, k in enumerate(JOB_FEATURES)}
    out = np.zeros(rows.shape[:2], dtype=np.int64)
    for b, r in enumerate(rows):
        present = r[:, col["remaining"]] > 0.5
        cap = np.where(present, np.minimum(np.round(r[:, col["workers_cap"]]), lay["levels"] - 1), 0).astype(int)
        key = np.where(present, r[:, col["attained"]], np.inf) if order == "attained" else np.arange(len(r))
        free = gpus
        for j in np.argsort(key, kind="stable"):
            out[b, j] = min(cap[j], free)
            free -= out[b, j]
    return out


def test_the_attained_order_decides_the_least_attained_jobs_first():
    env = _env()
    X, _, _ = _rollout(env, 40, seed=2)
    X = _scarce(X, env, 9)
    actions = {}
    for order in ("window", "attained"):
        pol = _policy(env, order=order)
        with th.no_grad():  # logits that prefer the largest count allowed, whatever the job
            for w in pol.mlp_extractor.out.parameters():
                w.zero_()
            pol.mlp_extractor.out.bias.copy_(th.arange(pol.mlp_extractor.levels, dtype=th.float32) * 50.0)
            actions[order] = pol.get_distribution(X).mode().numpy()
        np.testing.assert_array_equal(actions[order], _fill_in_order(X, env, order, 9))
    assert (actions["window"] != actions["attained"]).any(), "the order decides who gets the 9 GPUs here"


@pytest.mark.parametrize("order, teacher", [("attained", "las[thresholds=continuous,workers=3]"),
                                            ("remaining", "srpt[workers=5]"),
                                            ("density", "srpt[workers=5,row_value=30]")])
def test_each_heuristic_order_is_its_teachers_priority(order, teacher):
    """The decoder visits the visible jobs in exactly the order its teacher ranks them, on the env's own windows
    (what lets a clone decide each job knowing the sizes the teacher gave the jobs before it)."""
    from clustergym.core.agent import public_info

    env = _env(horizon=60)
    pol, agent = _policy(env, order=order), make(teacher, env_id=P3)
    obs, info = env.reset(seed=3)
    agent.reset(env.unwrapped.problem, seed=3)
    checked = 0
    for _ in range(60):
        win = public_info(info)["window"]
        rows = np.flatnonzero(win["present"] & (win["cap"] > 0))
        if rows.size > 1:
            want = rows[agent._order(win, rows, np.ones(rows.size, dtype=np.int64))]
            with th.no_grad():
                key = pol.mlp_extractor._order_key(pol.mlp_extractor, th.as_tensor(obs)[None])[0]
            got = th.sort(key, stable=True).indices.numpy()
            np.testing.assert_array_equal(got[:rows.size], want)
            checked += 1
        obs, _, _, _, info = env.step(agent.act(obs, public_info(info)))
    assert checked > 30


def test_the_same_seed_samples_the_same_actions():
    env = _env()
    X, _, _ = _rollout(env)
    pol = _policy(env)

    def sample(seed):
        th.manual_seed(seed)
        with th.no_grad():
            return pol.get_distribution(X).sample()

    assert th.equal(sample(3), sample(3)) and not th.equal(sample(3), sample(4))


@pytest.mark.parametrize("order", ["window", "attained"])
def test_train_then_load_through_sb3_without_pickles(tmp_path, order):
    from stable_baselines3 import PPO

    run = tmp_path / "run"
    policy_kwargs = {} if order == "window" else {"policy_kwargs": {"order": order}}
    config = TrainConfig(P3, "ppo", 256, env_kwargs={**KW, "horizon": 32, "scenario_seed": 2}, n_envs=2,
                         hyperparams={"n_steps": 64, "batch_size": 64, "n_epochs": 2, **policy_kwargs},
                         net="autoregressive", curve_references=False)
    meta = train(config, str(run), progress=False)
    assert meta["net"] == "autoregressive" and meta["norm_obs"] is False and not (run / "vecnormalize.npz").exists()
    with zipfile.ZipFile(run / "model.zip") as z:
        assert "job_index" in json.loads(z.read("data"))["policy_kwargs"]["decoder"], "the layout is JSON"
    agent = make(f"sb3:{run}/model.zip")
    assert isinstance(agent.model.policy, DecoderActorCriticPolicy) and agent.model.policy.order == order
    trained = PPO.load(str(run / "model.zip"), device="cpu")  # our own file: SB3's pickles are fine here
    env = make_train_env(P3, meta["env_kwargs"], layout="compact")
    X, _, _ = _rollout(env, 32, seed=1)
    for k in trained.policy.state_dict():
        assert th.equal(trained.policy.state_dict()[k], agent.model.policy.state_dict()[k]), k
    a1 = trained.predict(X.numpy(), deterministic=True)[0]
    assert np.array_equal(a1, agent.model.predict(X.numpy(), deterministic=True)[0]) and a1.any()
    u = env.unwrapped  # the agent on the env's Dict observation acts as the trained model on the flat one
    agent.reset(u.problem, seed=0)
    flat, info = env.reset(seed=1)
    for _ in range(10):
        a = agent.act(u._obs(), info)
        assert np.array_equal(a, trained.predict(flat, deterministic=True)[0])
        flat, _, _, _, info = env.step(a)


def test_other_families_and_algorithms_fail_clearly():
    with pytest.raises(ValueError, match=r"supports the families ringallreduce \(P3\), not 'approxjobs'"):
        check_net("autoregressive", "approxjobs", "ppo")
    with pytest.raises(ValueError, match="supports the algorithms ppo, a2c, not 'maskable_ppo'"):
        check_decoder("ringallreduce", "maskable_ppo")
    with pytest.raises(ValueError, match="not 'sac'"):
        policy_class("sac", "fast", "autoregressive")
    env = _env()
    with pytest.raises(ValueError, match="order='fifo' is invalid for the decoder of ringallreduce: expected 'window' "
                                         "or 'attained'"):
        _policy(env, order="fifo")
    with pytest.raises(ValueError, match="action_mode='ring_size'"):
        decoder_layout(make_train_env(P3, {"scenario": "gpu-short", "horizon": 5}))
