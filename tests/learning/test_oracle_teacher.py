"""``warm_start="oracle"``: the family's per-slot oracle as a behaviour-cloning teacher, in training only."""

import gymnasium as gym
import pytest

from clustergym.cli.main import main
from clustergym.core.family import family_spec
from clustergym.learning.imitation import collect_demonstrations
from clustergym.learning.training import TrainConfig, train

P1 = "clustergym/MultiServerChannel-v0"


def test_the_oracle_teacher_earns_the_per_slot_oracle_value():
    oracle_action = family_spec("multiserver-channel").hook("oracle_action")
    env = gym.make(P1, horizon=10, scenario_seed=1, oracle=True)
    env.reset(seed=3)
    for _ in range(10):
        _, _, _, _, info = env.step(oracle_action(env.unwrapped))
        m = info["metrics"]
        assert m["expected_reward"] == pytest.approx(m["oracle_reward"], abs=1e-9) and m["repaired"] == 0


def test_demonstrations_and_a_warm_started_model(tmp_path, capsys):
    demos = collect_demonstrations(P1, {"horizon": 8, "scenario_seed": 2}, "oracle", 16, seed=0)
    assert demos.obs.shape[0] == 16 and demos.reward_gap <= 1e-9 and demos.actions.sum() > 0
    out = tmp_path / "run"
    meta = train(TrainConfig(P1, "ppo", 0, env_kwargs={"horizon": 8}, n_envs=2, warm_start="oracle", bc_steps=32,
                             bc_epochs=1, curve_references=False), str(out), progress=False)
    assert meta["warm_start"]["teacher"] == "oracle"
    assert main(["run", P1, "--agents", f"sb3:{out}", "--instances", "0", "--seeds", "0", "--horizon", "6",
                 "--out", str(tmp_path / "cmp"), "--no-plots", "--no-progress"]) == 0, capsys.readouterr().err


def test_a_family_without_an_oracle_teacher_is_refused(tmp_path, capsys):
    assert main(["train", "clustergym/MultiServerAllocation-v0", "--timesteps", "64", "--warm-start", "oracle",
                 "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert "no per-slot oracle teacher" in err and len(err.splitlines()) == 1
