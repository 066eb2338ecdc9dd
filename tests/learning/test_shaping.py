"""``shaping="oracle"``: the training reward is the env's reward minus the slot's per-slot oracle value; the
recorded episode returns and evaluation rewards stay the env's own."""

import json

import gymnasium as gym
import numpy as np

from clustergym.cli.main import main
from clustergym.learning.training import TrainConfig, train
from clustergym.learning.train_envs import make_train_env

P1 = "clustergym/MultiServerChannel-v0"
KW = {"horizon": 12, "scenario_seed": 2}


def test_the_training_reward_is_the_reward_minus_the_oracle_value():
    shaped = make_train_env(P1, KW, shaping="oracle")
    ref = gym.make(P1, **KW, oracle=True)
    shaped.reset(seed=4)
    ref.reset(seed=4)
    rng = np.random.default_rng(0)
    gaps = []
    for _ in range(12):
        a = rng.integers(0, 2, ref.action_space.shape)
        _, r, *_ = shaped.step(a)
        _, r0, _, _, info = ref.step(a)
        want = float(r0) - float(info["metrics"]["oracle_reward"])
        assert r == want
        gaps.append(want)
    assert min(gaps) < 0  # random decisions fall short of the oracle somewhere
    shaped.close()
    ref.close()


def test_train_records_the_shaping_and_the_model_runs_unshaped(tmp_path, capsys):
    out = tmp_path / "run"
    meta = train(TrainConfig(P1, "ppo", 128, env_kwargs={"horizon": 16}, n_envs=2, shaping="oracle",
                             hyperparams={"n_steps": 64, "batch_size": 64, "n_epochs": 1}, curve_references=False),
                 str(out), progress=False)
    assert meta["shaping"] == "oracle" and meta["privileged"] == "none"
    res = tmp_path / "cmp"
    assert main(["run", P1, "--agents", f"sb3:{out}", "--instances", "0", "--seeds", "0", "--horizon", "8",
                 "--out", str(res), "--no-plots", "--no-progress"]) == 0, capsys.readouterr().err
    runs = json.loads((res / "results.json").read_text())["runs"]
    assert len(runs) == 1 and runs[0]["total_reward"] >= 0  # P1's rewards are utilities: the env's, not shaped


def test_shaping_needs_a_per_slot_oracle(tmp_path, capsys):
    assert main(["train", "clustergym/MultiServerAllocation-v0", "--timesteps", "64", "--out", str(tmp_path / "o"),
                 "--shaping", "oracle"]) == 2
    err = capsys.readouterr().err.strip()
    assert "no per-slot oracle value" in err and len(err.splitlines()) == 1
