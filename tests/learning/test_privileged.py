"""Privileged training (``privileged="critic"``): the critic reads the simulator's privileged features, the actor
never does; the saved model acts through ``sb3:`` from public observations alone."""

import json

import numpy as np
import pytest
import torch as th

from clustergym.cli.main import main
from clustergym.core.agent import make
from clustergym.learning.training import TrainConfig, make_train_vec, train
from clustergym.learning.train_envs import make_train_env, normalizer

P1 = "clustergym/MultiServerChannel-v0"
P2 = "clustergym/MultiServerAllocation-v0"
TINY = {"n_steps": 64, "batch_size": 64, "n_epochs": 2}


@pytest.fixture(scope="module", params=[P1, P2])
def run(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("priv") / "run"
    meta = train(TrainConfig(request.param, "ppo", 256, env_kwargs={"horizon": 32}, n_envs=2, hyperparams=TINY,
                             privileged="critic", curve_references=False), str(out), progress=False)
    return request.param, out, meta


def _obs_pair(policy, rng, n=16):
    """Two batches with the same public part and different privileged slices (far apart)."""
    public = int(policy.public_dim)
    full = int(policy.observation_space.shape[0])
    assert full > public
    x = rng.normal(size=(n, full)).astype(np.float32)
    y = x.copy()
    y[:, public:] = rng.normal(5.0, 3.0, size=(n, full - public))
    return x, y


def test_the_actor_never_reads_the_privileged_features(run):
    _, out, _ = run
    model = make(f"sb3:{out}").model
    pol = model.policy
    x, y = _obs_pair(pol, np.random.default_rng(0))
    with th.no_grad():
        fx, fy = pol.extract_features(th.as_tensor(x)), pol.extract_features(th.as_tensor(y))
        assert th.equal(pol.mlp_extractor.forward_actor(fx), pol.mlp_extractor.forward_actor(fy))
    ax, _ = model.predict(x, deterministic=True)
    ay, _ = model.predict(y, deterministic=True)
    np.testing.assert_array_equal(ax, ay)


def test_the_critic_reads_them(run):
    _, out, _ = run
    pol = make(f"sb3:{out}").model.policy
    x, y = _obs_pair(pol, np.random.default_rng(1))
    with th.no_grad():
        vx, vy = pol.predict_values(th.as_tensor(x)), pol.predict_values(th.as_tensor(y))
    assert not th.allclose(vx, vy)


def test_side_car_and_public_evaluation(run, tmp_path, capsys):
    env_id, out, meta = run
    side = json.loads((out / "clustergym.json").read_text())
    assert side["privileged"] == "critic" and side["shaping"] == "none" and meta["vec"] == "dummy"
    agent = make(f"sb3:{out}")
    public = int(agent.model.policy.public_dim)
    # the env the runner builds gives public observations only: the agent's vector ends with zeros
    env = make_train_env(env_id, {**side["env_kwargs"], "horizon": 8}, stats=bool(side["stats"]),
                         layout=side["obs_layout"])
    assert env.observation_space.shape[0] == public
    env.close()
    res = tmp_path / "cmp"
    assert main(["run", env_id, "--agents", f"sb3:{out}", "--instances", "0-1", "--seeds", "0", "--horizon", "8",
                 "--out", str(res), "--no-plots", "--no-progress"]) == 0, capsys.readouterr().err
    runs = json.loads((res / "results.json").read_text())["runs"]
    assert len(runs) == 2 and all(r["steps"] == 8 and np.isfinite(r["total_reward"]) for r in runs)


def test_normalisation_of_the_public_part_does_not_depend_on_the_privileged_slice():
    kw = {"horizon": 16, "scenario_seed": 3}
    plain = normalizer(make_train_vec(P1, kw, 2), gamma=0.9)
    priv = normalizer(make_train_vec(P1, kw, 2, privileged="critic"), gamma=0.9)
    for v in (plain, priv):
        v.seed(5)
    a, b = plain.reset(), priv.reset()
    n = a.shape[1]
    assert b.shape[1] > n
    rng = np.random.default_rng(0)
    for _ in range(20):
        act = rng.integers(0, 2, (2, *plain.action_space.shape))
        a, ra, _, _ = plain.step(act)
        b, rb, _, _ = priv.step(act)
        np.testing.assert_array_equal(a, b[:, :n])
        np.testing.assert_array_equal(ra, rb)
    plain.close()
    priv.close()


@pytest.mark.parametrize("flags, needle", [
    (["--privileged", "bogus"], "privileged='bogus' is invalid"),
    (["--privileged", "critic", "--net", "entity"], "net='mlp' only"),
    (["--privileged", "critic", "--vec", "native"], "vec='native'"),
    (["--privileged", "critic", "--warm-start", "esdp"], "warm_start"),
    (["--shaping", "maybe"], "shaping='maybe' is invalid"),
])
def test_bad_values_are_one_line_errors(flags, needle, tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["train", P1, "--timesteps", "64", "--out", str(out), *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("algo", ["a2c", "maskable_ppo"])
def test_other_actor_critic_algorithms_save_and_load(algo, tmp_path):
    """A2C's policy kwargs are pickled (its optimizer class) and rebuilt by ``sb3:`` from the side-car's."""
    out = tmp_path / "run"
    hp = {"n_steps": 32} if algo == "a2c" else TINY
    train(TrainConfig(P1, algo, 64, env_kwargs={"horizon": 16}, n_envs=2, hyperparams=hp, privileged="critic",
                      curve_references=False), str(out), progress=False)
    pol = make(f"sb3:{out}").model.policy
    assert type(pol).__name__.startswith("Privileged") and pol.observation_space.shape[0] > pol.public_dim
