"""The verdict rule with magnitude and the intervals of bounded quantities (clustergym.core.stats,
docs/evaluation.md "Verdicts on paper claims"), on hand-made data."""

import math

import numpy as np
import pytest

from clustergym.core.stats import (DIRECTION_ONLY, INCONCLUSIVE, MAGNITUDE_FRACTION, NOT_REPRODUCED, REPRODUCED, VERDICTS,
                              claims_table, mean_ci, paired_comparison, proportion_ci, range_verdict, verdict)

REF = {i: 100.0 for i in range(10)}


def _agent(gains):
    return {i: 100.0 + g for i, g in enumerate(gains)}


def test_every_instance_agrees_but_the_interval_touches_zero_is_inconclusive_not_a_flip():
    # 10/0 wins, all tiny but one large: the t-interval reaches below 0
    c = paired_comparison(_agent([0.01] * 9 + [30.0]), REF)
    assert (c.wins, c.losses) == (10, 0) and c.low < 0 < c.high
    assert verdict(c, +1) == INCONCLUSIVE
    md = claims_table([{"claim": "a > b", "paper": "+5%", "comparison": c, "predicted": +1, "paper_effect": 5.0}])
    assert "| 10 / 0 |" in md and "**inconclusive**" in md  # W/L printed beside the verdict


def test_a_real_sign_flip_with_the_interval_on_the_other_side_is_not_reproduced():
    c = paired_comparison(_agent([-5, -6, -4, -7, -5, -6, -5, -4, -6, 1]), REF)
    assert c.wins == 1 and c.high < 0
    assert verdict(c, +1) == NOT_REPRODUCED and verdict(c, -1) == REPRODUCED


def test_interval_on_the_paper_side_is_reproduced_even_with_a_losing_instance():
    # the all-instances condition is gone: 9/1 with the interval above 0 is reproduced
    c = paired_comparison(_agent([10, 12, 9, 11, 10, 13, 12, 9, 11, -1]), REF)
    assert c.losses == 1 and c.low > 0
    assert verdict(c, +1, paper=10.0) == REPRODUCED


def test_a_tiny_effect_against_a_large_paper_number_is_direction_only():
    # +0.1 % on every instance (interval well above 0) where the paper reports +8.3 %
    c = paired_comparison(_agent([0.08, 0.1, 0.12, 0.09, 0.11, 0.1, 0.1, 0.09, 0.11, 0.1]), REF)
    assert c.low > 0 and c.ratio == pytest.approx(0.1, abs=1e-6)
    assert verdict(c, +1, paper=8.3) == DIRECTION_ONLY
    assert verdict(c, +1) == REPRODUCED  # without the paper's number only the direction can be judged
    # the boundary: a third of the paper's number
    big = paired_comparison(_agent([3.0] * 10), REF)
    assert verdict(big, +1, paper=3.0 / MAGNITUDE_FRACTION - 0.01) == REPRODUCED
    assert verdict(big, +1, paper=3.0 / MAGNITUDE_FRACTION + 0.01) == DIRECTION_ONLY
    # the effect is the ratio of totals (the paper's "+x %" is one), not the mean in % of a bound
    bound = {i: 1000.0 for i in range(10)}
    cb = paired_comparison(_agent([5.0] * 10), REF, scale=bound, basis="bound")
    assert cb.mean == pytest.approx(0.5) and cb.ratio == pytest.approx(5.0)
    assert verdict(cb, +1, paper=9.0) == REPRODUCED  # 5 % >= 9 % / 3, although 0.5 % of the bound is not
    # a claim that the agent loses: the magnitude is weighed on the predicted side
    down = paired_comparison(_agent([-0.1] * 10), REF)
    assert verdict(down, -1, paper=-10.0) == DIRECTION_ONLY and verdict(down, -1, paper=-0.2) == REPRODUCED


