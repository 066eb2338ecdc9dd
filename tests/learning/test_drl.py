"""DRL comparisons: ``clustergym train`` for every (env, algo) pair with a tiny
budget, saved models evaluating as ``sb3:`` agents, and the train/evaluate observation contract."""

import json

import gymnasium as gym
import numpy as np
import pytest

from clustergym.core.agent import make, public_info
from clustergym.cli.main import main
from clustergym.learning.algos import check_algo
from clustergym.learning.train_envs import make_train_env
from clustergym.learning.pipeline import EmpiricalStats, ObsPipeline, sb3_mask

P1, P2, P3, P4 = (f"clustergym/{n}-v0" for n in ("MultiServerChannel", "MultiServerAllocation",
                                                  "RingAllReduce", "ApproxJobs"))
# Small instances keep each training to a few seconds.
SMALL = {P1: ["--set", "num_servers=12"], P2: ["--set", "num_servers=16"], P3: ["--set", "action_mode=ring_size"],
         P4: ["--set", "num_machines=10", "--set", "max_jobs=5"]}
PAIRS = [(P1, "ppo"), (P2, "ppo"), (P3, "ppo"), (P4, "ppo"),
         (P1, "a2c"), (P2, "a2c"), (P3, "a2c"), (P4, "a2c"),
         (P2, "sac"), (P1, "maskable_ppo"), (P4, "maskable_ppo")]
TINY = {"ppo": ["--hp", "n_steps=32", "--hp", "batch_size=32", "--hp", "n_epochs=1"],
        "maskable_ppo": ["--hp", "n_steps=32", "--hp", "batch_size=32", "--hp", "n_epochs=1"],
        "a2c": ["--hp", "n_steps=8"],
        "sac": ["--hp", "learning_starts=16", "--hp", "batch_size=16", "--hp", "buffer_size=200"]}


@pytest.mark.parametrize("env_id,algo", PAIRS, ids=[f"{e.split('/')[1][:-3]}-{a}" for e, a in PAIRS])
def test_train_then_evaluate_as_sb3_agent(tmp_path, env_id, algo, capsys):
    run = tmp_path / "run"
    rc = main(["train", env_id, "--algo", algo, "--timesteps", "64", "--horizon", "24", "--n-envs", "2",
               "--eval-freq", "32", "--eval-episodes", "1", "--out", str(run), "--no-progress",
               *SMALL[env_id], *TINY[algo]])
    assert rc == 0
    for name in ("model.zip", "clustergym.json", "evaluations.npz", "training_curve.png"):
        assert (run / name).exists(), name
    assert any((run / "tb").iterdir()), "no TensorBoard logs"
    meta = json.loads((run / "clustergym.json").read_text())
    assert meta["env_id"] == env_id and meta["algo"] == algo and meta["timesteps"] == 64
    evals = np.load(run / "evaluations.npz")
    assert evals["timesteps"].size >= 1 and np.isfinite(evals["results"]).all()

    out = tmp_path / "eval"
    rc = main(["run", env_id, "--agents", f"sb3:{run}/model.zip,random", "--seeds", "100,101", "--horizon", "20",
               "--out", str(out), "--no-progress", "--no-plots", *SMALL[env_id]])
    assert rc == 0
    res = json.loads((out / "results.json").read_text())
    runs = [r for r in res["runs"] if r["agent"].startswith("sb3:")]
    assert len(runs) == 2 and all(r["steps"] == 20 and np.isfinite(r["total_reward"]) for r in runs)


def test_bad_algo_env_pairs_fail_with_clear_errors(tmp_path, capsys):
    with pytest.raises(ValueError, match="SAC needs Box actions"):
        check_algo("sac", "multiserver-channel")
    with pytest.raises(ValueError, match="MaskablePPO"):
        check_algo("maskable_ppo", "multiserver-allocation")
    rc = main(["train", P1, "--algo", "sac", "--timesteps", "10", "--out", str(tmp_path / "x")])
    assert rc == 2 and "SAC" in capsys.readouterr().err
    assert not (tmp_path / "x").exists(), "nothing is written when the input is bad"
    rc = main(["train", P1, "--algo", "ppo", "--timesteps", "10", "--set", "num_ports=0", "--out",
               str(tmp_path / "y")])
    assert rc == 2 and "num_ports" in capsys.readouterr().err
    assert not (tmp_path / "y").exists()


