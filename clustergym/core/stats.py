"""Statistics for honest comparisons over random instances.

A comparison between two agents is made **over instances** (scenario seeds: graph, demands, hidden
means, topology, job list), not over the dynamics seeds of one instance: a result that holds on one
instance may flip on the next. Every helper here takes one value per instance (already averaged
over that instance's dynamics seeds) and returns

- the mean over instances with a 95% **t-interval** (Student's t with n−1 degrees of freedom:
  mean ± t_{0.975, n−1} · s / √n, s the sample standard deviation over instances);
- **wins / losses / ties** over instances;
- a **verdict** for a claim that predicts a direction (:func:`verdict`, docs/evaluation.md "Verdicts"):
  *reproduced*, *direction only*, *not reproduced* or *inconclusive*;
- for **bounded quantities** (shares, scores, ratios in [0, 1]) a seeded bootstrap interval that stays
  inside the range of the data, hence inside the bounds (:func:`mean_ci` with ``bounds=``), and for
  counts of instances a Wilson interval (:func:`proportion_ci`).

**The claims statistic** (:func:`paired_comparison`, docs/evaluation.md "The claims statistic"). On
instance i the two agents' values R_A(i), R_B(i) are compared by the paired difference divided by a
positive quantity S(i) that is **common to both** (and, where one exists, to every agent):

    d(i) = 100 · (R_A(i) − R_B(i)) / S(i)   (percent of S(i)),

- S(i) = the instance's oracle / bound total where the problem has one (``scale=``: P1 the oracle's
  total, P2 the hindsight optimum Q(y*), P4 the fluid bound, P3 the per-slot MILP total); the
  experiment names it (``basis=``);
- without ``scale``: S(i) = R_B(i) — the classic relative % — **only when every total of both agents
  is positive**; otherwise S(i) = (|R_A(i)| + |R_B(i)|) / 2, which is positive and common to the pair
  and keeps |d(i)| <= 200 %, where dividing by a near-zero or negative reference total would blow up
  (measured on P4: +271 % [−148, +691] against per-instance gains +298 / +92 / +424 %).

d is averaged over instances with a t-interval, so every instance counts the same whatever its
scale. Beside it, the **ratio of totals** 100 · (Σ_i R_A(i) / Σ_i R_B(i) − 1) is the number to set
beside a paper's "+x %" (a paper reports one ratio of totals); it is given only when both sums are
positive (else NaN, printed "n/a").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

__all__ = [
    "REPRODUCED",
    "DIRECTION_ONLY",
    "NOT_REPRODUCED",
    "INCONCLUSIVE",
    "TOO_FEW",
    "VERDICTS",
    "MAGNITUDE_FRACTION",
    "Interval",
    "Comparison",
    "t_quantile",
    "mean_ci",
    "ratio_ci",
    "proportion_ci",
    "range_verdict",
    "paired_comparison",
    "ratio_of_totals",
    "verdict",
    "fmt_ci",
    "claims_table",
    "claims_rows_json",
]

REPRODUCED = "reproduced"
DIRECTION_ONLY = "direction only"
NOT_REPRODUCED = "not reproduced"
INCONCLUSIVE = "inconclusive"
TOO_FEW = "too few instances"
VERDICTS = (REPRODUCED, DIRECTION_ONLY, NOT_REPRODUCED, INCONCLUSIVE, TOO_FEW)
# "direction only": on the paper's side, but the effect is below this fraction of the paper's number.
MAGNITUDE_FRACTION = 1 / 3
BOOTSTRAP_RESAMPLES = 9999

# A bounded value past its bound by at most this fraction of the bounds' magnitude (the largest finite
# |bound|, at least 1) is rounding and is clipped to the bound; a value further past is an error. 1e-5:
# far above float rounding (1e-16), above what the solver behind a ratio to an optimum leaves (a
# per-slot ratio to the MILP of problem (10), whose objective HiGHS resolves to ~1e-9 of the largest
# increment, was 1 + 1.3e-6 on a slot whose optimum is 1e-7 of that increment), and below the last
# digit the reports print (3 decimals of a ratio, 1 of a share in %).
_BOUND_RTOL = 1e-5
# Relative ties: two per-instance values closer than this (relative) count as a tie.
_TIE_RTOL = 1e-9


def t_quantile(df: int, level: float = 0.95) -> float:
    """Two-sided Student-t quantile t_{(1+level)/2, df} (scipy)."""
    from scipy.stats import t

    return float(t.ppf(0.5 + level / 2, df))


@dataclass(frozen=True)
class Interval:
    """Mean of ``n`` values with a two-sided t-interval; ``low``/``high`` are NaN when n < 2."""

    mean: float
    low: float
    high: float
    n: int

    def contains(self, x: float) -> bool:
        return self.low <= x <= self.high


def mean_ci(values: Sequence[float], level: float = 0.95, bounds: tuple[float, float] | None = None,
            seed: int = 0) -> Interval:
    """Mean and ``level`` interval of ``values`` (one value per instance).

    Without ``bounds``: the Student-t interval. With ``bounds=(lo, hi)`` (a bounded quantity: a share,
    a score, a ratio in [0, 1]): a seeded BCa bootstrap interval of the mean (``scipy.stats.bootstrap``,
    :data:`BOOTSTRAP_RESAMPLES` resamples drawn by ``np.random.default_rng(seed)``, so the same values
    give the same interval). A bootstrap interval lies inside the range of the values, hence inside
    the bounds, where a t-interval of values near a bound crosses it. A value past a bound by rounding
    only (at most 1e-5 of the bounds' magnitude, :func:`_bound_tolerance`) is clipped to the bound
    first, so the result is that of the value on the bound; a value further outside ``bounds`` is a
    ValueError. All values equal: the interval is that value.
    """
    v = np.asarray(list(values), dtype=float)
    n = int(v.size)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    m = float(v.mean())
    if n < 2:
        return Interval(m, math.nan, math.nan, n)
    if bounds is None:
        half = t_quantile(n - 1, level) * float(v.std(ddof=1)) / math.sqrt(n)
        return Interval(m, m - half, m + half, n)
    lo, hi = float(bounds[0]), float(bounds[1])
    if np.isnan(v).any():  # as the t-interval: an undefined value leaves the interval undefined
        return Interval(m, math.nan, math.nan, n)
    # values past a bound by rounding only (a ratio of two solver results: 1.0000000022) sit on it
    tol = _bound_tolerance(lo, hi)
    if not np.all((v >= lo - tol) & (v <= hi + tol)):
        bad = v[(v < lo - tol) | (v > hi + tol)][0]
        raise ValueError(f"bounds=({lo:g}, {hi:g}) does not hold: a value is {float(bad)!r}")
    v = np.clip(v, lo, hi)
    m = float(v.mean())
    if float(v.max() - v.min()) <= 1e-12 * max(abs(m), 1.0):
        return Interval(m, m, m, n)
    return Interval(m, *_bootstrap(v, level, seed), n)


def ratio_ci(num: Sequence[float], den: Sequence[float], level: float = 0.95) -> Interval:
    """The ratio of means r = mean(num) / mean(den) of paired per-instance values, with the delta-method
    t-interval: r ± t_{n−1} · s_u / (√n · |mean(den)|), where u(i) = num(i) − r · den(i) and s_u is its sample
    standard deviation. Unlike the mean of per-instance ratios, one instance with a near-zero ``den`` cannot
    dominate it. NaN when mean(den) is 0; no interval when n < 2."""
    a, b = np.asarray(list(num), dtype=float), np.asarray(list(den), dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"num and den differ in length ({a.size} and {b.size}): expected one pair per instance")
    n = int(a.size)
    if n == 0 or float(b.mean()) == 0.0:
        return Interval(math.nan, math.nan, math.nan, n)
    r = float(a.mean() / b.mean())
    if n < 2:
        return Interval(r, math.nan, math.nan, n)
    half = t_quantile(n - 1, level) * float((a - r * b).std(ddof=1)) / (math.sqrt(n) * abs(float(b.mean())))
    return Interval(r, r - half, r + half, n)


def _bound_tolerance(lo: float, hi: float) -> float:
    """How far past ``bounds=(lo, hi)`` a value may be and still count as on the bound (rounding):
    :data:`_BOUND_RTOL` times the largest finite |bound| (at least 1), e.g. 1e-5 for (0, 1) and 1e-3
    for a share in % (0, 100)."""
    return _BOUND_RTOL * max([1.0] + [abs(b) for b in (lo, hi) if math.isfinite(b)])


def _bootstrap(v: np.ndarray, level: float, seed: int) -> tuple[float, float]:
    """BCa bootstrap interval of the mean of ``v`` (percentile where BCa is undefined); inside [min, max]."""
    import warnings

    from scipy.stats import bootstrap

    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = bootstrap((v,), np.mean, confidence_level=level, n_resamples=BOOTSTRAP_RESAMPLES, method=method,
                          vectorized=True, random_state=np.random.default_rng(seed))
        low, high = float(r.confidence_interval.low), float(r.confidence_interval.high)
        if math.isfinite(low) and math.isfinite(high):
            # the resampled means lie in [min, max]; guard the last ulp of the quantile interpolation
            return max(low, float(v.min())), min(high, float(v.max()))
    return float(v.min()), float(v.max())


def proportion_ci(k: int, n: int, level: float = 0.95) -> Interval:
    """Share ``k / n`` of instances with a property, with its Wilson score interval (inside [0, 1], and
    not degenerate at 0/n or n/n, where a bootstrap or t-interval collapses to a point)."""
    from scipy.stats import norm

    if n <= 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    if not 0 <= k <= n:
        raise ValueError(f"k={k!r} is invalid: expected 0 <= k <= n = {n}")
    z = float(norm.ppf(0.5 + level / 2))
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    # exact ends at 0/n and n/n (the formula gives them up to rounding)
    return Interval(p, 0.0 if k == 0 else max(0.0, centre - half), 1.0 if k == n else min(1.0, centre + half), n)


@dataclass(frozen=True)
class Comparison:
    """Agent vs reference over instances: relative improvement (%) with interval and win counts."""

    agent: str
    reference: str
    n: int
    mean: float  # mean over instances of 100·(R_agent − R_ref)/|R_ref|
    low: float
    high: float
    wins: int  # instances where the agent is strictly better than the reference
    losses: int
    ties: int
    per_instance: dict = field(default_factory=dict)  # instance -> d(i) (% of S(i); or a − r if not relative)
    basis: str = ""  # what S(i) is (module docstring); "" for absolute differences
    ratio: float = math.nan  # 100·(Σ R_agent / Σ R_ref − 1), NaN unless both sums are positive

    def to_json(self) -> dict:
        d = {k: getattr(self, k) for k in ("agent", "reference", "n", "mean", "low", "high", "wins", "losses",
                                          "ties", "basis", "ratio")}
        d["interval"] = "95% t-interval over instances"
        d["per_instance"] = {str(k): v for k, v in self.per_instance.items()}
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()}

    def verdict(self, predicted: int = +1, tol: float = 0.0, paper: float | None = None) -> str:
        return verdict(self, predicted=predicted, tol=tol, paper=paper)


BASIS_REF = "reference total (every total positive)"
BASIS_PAIR = "mean |total| of the pair (a total <= 0)"


def ratio_of_totals(values: Mapping, ref_values: Mapping) -> float:
    """100 · (Σ values / Σ ref_values − 1) over the instances both have; NaN unless both sums are > 0."""
    keys = [k for k in values if k in ref_values]
    a, r = sum(float(values[k]) for k in keys), sum(float(ref_values[k]) for k in keys)
    return 100.0 * (a / r - 1.0) if keys and a > 0 and r > 0 else math.nan


def paired_comparison(values: Mapping, ref_values: Mapping, *, agent: str = "", reference: str = "",
                      relative: bool = True, level: float = 0.95, scale=None, basis: str | None = None) -> Comparison:
    """Compare per-instance values of an agent with a reference on the instances both have (the
    claims statistic, module docstring).

    ``values`` and ``ref_values`` map instance -> value (higher is better). With ``relative`` the
    per-instance difference is ``100·(a − r)/S`` (percent), else ``a − r``. ``scale`` is S: a mapping
    instance -> positive value common to both agents (the bound or oracle total), or one positive
    number; ``basis`` names it (e.g. ``"hindsight optimum Q(y*)"``). Without ``scale``, S = r when every
    a and r is positive, else S = (|a| + |r|)/2 (``basis`` says which). A negative or non-finite
    ``scale``, or S = 0 where a ≠ r, is a ValueError (S = 0 with a = r counts as a tie, d = 0).
    """
    keys = [k for k in values if k in ref_values]
    if relative and scale is not None:
        sc = {k: float(scale[k] if isinstance(scale, Mapping) else scale) for k in keys}
        # S = 0 is accepted only where both values are equal (e.g. an empty job list: bound and utilities 0)
        bad = [k for k, v in sc.items() if not (math.isfinite(v) and (v > 0 or (v == 0 and float(values[k]) ==
                                                                                  float(ref_values[k]))))]
        if bad:
            raise ValueError(f"scale must be positive and finite on every instance (the common quantity S of the "
                             f"claims statistic); instance {bad[0]!r} has {sc[bad[0]]!r}")
        basis = basis or "given scale"
    elif relative:
        positive = all(float(values[k]) > 0 and float(ref_values[k]) > 0 for k in keys)
        sc = {k: (float(ref_values[k]) if positive else 0.5 * (abs(float(values[k])) + abs(float(ref_values[k]))))
              for k in keys}
        basis = BASIS_REF if positive else BASIS_PAIR
    else:
        sc, basis = {}, ""
    diffs, wins, losses, ties = {}, 0, 0, 0
    for k in keys:
        a, r = float(values[k]), float(ref_values[k])
        d = a - r
        tie_scale = max(abs(a), abs(r), 1e-300)
        if abs(d) <= _TIE_RTOL * tie_scale:
            ties += 1
            d = 0.0
        elif d > 0:
            wins += 1
        else:
            losses += 1
        if relative:
            d = 100.0 * d / sc[k] if sc[k] > 0 else 0.0  # S = 0 only when a = r = 0 (a tie)
        diffs[k] = d
    ci = mean_ci(list(diffs.values()), level)
    return Comparison(agent=agent, reference=reference, n=ci.n, mean=ci.mean, low=ci.low, high=ci.high,
                      wins=wins, losses=losses, ties=ties, per_instance=diffs, basis=basis,
                      ratio=ratio_of_totals(values, ref_values) if relative else math.nan)


def verdict(comp: Comparison, predicted: int = +1, tol: float = 0.0, paper: float | None = None) -> str:
    """The verdict on a claim about ``comp`` (agent vs reference over instances; docs/evaluation.md
    "Verdicts on paper claims").

    ``predicted=+1``: the claim says the agent beats the reference; ``-1``: it loses to it.
    ``paper``: the paper's effect size where it gives one (its "+x %", a ratio of totals; or a
    difference in the comparison's unit when the comparison is not relative).

    - *reproduced*: the whole 95% interval is on the predicted side of 0 (and, with ``paper``, the
      effect is at least :data:`MAGNITUDE_FRACTION` of the paper's);
    - *direction only*: the interval is on the predicted side, but the effect is below
      :data:`MAGNITUDE_FRACTION` (a third) of the paper's number. The effect is the ratio of totals
      where the comparison has one (the number a paper's "+x %" is), else the mean;
    - *not reproduced*: the whole interval is on the other side of 0;
    - *inconclusive*: otherwise (the interval contains 0).

    Wins and losses over instances are printed beside the verdict and do not enter it: a 9/1 split
    with the interval above 0 is *reproduced*; a 5/0 split whose interval touches 0 is *inconclusive*.

    ``predicted=0`` is a claim of a tie ("Fair ≈ Deadline-aware") within ``tol`` (same unit as
    the comparison, percent when relative): reproduced when the interval lies inside
    [−tol, tol], not reproduced when it lies wholly outside, else inconclusive.
    Fewer than two instances give *too few instances* (no interval).
    """
    if comp.n < 2 or math.isnan(comp.low):
        return TOO_FEW
    if predicted == 0:
        if -tol <= comp.low and comp.high <= tol:
            return REPRODUCED
        if comp.low > tol or comp.high < -tol:
            return NOT_REPRODUCED
        return INCONCLUSIVE
    if predicted not in (1, -1):
        raise ValueError(f"predicted={predicted!r} is invalid: expected +1, -1 or 0")
    lo, hi = (comp.low, comp.high) if predicted > 0 else (-comp.high, -comp.low)
    if lo > 0:
        if paper is not None:
            effect = comp.ratio if math.isfinite(comp.ratio) else comp.mean
            if predicted * effect < MAGNITUDE_FRACTION * abs(float(paper)):
                return DIRECTION_ONLY
        return REPRODUCED
    if hi < 0:
        return NOT_REPRODUCED
    return INCONCLUSIVE


def range_verdict(ci: Interval, low: float, high: float) -> str:
    """Verdict on a claim that a quantity lies in [``low``, ``high``] (e.g. "60–80% of the optimum"):
    reproduced when the interval lies inside the range, not reproduced when it lies wholly outside
    it (the reason is appended: higher / lower), else inconclusive."""
    if ci.n < 2 or math.isnan(ci.low):
        return TOO_FEW
    if low <= ci.low and ci.high <= high:
        return REPRODUCED
    if ci.low > high:
        return f"{NOT_REPRODUCED} (higher)"
    if ci.high < low:
        return f"{NOT_REPRODUCED} (lower)"
    return INCONCLUSIVE


def fmt_ci(x, unit: str = "%", digits: int = 1, signed: bool = True) -> str:
    """``+12.3% [+5.1, +19.4]`` for a :class:`Comparison` or :class:`Interval` (``n/a`` bounds when n < 2)."""
    s = "+" if signed else ""
    mean = f"{x.mean:{s}.{digits}f}{unit}"
    if math.isnan(x.low):
        return f"{mean} [n/a]"
    return f"{mean} [{x.low:{s}.{digits}f}, {x.high:{s}.{digits}f}]"


def claims_table(rows: Sequence[Mapping]) -> str:
    """A markdown table of paper claims: each row a mapping with ``claim``, ``paper`` and either a
    ``comparison`` (:class:`Comparison`, with ``predicted`` / ``tol`` and, where the paper gives an
    effect size, ``paper_effect``: the number :func:`verdict` weighs the effect against) or ready
    ``ours`` and ``verdict`` strings. Columns: claim | paper | ours: mean [95% interval] over instances (the
    claims statistic, % of S) | ratio of totals (the number to set beside the paper's %) | wins /
    losses | verdict. What S is for each row is listed under the table.
    """
    lines = ["| claim | paper | ours: mean [95% interval] over instances | ratio of totals | wins / losses (ties) "
             "| verdict |", "|---|---|---|---|---|---|"]
    bases: list[str] = []
    for r in rows:
        comp = r.get("comparison")
        if comp is not None:
            ours = r.get("ours") or f"{fmt_ci(comp, r.get('unit', '%'))} (n={comp.n})"
            if comp.basis:
                if comp.basis not in bases:
                    bases.append(comp.basis)
                ours += f" ^{bases.index(comp.basis) + 1}"
            rt = r.get("ratio") or (f"{comp.ratio:+.1f}%" if not math.isnan(comp.ratio) else
                                    ("n/a (a sum <= 0)" if comp.basis else "–"))
            wl = f"{comp.wins} / {comp.losses}" + (f" ({comp.ties})" if comp.ties else "")
            v = r.get("verdict") or verdict(comp, r.get("predicted", +1), r.get("tol", 0.0), r.get("paper_effect"))
        else:
            ours, rt, wl, v = r.get("ours", ""), r.get("ratio", "–"), r.get("wins", "–"), r.get("verdict", "")
        lines.append(f"| {r['claim']} | {r['paper']} | {ours} | {rt} | {wl} | **{v}** |")
    if bases:
        lines += ["", "Statistic (clustergym.core.stats): per instance 100·(agent − reference)/S, mean and 95% t-interval "
                  "over instances; S = " + "; ".join(f"^{i + 1} {b}" for i, b in enumerate(bases)) + "."]
    lines += ["", VERDICT_RULE]
    return "\n".join(lines)


def claims_rows_json(rows: Sequence[Mapping]) -> list[dict]:
    """Claims rows as JSON: claim, paper, verdict (as :func:`claims_table` prints it) and the comparison."""
    out = []
    for r in rows:
        comp = r.get("comparison")
        v = r.get("verdict") or (verdict(comp, r.get("predicted", +1), r.get("tol", 0.0), r.get("paper_effect"))
                                 if comp is not None else "")
        d = {"claim": r["claim"], "paper": r["paper"], "verdict": v}
        if r.get("paper_effect") is not None:
            d["paper_effect"] = r["paper_effect"]
        if comp is not None:
            d["comparison"] = comp.to_json()
        else:
            d["ours"] = r.get("ours", "")
        out.append(d)
    return out


VERDICT_RULE = ("Verdicts (docs/evaluation.md): *reproduced* = the 95% interval lies on the paper's side of 0; "
                "*direction only* = on the paper's side, but the effect (ratio of totals, else the mean) is below a "
                "third of the paper's number; *not reproduced* = the interval lies on the other side; *inconclusive* "
                "= the interval contains 0. Wins / losses are shown, not used.")
