"""The privileged-training ablation of ``clustergym drl`` (``p1-privileged``, ``p2-privileged``): one row per
training option against the same base, scored on validation instances, never shipped as a pretrained model."""

import json

import pytest

pytest.importorskip("stable_baselines3")

from clustergym.cli.main import main  # noqa: E402
from clustergym.experiments import drl  # noqa: E402
from clustergym.experiments.drl_plan import HELD_OUT, PLAN, VALIDATION_ABLATION  # noqa: E402


def test_each_option_is_one_row_against_the_same_flat_mlp_base_on_validation_instances():
    options = {"p1-privileged": {"ppo-100k-critic": {"privileged": "critic"}, "ppo-100k-shaped": {"shaping": "oracle"},
                                 "bc(oracle)+ppo-100k": {"warm_start": "oracle"}},
               "p2-privileged": {"ppo-100k-critic": {"privileged": "critic"}}}
    for key, rows in options.items():
        p = PLAN[key]
        assert [lr.name for lr in p.main_rows()] == ["ppo-100k"] and p.main_rows()[0].options == {}
        ablations = {lr.name: lr for lr in p.learners if lr.ablation}
        assert {n: lr.options for n, lr in ablations.items()} == rows
        assert all(lr.base == "ppo-100k" and lr.budget == 100_000 for lr in ablations.values())
        assert p.eval_instances == VALIDATION_ABLATION and not set(VALIDATION_ABLATION) & set(HELD_OUT)
        assert not set(VALIDATION_ABLATION) & set(p.curve_instances) and not set(VALIDATION_ABLATION) & set(range(900, 910))
        assert not p.ships_model


def test_the_quick_ablation_trains_every_option_and_scores_it_on_validation_instances_only(tmp_path, capsys):
    out = tmp_path / "priv"
    summ = drl.run_benchmark(str(out), ["p1-privileged"], quick=True, workers=1, progress=False, log=lambda *_: None)
    env = summ["envs"]["p1-privileged"]
    assert [r["learner"] for r in env["ablation"]] == ["ppo-100k-critic", "ppo-100k-shaped", "bc(oracle)+ppo-100k"]
    assert {r["ablation"] for r in env["ablation"]} == {"privileged critic", "oracle shaping", "oracle warm start"}
    res = json.loads((out / "p1-privileged" / "eval" / "results.json").read_text())
    assert {r["instance"] for r in res["runs"]} == set(VALIDATION_ABLATION[:5])
    table = (out / "table.md").read_text()
    assert "Evaluated on validation instances 920, 921" in table and "the same validation runs" in table
    # the side-cars record the option each row trained with
    for name, key, value in (("ppo-100k-critic", "privileged", "critic"), ("ppo-100k-shaped", "shaping", "oracle")):
        car = json.loads((out / "p1-privileged" / name / "seed0" / "clustergym.json").read_text())
        assert car[key] == value
    # an ablation study ships no model
    assert main(["drl", "--envs", "p1-privileged", "--export-pretrained", "--out", str(tmp_path / "x")]) == 2
    assert "ships no model" in capsys.readouterr().err