def test_sb3_agent_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        make("sb3:/nonexistent/model.zip", env_id=P1)


@pytest.mark.parametrize("env_id,kwargs", [(P1, {"num_servers": 12}), (P4, {"num_machines": 10, "max_jobs": 5})])
def test_masks_from_public_info_equal_env_action_masks(env_id, kwargs):
    env = gym.make(env_id, horizon=60, oracle=False, **kwargs)
    u = env.unwrapped
    rng = np.random.default_rng(0)
    obs, info = env.reset(seed=3)
    for _ in range(60):
        np.testing.assert_array_equal(sb3_mask(u.family, info), u.action_masks())
        mask = u.action_masks().reshape(len(u.action_space.nvec) if hasattr(u.action_space, "nvec") else -1, -1) \
            if env_id == P4 else None
        if env_id == P4:
            a = np.array([rng.choice(np.flatnonzero(m)) for m in mask])
        else:
            a = rng.integers(0, 2, u.problem.num_edges) & info["action_mask"]
        obs, r, term, trunc, info = env.step(a)
        if term or trunc:
            break


@pytest.mark.parametrize("env_id,kwargs", [(P1, {"num_servers": 12}), (P2, {"num_servers": 16}),
                                           (P4, {"num_machines": 10, "max_jobs": 5})])
def test_wrapper_and_agent_see_the_same_observations(env_id, kwargs):
    """Training (gym wrapper) and evaluation (agent pipeline) build identical observation vectors."""
    wrapped = make_train_env(env_id, {"horizon": 50, **kwargs})
    plain = gym.make(env_id, horizon=50, oracle=False, **kwargs)
    u = plain.unwrapped
    pipe = ObsPipeline(u.family, u.problem, plain.observation_space, stats=True)
    wo, _ = wrapped.reset(seed=5)
    po, info = plain.reset(seed=5)
    np.testing.assert_array_equal(wo, pipe.reset(po))
    wrapped.action_space.seed(1)
    for _ in range(50):
        a = wrapped.action_space.sample()
        wo, wr, _, wt, winfo = wrapped.step(a)
        pa = a
        if isinstance(wrapped.action_space, gym.spaces.Box):  # what RescaleAction hands the env
            lo, hi = np.zeros_like(u.problem.edge_demand, dtype=float), u.problem.edge_demand.astype(float)
            pa = lo + (np.clip(a.astype(np.float64), -1, 1) + 1.0) * 0.5 * (hi - lo)
        po, pr, _, pt, info = plain.step(pa)
        np.testing.assert_allclose(wo, pipe.observe(po), rtol=1e-6)
        assert wr == pytest.approx(pr, rel=1e-6)
        if wt:
            break
    assert np.isfinite(wo).all() and wo.size == pipe.size


def test_empirical_stats_p1_match_hand_computation():
    env = gym.make(P1, horizon=30, oracle=False, num_servers=12)
    u = env.unwrapped
    st = EmpiricalStats(u.family, u.problem)
    obs, info = env.reset(seed=0)
    n = np.zeros(u.problem.num_edges)
    s = np.zeros(u.problem.num_edges)
    jobs = np.zeros(u.problem.num_ports)
    for t in range(1, 31):
        a = info["action_mask"].astype(np.int8)  # repaired by the env if over capacity
        prev = obs
        obs, r, term, trunc, info = env.step(a)
        st.update(prev, public_info(info))
        ch = np.flatnonzero(info["feedback"]["executed"])
        n[ch] += 1
        s[ch] += info["feedback"]["utilities"][ch]
        jobs += prev["arrivals"]
        v = st.vector()
        E = u.problem.num_edges
        # atol: a Beta draw (P1's noise law) can be ~1e-128, which float32 stores as 0.
        np.testing.assert_allclose(v[:E], np.where(n > 0, s / np.maximum(n, 1), 0), rtol=1e-6, atol=1e-37)
        np.testing.assert_allclose(v[E:2 * E], n / t, rtol=1e-6)
        np.testing.assert_allclose(v[2 * E:], jobs / t, rtol=1e-6)


