"""The gap-to-the-bound table of the learned-scheduler benchmark, on hand-made scores whose cells are known."""

from types import SimpleNamespace

import pytest

from clustergym.experiments.drl_report import gap_table


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
