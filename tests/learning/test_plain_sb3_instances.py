"""A model trained with plain Stable-Baselines3 outside the CLI, imported with ``clustergym import-model`` and
compared on held-out instances beside a baseline (docs/recipes.md): it acts on every instance whose spaces fit
it, with intervals over those instances, and an instance whose spaces do not fit is refused in one line."""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("stable_baselines3")

import gymnasium as gym  # noqa: E402
import torch  # noqa: E402

import clustergym  # noqa: E402
from clustergym.cli.main import main  # noqa: E402
from clustergym.runner.evaluation import evaluate  # noqa: E402
from tests.helpers import one_line_exit_2  # noqa: E402

torch.set_num_threads(1)
P1, P2, P3, P4 = clustergym.ENV_IDS


def _plain_flat_model(env_id, path, **env_kwargs):
    from stable_baselines3 import PPO

    env = gym.wrappers.FlattenObservation(gym.make(env_id, horizon=16, **env_kwargs))
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=32, n_epochs=1, seed=0, device="cpu")
    model.learn(32)
    model.save(path)
    return model


def test_imported_plain_model_is_compared_on_held_out_instances_with_intervals(tmp_path, capsys):
    _plain_flat_model(P4, tmp_path / "ppo.zip")
    imp = tmp_path / "imp"
    assert main(["import-model", str(tmp_path / "ppo.zip"), "--env", P4, "--out", str(imp)]) == 0
    capsys.readouterr()
    res = tmp_path / "res"
    assert main(["run", P4, "--agents", f"sb3:{imp},fair", "--instances", "10-12", "--seeds", "0", "--horizon", "8",
                 "--out", str(res), "--no-plots", "--no-progress", "--no-score"]) == 0
    data = json.loads((res / "results.json").read_text())
    assert sorted({r["instance"] for r in data["runs"] if r["agent"] == f"sb3:{imp}"}) == [10, 11, 12]
    (comp,) = data["comparisons"]
    assert comp["n"] == 3 and all(math.isfinite(comp[k]) for k in ("mean", "low", "high"))
    assert not any(r["trained_on"] for r in data["runs"])  # held out: the model trained on instance 0 only
    assert "n/a" not in capsys.readouterr().out
    # --seeds alone: one instance per seed, no longer pinned to the model's instance 0
    res2 = tmp_path / "res2"
    assert main(["run", P4, "--agents", f"sb3:{imp},fair", "--seeds", "0-1", "--horizon", "8", "--out", str(res2),
                 "--no-plots", "--no-progress", "--no-score"]) == 0
    data2 = json.loads((res2 / "results.json").read_text())
    assert data2["instance_axis"] == "scenario_seed" and data2["instances"] == [0, 1]


def test_evaluate_takes_a_loaded_sb3_model(tmp_path):
    model = _plain_flat_model(P4, tmp_path / "ppo.zip")
    imp = tmp_path / "imp"
    assert main(["import-model", str(tmp_path / "ppo.zip"), "--env", P4, "--out", str(imp)]) == 0
    kw = dict(seeds=[0], horizon=6, instances=[20, 21], progress=False, score=False)
    res = evaluate(P4, [model, "fair"], **kw)
    by_name = evaluate(P4, [f"sb3:{imp}", "fair"], **kw)
    got = {(r.agent, r.instance): r.total_reward for r in res.runs}
    want = {(r.agent.replace(f"sb3:{imp}", "sb3:PPO"), r.instance): r.total_reward for r in by_name.runs}
    assert got == want and ("sb3:PPO", 21) in got  # the object acts as its imported copy, on held-out instances
    assert len(res.comparisons()) == 1


def test_a_model_whose_spaces_do_not_fit_an_instance_is_refused_in_one_line(tmp_path, capsys):
    _plain_flat_model(P1, tmp_path / "ppo.zip")  # P1's spaces depend on the instance (its number of servers)
    imp = tmp_path / "imp"
    assert main(["import-model", str(tmp_path / "ppo.zip"), "--env", P1, "--out", str(imp)]) == 0
    line = one_line_exit_2(capsys, ["run", P1, "--agents", f"sb3:{imp},random", "--instances", "0-1", "--seeds", "0",
                                    "--horizon", "8", "--out", str(tmp_path / "res"), "--no-plots", "--no-progress"])
    want = gym.spaces.flatten_space(gym.make(P1, scenario_seed=0).observation_space).shape
    got = gym.spaces.flatten_space(gym.make(P1, scenario_seed=1).observation_space).shape
    assert f"instance 1: observation space: the model expects Box{want}, the env gives Box{got}" in line
    # its own instance still runs (--set scenario_seed pins it; --seeds alone falls back to it)
    res = tmp_path / "res0"
    assert main(["run", P1, "--agents", f"sb3:{imp},random", "--seeds", "0-1", "--horizon", "8", "--out", str(res),
                 "--no-plots", "--no-progress", "--no-score"]) == 0
    assert json.loads((res / "results.json").read_text())["instance_axis"].startswith("scenario_seed pinned to 0")


def test_import_model_records_the_pool_it_was_trained_on(tmp_path, capsys):
    pool = [100, 101, 102]
    _plain_flat_model(P4, tmp_path / "ppo.zip", instances=pool)
    imp = tmp_path / "imp"
    assert main(["import-model", str(tmp_path / "ppo.zip"), "--env", P4, "--out", str(imp), "--set",
                 f"instances={json.dumps(pool)}"]) == 0
    assert "pool of 3 instances" in capsys.readouterr().out
    meta = json.loads((imp / "clustergym.json").read_text())
    assert meta["instances"] == pool and "instances" not in meta["env_kwargs"]
    res = tmp_path / "res"
    assert main(["run", P4, "--agents", f"sb3:{imp},fair", "--instances", "101-103", "--seeds", "0", "--horizon", "6",
                 "--out", str(res), "--no-plots", "--no-progress", "--no-score"]) == 0
    runs = json.loads((res / "results.json").read_text())["runs"]
    assert {r["instance"]: r["trained_on"] for r in runs if r["agent"] == f"sb3:{imp}"} == {101: True, 102: True,
                                                                                            103: False}
    line = one_line_exit_2(capsys, ["import-model", str(tmp_path / "ppo.zip"), "--env", P4, "--out",
                                    str(tmp_path / "bad"), "--set", "instances=[]"])
    assert "instances=[] is invalid" in line