def test_claims_table_passes_the_paper_effect_and_states_the_rule():
    c = paired_comparison(_agent([0.1] * 9 + [0.12]), REF)
    md = claims_table([{"claim": "OPM > OPM-noest", "paper": "+8.3%", "comparison": c, "predicted": +1,
                        "paper_effect": 8.3}])
    assert "**direction only**" in md and "a third of the paper's number" in md
    assert set(VERDICTS) >= {REPRODUCED, DIRECTION_ONLY, NOT_REPRODUCED, INCONCLUSIVE}


def test_a_bounded_share_near_one_gets_an_interval_inside_zero_one():
    shares = [1.0, 0.999, 0.95, 1.0, 0.998, 0.97, 1.0, 0.99, 0.93, 1.0]
    t = mean_ci(shares)
    assert t.high > 1.0  # the t-interval crosses the bound
    b = mean_ci(shares, bounds=(0.0, 1.0))
    assert b.mean == pytest.approx(np.mean(shares))
    assert 0.0 <= b.low < b.mean < b.high <= 1.0
    assert b.low >= min(shares) and b.high <= max(shares)
    # seeded: the same values give the same interval; another seed may move it a little
    assert mean_ci(shares, bounds=(0.0, 1.0)) == b
    # near 0 too (a share in %)
    low = mean_ci([0.0, 0.0, 0.1, 0.0, 3.0, 0.0, 0.2, 0.0, 0.0, 0.5], bounds=(0.0, 100.0))
    assert low.low >= 0.0 and mean_ci([0.0, 0.0, 0.1, 0.0, 3.0, 0.0, 0.2, 0.0, 0.0, 0.5]).low < 0.0
    # all equal: the interval is the value; a value outside the bounds is an error naming them
    assert mean_ci([1.0] * 5, bounds=(0.0, 1.0)) == mean_ci([1.0] * 5, bounds=(0.0, 1.0))
    assert (mean_ci([1.0] * 5, bounds=(0.0, 1.0)).low, mean_ci([1.0] * 5, bounds=(0.0, 1.0)).high) == (1.0, 1.0)
    with pytest.raises(ValueError, match="bounds"):
        mean_ci([0.5, 1.2], bounds=(0.0, 1.0))
    # past a bound by rounding only (a ratio of two solver results): on the bound
    r = mean_ci([1.0000000021918731, 0.9, 0.95], bounds=(0.0, 1.0))
    assert r.high <= 1.0 and r.mean == pytest.approx(0.95)


def test_bounded_interval_clips_a_rounding_past_the_bound_and_rejects_more():
    vals = [0.9, 0.95, 0.97, 0.99, 0.93]
    on = mean_ci(vals + [1.0], bounds=(0.0, 1.0))
    # 1e-9 past the upper bound: exactly the interval of the value on the bound
    assert mean_ci(vals + [1.0 + 1e-9], bounds=(0.0, 1.0)) == on
    # a per-instance mean of per-slot ratios to the MILP optimum (solver tolerance, not an error)
    assert mean_ci(vals + [1.0000012809383727], bounds=(0.0, 1.0)) == on
    # the lower bound and a share in % (tolerance scaled to the bounds' magnitude: 1e-5 · 100)
    assert mean_ci([-1e-9, 0.1, 0.2], bounds=(0.0, 1.0)) == mean_ci([0.0, 0.1, 0.2], bounds=(0.0, 1.0))
    assert mean_ci([100.0005, 90.0, 95.0], bounds=(0.0, 100.0)) == mean_ci([100.0, 90.0, 95.0], bounds=(0.0, 100.0))
    # clearly past: the error names the bounds and the value
    for bad, b in ((1.01, (0.0, 1.0)), (-0.01, (0.0, 1.0)), (1.0001, (0.0, 1.0)), (100.01, (0.0, 100.0))):
        with pytest.raises(ValueError, match=rf"bounds=\({b[0]:g}, {b[1]:g}\) does not hold: a value is {bad!r}"):
            mean_ci(vals + [bad], bounds=b)


