"""A benchmark env with its own scenario (P3 on `gpu-short`): the scenario reaches the cells' configuration, every
evaluation and the exported model's name, and leaves the envs on their defaults untouched."""

import json
import os

from clustergym.experiments.drl_cache import _evaluate_cached
from clustergym.experiments.drl_cells import cell_config
from clustergym.experiments.drl_export import pretrained_name
from clustergym.experiments.drl_plan import HORIZON, PLAN

P3 = "clustergym/RingAllReduce-v0"


def test_the_scenario_is_part_of_each_cell_of_its_plan_and_of_no_other():
    p3s = PLAN["p3s"]
    assert p3s.env_kwargs == {"scenario": "gpu-short"}
    for lr in p3s.learners:
        cfg = cell_config(p3s, lr, 0, HORIZON, False)
        assert cfg["env_kwargs"] == {"scenario": "gpu-short"}
    for key in ("p1", "p2", "p3", "p4"):  # the envs on their defaults: the same configuration as before
        assert "env_kwargs" not in cell_config(PLAN[key], PLAN[key].learners[0], 0, HORIZON, False)
    assert [lr.name for lr in p3s.main_rows()] == ["ppo-decoder"]
    assert PLAN["p3s"].learners[0].options["net"] == "autoregressive"


def test_its_model_ships_under_its_own_name():
    assert pretrained_name("p3") == "RingAllReduce-v0"
    assert pretrained_name("p3s") == "RingAllReduce-v0-gpu-short"


def test_evaluations_run_on_the_scenario_and_a_cache_of_another_scenario_is_not_reused(tmp_path):
    folder = str(tmp_path / "bench" / "p3s" / "eval")
    logs: list[str] = []
    kw = {"workers": 1, "progress": False, "log": logs.append}
    short = _evaluate_cached(folder, P3, ["fifo", "random"], [0, 1], 8, None, env_kwargs={"scenario": "gpu-short"},
                             **kw)
    assert short.env_kwargs["scenario"] == "gpu-short"
    with open(os.path.join(folder, "runs_cache.json")) as f:
        assert json.loads(json.load(f)["design"])["env_kwargs"] == {"scenario": "gpu-short"}
    again = _evaluate_cached(folder, P3, ["fifo", "random"], [0, 1], 8, None, env_kwargs={"scenario": "gpu-short"},
                             **kw)
    assert [r.total_reward for r in again.runs] == [r.total_reward for r in short.runs]
    paper = _evaluate_cached(folder, P3, ["fifo", "random"], [0, 1], 8, None, **kw)  # the env's default scenario
    assert "env_kwargs" not in json.loads(json.load(open(os.path.join(folder, "runs_cache.json")))["design"])
    assert paper.env_kwargs.get("scenario", "paper") == "paper"


def test_every_warm_start_teacher_is_among_the_references_of_its_plan():
    """A learner cloned from a heuristic is compared with that heuristic: the teacher of every warm-start row (its
    options included) is one of the non-learned agents its plan evaluates."""
    teachers = 0
    for p in PLAN.values():
        refs = p.references()
        for lr in p.learners:
            teacher = lr.options.get("warm_start")
            if teacher and teacher != "oracle":
                teachers += 1
                assert teacher in refs, (p.key, lr.name, teacher)
    assert teachers >= 4
    assert "las[thresholds=continuous,workers=3]" in PLAN["p3s"].references()
    assert "las[thresholds=continuous,workers=3]" not in PLAN["p3"].references()
