"""The gap-to-the-bound table of the learned-scheduler benchmark, on hand-made scores whose cells are known."""

from types import SimpleNamespace

import pytest

from clustergym.experiments.drl_plan import PLAN
from clustergym.experiments.drl_report import episode_bounds, gap_table
from clustergym.experiments.leaderboard import episode_bound


def _res(scores: dict) -> SimpleNamespace:
    """Runs of agents on instances 0 and 1 (seed 0), each with its score and a total equal to it."""
    runs = [SimpleNamespace(agent=a, instance=k, seed=0, score=s, total_reward=s)
            for a, per in scores.items() for k, s in enumerate(per)]
    return SimpleNamespace(runs=runs)


SCORES = {"sb3:m0": [0.9, 0.8], "ppo-paper": [0.5, 0.6], "best": [0.8, 0.5], "random": [0.0, 0.0]}


def test_shares_of_each_references_headroom_closed_are_the_hand_computed_ones():
    rows, md = gap_table(_res(SCORES), {"ppo": ["sb3:m0"]}, "ppo-paper", "best")
    learner = rows[0]
    assert learner["learner"] == "ppo" and learner["learned"]
    assert learner["score"] == pytest.approx(0.85)
    assert learner["headroom"] == pytest.approx(0.15)
    # vs the paper policy: (0.9 − 0.5) / 0.5 = 0.8 and (0.8 − 0.6) / 0.4 = 0.5
    assert learner["closed"]["ppo-paper"]["mean"] == pytest.approx(0.65)
    # vs the best non-learned policy: (0.9 − 0.8) / 0.2 = 0.5 and (0.8 − 0.5) / 0.5 = 0.6
    assert learner["closed"]["best"]["mean"] == pytest.approx(0.55)
    by_name = {r["learner"]: r for r in rows}
    assert by_name["best"]["headroom"] == pytest.approx(0.35) and by_name["best"]["closed"] == {}
    assert by_name["random"]["score"] == 0.0 and by_name["random"]["headroom"] == 1.0
    assert "| ppo | 0.850 [" in md and "| 0.150 | +0.650 [" in md and "*best*" in md


def test_a_learner_below_a_reference_closes_a_negative_share_and_a_reference_at_the_bound_is_left_out():
    scores = {"sb3:m0": [0.4, 0.9], "p": [0.6, 1.0], "random": [0.0, 0.0]}
    rows, md = gap_table(_res(scores), {"ppo": ["sb3:m0"]}, "p", None)
    closed = rows[0]["closed"]["p"]
    assert closed["n"] == 1 and closed["mean"] == pytest.approx((0.4 - 0.6) / 0.4)
    assert "(n=1)" in md


def test_no_table_where_runs_carry_no_score():
    res = SimpleNamespace(runs=[SimpleNamespace(agent="random", instance=0, seed=0, score=None, total_reward=1.0)])
    assert gap_table(res, {}, "gadget", None) == ([], "")


def _totals(totals: dict) -> SimpleNamespace:
    """Runs without a score (P3's): agents on instances 0 and 1 with the given totals."""
    return SimpleNamespace(runs=[SimpleNamespace(agent=a, instance=k, seed=k, score=None, total_reward=v)
                                 for a, per in totals.items() for k, v in enumerate(per)])


def test_runs_without_a_score_are_scored_against_the_episode_bounds():
    totals = {"sb3:m0": [90.0, 70.0], "gadget": [60.0, 40.0], "las": [80.0, 70.0], "random": [50.0, 30.0]}
    rows, md = gap_table(_totals(totals), {"ppo": ["sb3:m0"]}, "gadget", "las", bounds={0: 100.0, 1: 80.0})
    by_name = {r["learner"]: r for r in rows}
    # scores (V − V_random) / (B − V_random): learner 40/50 and 40/50, las 30/50 and 40/50, gadget 10/50 and 10/50
    assert by_name["ppo"]["score"] == pytest.approx(0.8)
    assert by_name["las"]["score"] == pytest.approx(0.7) and by_name["gadget"]["score"] == pytest.approx(0.2)
    # the share of las's headroom closed: (0.8 − 0.6) / 0.4 = 0.5 and (0.8 − 0.8) / 0.2 = 0
    assert by_name["ppo"]["closed"]["las"]["mean"] == pytest.approx(0.25)
    assert "share of las's headroom closed" in md


def test_an_agent_above_its_episode_bound_is_refused():
    plan = PLAN["p3s"]
    bound = episode_bound(plan.env_id, 0, 20, plan.env_kwargs)
    ok = _totals({"random": [0.5 * bound]})
    ok.runs = ok.runs[:1]
    assert episode_bounds(plan, ok, 20) == {0: pytest.approx(bound)}
    ok.runs[0].total_reward = bound * 1.01
    with pytest.raises(ValueError, match="above its episode bound"):
        episode_bounds(plan, ok, 20)
    assert episode_bounds(PLAN["p4"], ok, 20) is None


def test_the_pooled_share_is_the_ratio_of_mean_gains_to_mean_headroom():
    rows, md = gap_table(_res(SCORES), {"ppo": ["sb3:m0"]}, "ppo-paper", "best")
    # gains over the paper policy 0.4 and 0.2, its headroom 0.5 and 0.4: 0.3 / 0.45
    assert rows[0]["closed"]["ppo-paper"]["pooled"]["mean"] == pytest.approx(0.3 / 0.45)
    assert "| +0.667 [" in md
    # a reference at the bound stays in the pooled share: gains −0.2 and −0.1 over headroom 0.4 and 0
    scores = {"sb3:m0": [0.4, 0.9], "p": [0.6, 1.0], "random": [0.0, 0.0]}
    pooled = gap_table(_res(scores), {"ppo": ["sb3:m0"]}, "p", None)[0][0]["closed"]["p"]["pooled"]
    assert pooled["mean"] == pytest.approx(-0.75) and pooled["n"] == 2


def test_a_reference_a_hair_below_the_bound_blows_up_the_per_instance_share_but_not_the_pooled_one():
    scores = {"sb3:m0": [0.79, 0.6, 0.7], "p": [0.8, 1.0 - 1e-7, 0.6], "random": [0.0, 0.0, 0.0]}
    closed = gap_table(_res(scores), {"ppo": ["sb3:m0"]}, "p", None)[0][0]["closed"]["p"]
    assert closed["mean"] < -1e5  # (0.6 − (1 − 1e-7)) / 1e-7 on the second instance
    assert closed["pooled"]["mean"] == pytest.approx((-0.01 - 0.4 + 0.1) / (0.2 + 1e-7 + 0.4), rel=1e-6)
