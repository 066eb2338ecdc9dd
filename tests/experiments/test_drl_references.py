"""The learned-scheduler benchmark's table of each learner against every non-learned agent, and the score's
reference on envs without a bound, on hand-made totals whose cells are known."""

from types import SimpleNamespace

import pytest

from clustergym.experiments.drl_plan import PLAN, EnvPlan
from clustergym.experiments.drl_report import _Agents, _env_table, ablation_table, reference_table, with_best_row


def _res(totals: dict) -> SimpleNamespace:
    """Runs without a score (no bound, as P3): agent -> per-instance totals on instances 0, 1, 2 (seed 0)."""
    runs = [SimpleNamespace(agent=a, instance=k, seed=0, score=None, total_reward=float(t))
            for a, per in totals.items() for k, t in enumerate(per)]
    return SimpleNamespace(runs=runs)


TOTALS = {"sb3:m0": [110, 220, 330], "sb3:m1": [110, 220, 330], "las": [100, 200, 300],
          "gadget": [10, 20, 30], "gadget[rounding_repair=true]": [105, 210, 315], "random": [90, 180, 270]}


def test_every_non_learned_agent_is_a_row_in_decreasing_mean_total_with_the_hand_computed_difference():
    summary, md = reference_table(_res(TOTALS), {"ppo": ["sb3:m0", "sb3:m1"]})
    vs = summary["ppo"]["vs"]
    assert list(vs) == ["gadget[rounding_repair=true]", "las", "random", "gadget"]
    assert vs["las"]["mean"] == pytest.approx(10.0) and vs["las"]["wins"] == 3  # 100·(110 − 100)/100 per instance
    assert vs["gadget[rounding_repair=true]"]["mean"] == pytest.approx(100 * 5 / 105)
    assert vs["gadget"]["mean"] == pytest.approx(1000.0)
    assert summary["ppo"]["above_every"] is True and "| **yes** |" in md
    assert md.index("| gadget[rounding_repair=true] |") < md.index("| las |") < md.index("| gadget |")


def test_one_reference_the_learner_does_not_beat_on_every_instance_makes_it_not_above_every_agent():
    totals = {**TOTALS, "las": [100, 230, 300]}  # the learner loses on instance 1
    summary, md = reference_table(_res(totals), {"ppo": ["sb3:m0"]})
    assert summary["ppo"]["vs"]["las"]["losses"] == 1 and summary["ppo"]["above_every"] is False
    assert "**yes**" not in md


def test_the_best_learner_row_joins_the_main_rows_only_when_it_is_not_one():
    totals = {**TOTALS, "sb3:a0": [120, 240, 360], "sb3:b0": [100, 200, 300]}
    main, all_cells = {"ppo": ["sb3:m0"]}, {"ppo": ["sb3:m0"], "ablation-a": ["sb3:a0"], "ablation-b": ["sb3:b0"]}
    cells = with_best_row(_res(totals), main, all_cells)
    assert list(cells) == ["ppo", "ablation-a"]  # a's mean 240 is above the main row's 220
    summary, md = reference_table(_res(totals), cells)
    assert summary["ablation-a"]["vs"]["las"]["mean"] == pytest.approx(20.0) and "`ablation-a` vs it" in md
    totals["sb3:a0"] = [100, 200, 300]
    assert list(with_best_row(_res(totals), main, all_cells)) == ["ppo"]  # the main row is the best: nothing added


def test_the_score_puts_the_plans_reference_at_one_where_the_paper_policy_is_below_random():
    plan = EnvPlan("x", "clustergym/RingAllReduce-v0", (), None, (0, 1, 2), None, (0,),
                   score_reference="gadget[rounding_repair=true]")
    cells = {"ppo": _Agents(["sb3:m0"], {"budget": 1, "train_wall_s": 0.0, "bc_wall_s": 0.0, "commits": [],
                                         "algo": "ppo", "options": {}, "note": "", "beats_random_from": None,
                                         "after_vs_before": {"text": "–"}})}
    rows, md = _env_table(plan, _res(TOTALS), cells, "gadget", best="las")
    by = {r["learner"]: r for r in rows}
    assert by["gadget[rounding_repair=true]"]["score"] == pytest.approx(1.0)
    assert by["random"]["score"] == pytest.approx(0.0)
    assert by["ppo"]["score"] == pytest.approx(20 / 15)  # (110 − 90) / (105 − 90), the same on every instance
    assert "score vs `gadget[rounding_repair=true]`" in md
    # the paper policy is still a row, compared as before (its score is below 0: it is below random)
    assert by["gadget"]["score"] < 0
    unset = EnvPlan("x", "clustergym/RingAllReduce-v0", (), None, (0, 1, 2), None, (0,))
    rows, md = _env_table(unset, _res(TOTALS), cells, "gadget", best="las")
    assert {r["learner"]: r for r in rows}["ppo"]["score"] == pytest.approx(-20 / 80)
    assert "score vs `gadget` [" in md


def test_the_gpu_short_plan_normalises_by_gadget_with_repair_and_the_others_by_the_paper_policy():
    assert PLAN["p3s"].score_reference == "gadget[rounding_repair=true]"
    assert all(PLAN[k].score_reference == "" for k in ("p1", "p2", "p3", "p4"))
    assert ablation_table(PLAN["p3s"], _res(TOTALS), {}, "gadget") == ([], "")
