"""The claims statistic (clustergym.core.stats, docs/evaluation.md "The claims statistic")."""

import math

import pytest

from clustergym.core.stats import (BASIS_PAIR, BASIS_REF, INCONCLUSIVE, claims_table, paired_comparison, ratio_ci,
                                   ratio_of_totals,
                              t_quantile, verdict)

# A baseline whose totals are near zero or negative on some instances (P2's reciprocal/log utilities
# in the default units gave every baseline a negative total).
AGENT = {0: 5.0, 1: -2.0, 2: 0.1, 3: 40.0}
BASE = {0: 1.0, 1: -10.0, 2: 1e-9, 3: 30.0}
BOUND = {0: 100.0, 1: 50.0, 2: 20.0, 3: 200.0}  # the common positive quantity S (a bound/oracle total)


def test_statistic_with_a_common_bound_matches_a_hand_computation():
    c = paired_comparison(AGENT, BASE, agent="a", reference="b", scale=BOUND, basis="bound")
    d = [100 * 4 / 100, 100 * 8 / 50, 100 * (0.1 - 1e-9) / 20, 100 * 10 / 200]  # 4, 16, 0.5, 5
    m = sum(d) / 4
    s = math.sqrt(sum((x - m) ** 2 for x in d) / 3)
    half = t_quantile(3) * s / 2
    assert c.per_instance == pytest.approx(dict(enumerate(d)))
    assert (c.mean, c.low, c.high) == pytest.approx((m, m - half, m + half))
    assert (c.n, c.wins, c.losses, c.ties, c.basis) == (4, 4, 0, 0, "bound")
    assert all(math.isfinite(x) for x in (c.mean, c.low, c.high))
    # 4/0 wins but the interval reaches below 0: the verdict needs the interval, not only the signs
    assert c.low < 0 < c.high and verdict(c, +1) == INCONCLUSIVE
    # ratio of totals: the reference's sum 21.0 is positive, the agent's 43.1: +105.2 %
    assert c.ratio == pytest.approx(100 * (43.1 - 1e-9 - 21.0) / (21.0 + 1e-9))


def test_statistic_without_a_bound_stays_finite_where_relative_percent_blows_up():
    c = paired_comparison(AGENT, BASE)
    assert c.basis == BASIS_PAIR  # a total <= 0: relative % is not used
    d = [100 * 4 / 3.0, 100 * 8 / 6.0, 100 * (0.1 - 1e-9) / ((0.1 + 1e-9) / 2), 100 * 10 / 35.0]
    assert c.per_instance == pytest.approx(dict(enumerate(d)))
    assert all(abs(x) <= 200.0 + 1e-9 for x in c.per_instance.values())
    assert math.isfinite(c.low) and math.isfinite(c.high) and c.high - c.low < 400
    # the old statistic (relative to the reference's total) is 1e10 % on instance 2
    assert 100 * (AGENT[2] - BASE[2]) / abs(BASE[2]) > 1e9


def test_relative_percent_only_where_every_total_is_positive():
    c = paired_comparison({0: 110.0, 1: 120.0}, {0: 100.0, 1: 100.0})
    assert c.basis == BASIS_REF and c.per_instance == pytest.approx({0: 10.0, 1: 20.0})
    assert c.ratio == pytest.approx(15.0)
    assert math.isnan(ratio_of_totals({0: 1.0, 1: -3.0}, {0: 1.0, 1: 1.0}))  # the agent's sum is negative


def test_scale_must_be_positive():
    with pytest.raises(ValueError, match="scale must be positive"):
        paired_comparison(AGENT, BASE, scale={0: 1.0, 1: 0.0, 2: 1.0, 3: 1.0})


def test_claims_table_shows_ratio_and_basis():
    c = paired_comparison(AGENT, BASE, scale=BOUND, basis="fluid bound")
    md = claims_table([{"claim": "a > b", "paper": "+7%", "comparison": c, "predicted": +1}])
    assert "ratio of totals" in md and "+105.2%" in md and "fluid bound" in md and "**inconclusive**" in md


def test_ratio_ci_is_the_ratio_of_means_with_the_delta_method_interval():
    ci = ratio_ci([1.0, 2.0, 3.0], [2.0, 2.0, 2.0])
    # r = 2 / 2; u = num − r·den = (−1, 0, 1), s_u = 1; half = t(2) · 1 / (√3 · 2)
    assert ci.mean == pytest.approx(1.0) and ci.n == 3
    assert ci.high - ci.mean == pytest.approx(4.302652729911275 / (3 ** 0.5 * 2))
    assert ci.low == pytest.approx(2 * ci.mean - ci.high)
    # den varies: r = 2 / 2, u = (1 − 1, 3 − 2, 2 − 3) = (0, 1, −1), s_u = 1, half = t(2) · 1 / (√3 · 2)
    ci = ratio_ci([1.0, 3.0, 2.0], [1.0, 2.0, 3.0])
    assert ci.mean == pytest.approx(1.0) and ci.high - ci.mean == pytest.approx(4.302652729911275 / (3 ** 0.5 * 2))
    assert math.isnan(ratio_ci([1.0, -1.0], [1.0, -1.0]).mean)  # mean(den) = 0: no ratio
    with pytest.raises(ValueError, match="differ in length"):
        ratio_ci([1.0, 2.0], [1.0])