def test_train_into_an_earlier_run_needs_overwrite_and_starts_clean(tmp_path, capsys):
    out = tmp_path / "r"
    args = ["train", P1, "--algo", "ppo", "--timesteps", "64", "--horizon", "24", "--n-envs", "2", "--hp",
            "n_steps=32", "--hp", "batch_size=32", "--eval-freq", "64", "--eval-episodes", "1", "--no-progress",
            "--out", str(out)]
    assert main(args) == 0
    (out / "monitor" / "stale.monitor.csv").write_text("# old run\n")
    capsys.readouterr()
    assert main(args) == 2 and "--overwrite" in capsys.readouterr().err
    assert main([*args, "--overwrite"]) == 0
    assert not (out / "monitor" / "stale.monitor.csv").exists()  # nothing of the earlier run is plotted again
    assert (out / "model.zip").exists()


class _Payload:
    """Unpickling this runs a command (what a crafted file would do); here it only creates a marker file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        import os

        return (os.system, (f"touch {self.marker}",))


def _craft(zip_in, zip_out, marker, extra_key=None):
    import base64
    import zipfile

    import cloudpickle

    blob = base64.b64encode(cloudpickle.dumps(_Payload(marker))).decode()
    with zipfile.ZipFile(zip_in) as zi, zipfile.ZipFile(zip_out, "w") as zo:
        for item in zi.infolist():
            raw = zi.read(item.filename)
            if item.filename == "data":
                d = json.loads(raw)
                d["_last_obs"] = {":type:": "<class 'numpy.ndarray'>", ":serialized:": blob}
                if extra_key:
                    d[extra_key] = {":type:": "<class 'object'>", ":serialized:": blob}
                raw = json.dumps(d).encode()
            zo.writestr(item, raw)


def test_crafted_model_zip_and_statistics_do_not_run_code(tmp_path):
    from clustergym.core.agent import make

    run = tmp_path / "run"
    assert main(["train", P1, "--algo", "ppo", "--timesteps", "64", "--horizon", "24", "--n-envs", "2", "--hp",
                 "n_steps=32", "--hp", "batch_size=32", "--eval-freq", "64", "--eval-episodes", "1", "--no-progress",
                 "--out", str(run)]) == 0
    marker = tmp_path / "PWNED"
    good = run / "model.zip"
    _craft(good, tmp_path / "m.zip", marker)
    (run / "model.zip").unlink()
    (tmp_path / "m.zip").rename(good)
    agent = make(f"sb3:{good}")  # the crafted entry is supplied by us, never unpickled
    assert not marker.exists()
    import shutil

    shutil.copy(good, tmp_path / "ok.zip")
    # the crafted file really is dangerous for a plain SB3 load (so this test can fail)
    from stable_baselines3 import PPO

    PPO.load(good, device="cpu")
    assert marker.exists()
    marker.unlink()
    # an unknown pickled entry is refused, not unpickled
    _craft(good, tmp_path / "m2.zip", marker, extra_key="evil")
    (tmp_path / "m2.zip").replace(good)
    with pytest.raises(ValueError, match="evil"):
        make(f"sb3:{good}")
    assert not marker.exists()
    # statistics: a .npz with a pickled object array is refused; an old pickle is never loaded
    shutil.copy(tmp_path / "ok.zip", good)
    make(f"sb3:{good}")  # loads again with the real statistics
    stats = run / "vecnormalize.npz"
    np.savez(stats, mean=np.array([_Payload(marker)], dtype=object), var=np.ones(1), clip_obs=10.0, epsilon=1e-8)
    with pytest.raises(ValueError, match="pickle"):
        make(f"sb3:{good}")
    assert not marker.exists()
    stats.unlink()
    import pickle

    (run / "vecnormalize.pkl").write_bytes(pickle.dumps(_Payload(marker)))
    with pytest.raises(ValueError, match="vecnormalize.npz is missing"):  # the side-car check; the .pkl is never read
        make(f"sb3:{good}")
    assert not marker.exists()
    del agent
