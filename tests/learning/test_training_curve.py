"""The learning curve ``clustergym train`` draws: reference lines (the paper policy, the best baseline, random)
on the training instances, recorded in the side-car and drawn as dashed lines."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

import clustergym  # noqa: E402
from clustergym.cli.main import main  # noqa: E402
from clustergym.runner.evaluation import evaluate  # noqa: E402

P1 = clustergym.ENV_IDS[0]


def test_training_curve_has_the_reference_lines_of_the_training_instances(tmp_path, monkeypatch):
    from clustergym.core import plots

    drawn = {}
    real = plots.training_curve

    def spy(ax, steps, returns, **kw):
        drawn.update(kw.get("references") or {})
        real(ax, steps, returns, **kw)
        drawn["_lines"] = [ln.get_label() for ln in ax.get_lines()]

    monkeypatch.setattr("clustergym.learning.curves.training_curve", spy)
    run = tmp_path / "run"
    assert main(["train", P1, "--timesteps", "64", "--horizon", "20", "--n-envs", "1", "--hp", "n_steps=32", "--hp",
                 "batch_size=32", "--hp", "n_epochs=1", "--out", str(run), "--no-progress"]) == 0
    meta = json.loads((run / "clustergym.json").read_text())
    refs = meta["curve_references"]
    on = refs["_on"]
    assert on["horizon"] == 20 and on["instances"] == meta["instances"][:2]
    assert set(k for k in refs if not k.startswith("_")) == {"paper policy (esdp)", "random"} | {
        k for k in refs if k.startswith("best baseline (")}
    # the values are the agents' own mean returns on those instances
    best = next(k for k in refs if k.startswith("best baseline ("))[len("best baseline ("):-1]
    res = evaluate(P1, ["random", best, "esdp"], seeds=[0], horizon=20, instances=on["instances"], progress=False,
                   score=False)
    for agent, key in (("random", "random"), (best, f"best baseline ({best})"), ("esdp", "paper policy (esdp)")):
        assert refs[key] == pytest.approx(np.mean([r.total_reward for r in res.runs if r.agent == agent]))
    others = [a for a in ("hauf", "lcf", "lwtf") if a != best]
    res2 = evaluate(P1, others, seeds=[0], horizon=20, instances=on["instances"], progress=False, score=False)
    for a in others:  # the best of the baselines
        assert np.mean([r.total_reward for r in res2.runs if r.agent == a]) <= refs[f"best baseline ({best})"] + 1e-9
    # drawn as lines on the curve, labelled with their values
    assert {k for k in drawn if not k.startswith("_")} == {k for k in refs if not k.startswith("_")}
    assert any(lab.startswith("random: ") for lab in drawn["_lines"])
    assert any(lab.startswith("best baseline (") for lab in drawn["_lines"])


def test_training_curve_without_an_ended_episode_draws_the_reward_per_step(tmp_path, monkeypatch):
    """Horizon 2,000 x 2 envs beyond a 256-step run: no episode ends; the curve says so and has per-step points."""
    from clustergym.learning.curves import NO_EPISODE, monitor_curve, step_rewards
    from clustergym.learning.training import TrainConfig, train

    shown = {}

    def spy(fig, path):
        ax = fig.axes[0]
        shown.update(title=ax.get_title(), ylabel=ax.get_ylabel(),
                     lines={ln.get_label(): ln.get_xydata() for ln in ax.get_lines()})

    monkeypatch.setattr("clustergym.learning.curves.save", spy)
    run = tmp_path / "run"
    train(TrainConfig(P1, "ppo", 256, env_kwargs={"horizon": 2000}, n_envs=2, curve_references=False,
                      hyperparams={"n_steps": 64, "batch_size": 64, "n_epochs": 1}), str(run), progress=False)
    assert monitor_curve(str(run))[0].size == 0
    t, r = step_rewards(str(run))
    assert t.size >= 2 and t[-1] == 256 and np.all(np.diff(t) > 0) and np.all(np.isfinite(r))
    assert NO_EPISODE in shown["title"] and shown["ylabel"] == "reward per step"
    (pts,) = [v for k, v in shown["lines"].items() if "reward per step" in k]
    assert np.allclose(pts, np.column_stack([t, r]))


def test_legend_numbers_have_one_format():
    from clustergym.core.plots import figure, legend_number, training_curve

    assert [legend_number(v) for v in (12345.678, 3.14159, -0.012345, 0.0)] == ["12,346", "3.142", "-0.01235", "0"]
    fig, ax = figure()
    training_curve(ax, [], [], references={"random": 12345.678, "paper policy (esdp)": 3.14159})
    assert sorted(ln.get_label() for ln in ax.get_lines()) == ["paper policy (esdp): 3.142", "random: 12,346"]