def test_proportion_interval_is_wilson_and_inside_zero_one():
    p = proportion_ci(10, 10)
    assert p.mean == 1.0 and p.high == 1.0 and p.low == pytest.approx(0.7225, abs=1e-4)  # Wilson, z = 1.96
    q = proportion_ci(0, 10)
    assert q.low == 0.0 and q.high == pytest.approx(0.2775, abs=1e-4)
    m = proportion_ci(3, 10)
    assert 0 < m.low < 0.3 < m.high < 1
    with pytest.raises(ValueError, match="k="):
        proportion_ci(11, 10)


def test_range_verdict_for_a_bounded_ratio():
    inside = mean_ci([0.7, 0.72, 0.68, 0.71, 0.69, 0.7], bounds=(0.0, 1.0))
    assert range_verdict(inside, 0.6, 0.8) == REPRODUCED
    above = mean_ci([1.0, 1.0, 0.99, 1.0, 0.98, 1.0], bounds=(0.0, 1.0))
    assert above.high <= 1.0 and range_verdict(above, 0.6, 0.8).startswith(NOT_REPRODUCED)
    wide = mean_ci([0.5, 0.9, 0.6, 1.0, 0.55, 0.95], bounds=(0.0, 1.0))
    assert range_verdict(wide, 0.6, 0.8) == INCONCLUSIVE


def test_gadget_fig7_claim_uses_a_bounded_interval():
    """Fig. 7's 60–80% claim on per-instance ratios near 1: the interval stays inside [0, 1]."""
    from clustergym.experiments.gadget import _fig7_section

    r7 = {"gadget": {i: [1.0, 1.0] if i < 8 else [0.8, 0.8] for i in range(10)},  # t-interval: [0.90, 1.02]
          "fifo": {i: [0.5, 0.4, 0.45] for i in range(10)}}
    sw = {"cfg": {"fig7_horizon": 3, "fig7_instances": list(range(10)), "fig7_size": "small"}, "r7": r7}
    _, claims = _fig7_section(sw)
    row = next(c for c in claims if c["claim"].startswith("Fig. 7: `gadget`"))
    lo, hi = (float(x) for x in row["ours"].split("[")[1].split("]")[0].split(","))
    assert 0.0 <= lo <= hi <= 1.0 and row["verdict"].startswith(NOT_REPRODUCED)


def test_esdp_fig2_pattern_verdict_uses_a_share_of_instances():
    """The overtake claim: Wilson interval on the share of instances showing the pattern."""
    from types import SimpleNamespace

    from clustergym.experiments.esdp import fig2_claim

    H = 500
    esdp = np.concatenate([np.full(20, 0.2), np.full(H - 20, 1.0)])

    def res_with(n_pattern, n):
        curves = {i: {"esdp": esdp, "hauf": np.full(H, 0.8 if i < n_pattern else 0.1)} for i in range(n)}
        runs = [SimpleNamespace(agent=a, instance=i, reward=c) for i in range(n) for a, c in curves[i].items()]
        return SimpleNamespace(horizon=H, instances=list(range(n)), runs=runs)

    assert fig2_claim(res_with(10, 10))[2]["verdict"] == REPRODUCED
    assert fig2_claim(res_with(9, 10))[2]["verdict"] == REPRODUCED  # 9/10: Wilson [0.60, 0.98]
    assert fig2_claim(res_with(5, 10))[2]["verdict"] == INCONCLUSIVE
    assert fig2_claim(res_with(0, 10))[2]["verdict"] == NOT_REPRODUCED
    assert fig2_claim(res_with(2, 2))[2]["verdict"] == INCONCLUSIVE  # two instances cannot say "most"


def test_esdp_regret_threshold_is_calibrated_to_the_horizon():
    from clustergym.experiments.esdp import log_exponent, regret_exponent, regret_threshold

    for T in (300, 2000, 8000):
        t = np.arange(1, T + 1)
        b_log = regret_exponent(3.0 * np.log(t + 1.0))
        assert b_log == pytest.approx(log_exponent(T), abs=0.01)
        assert b_log < regret_threshold(T) < regret_exponent(np.sqrt(t)) == pytest.approx(0.5)
    assert regret_threshold(300) == pytest.approx(0.5 * (math.log(math.log(300) / math.log(75)) / math.log(4) + 0.5))
