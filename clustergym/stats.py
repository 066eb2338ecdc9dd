"""Statistics for honest comparisons over random instances (SPEC §3.4, §12).

A comparison between two agents is made **over instances** (scenario seeds: graph, demands, hidden
means, topology, job list), not over the dynamics seeds of one instance: a result that holds on one
instance may flip on the next. Every helper here takes one value per instance (already averaged
over that instance's dynamics seeds) and returns

- the mean over instances with a 95% **t-interval** (Student's t with n−1 degrees of freedom:
  mean ± t_{0.975, n−1} · s / √n, s the sample standard deviation over instances);
- **wins / losses / ties** over instances;
- a **verdict** for a claim that predicts a direction: *reproduced*, *not reproduced* or
  *depends on the instance*.

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
  (issue 26: +271 % [−148, +691] against per-instance gains +298 / +92 / +424 %).

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
    "NOT_REPRODUCED",
    "DEPENDS",
    "TOO_FEW",
    "Interval",
    "Comparison",
    "t_quantile",
    "mean_ci",
    "paired_comparison",
    "ratio_of_totals",
    "verdict",
    "fmt_ci",
    "claims_table",
]

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
DEPENDS = "depends on the instance"
TOO_FEW = "too few instances"

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


def mean_ci(values: Sequence[float], level: float = 0.95) -> Interval:
    """Mean and ``level`` t-interval of ``values`` (one value per instance)."""
    v = np.asarray(list(values), dtype=float)
    n = int(v.size)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    m = float(v.mean())
    if n < 2:
        return Interval(m, math.nan, math.nan, n)
    half = t_quantile(n - 1, level) * float(v.std(ddof=1)) / math.sqrt(n)
    return Interval(m, m - half, m + half, n)


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

    def verdict(self, predicted: int = +1, tol: float = 0.0) -> str:
        return verdict(self, predicted=predicted, tol=tol)


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


def verdict(comp: Comparison, predicted: int = +1, tol: float = 0.0) -> str:
    """The verdict on a claim about ``comp`` (agent vs reference over instances).

    ``predicted=+1``: the claim says the agent beats the reference; ``-1``: it loses to it.

    - *reproduced*: the whole 95% interval is on the predicted side of 0 **and** no instance goes
      the other way;
    - *not reproduced*: the whole interval is on the other side **and** no instance goes the
      predicted way;
    - *depends on the instance*: otherwise (the interval straddles 0, or the ordering flips
      between instances).

    ``predicted=0`` is a claim of a tie ("Fair ≈ Deadline-aware") within ``tol`` (same unit as
    the comparison, percent when relative): reproduced when the interval lies inside
    [−tol, tol], not reproduced when it lies wholly outside, else depends on the instance.
    Fewer than two instances give *too few instances* (no interval).
    """
    if comp.n < 2 or math.isnan(comp.low):
        return TOO_FEW
    if predicted == 0:
        if -tol <= comp.low and comp.high <= tol:
            return REPRODUCED
        if comp.low > tol or comp.high < -tol:
            return NOT_REPRODUCED
        return DEPENDS
    if predicted not in (1, -1):
        raise ValueError(f"predicted={predicted!r} is invalid: expected +1, -1 or 0")
    lo, hi = (comp.low, comp.high) if predicted > 0 else (-comp.high, -comp.low)
    good, bad = (comp.wins, comp.losses) if predicted > 0 else (comp.losses, comp.wins)
    if lo > 0 and bad == 0:
        return REPRODUCED
    if hi < 0 and good == 0:
        return NOT_REPRODUCED
    return DEPENDS


def fmt_ci(x, unit: str = "%", digits: int = 1, signed: bool = True) -> str:
    """``+12.3% [+5.1, +19.4]`` for a :class:`Comparison` or :class:`Interval` (``n/a`` bounds when n < 2)."""
    s = "+" if signed else ""
    mean = f"{x.mean:{s}.{digits}f}{unit}"
    if math.isnan(x.low):
        return f"{mean} [n/a]"
    return f"{mean} [{x.low:{s}.{digits}f}, {x.high:{s}.{digits}f}]"


def claims_table(rows: Sequence[Mapping]) -> str:
    """A markdown table of paper claims: each row a mapping with ``claim``, ``paper`` and either a
    ``comparison`` (:class:`Comparison`, with ``predicted`` / ``tol``) or ready ``ours`` and
    ``verdict`` strings. Columns: claim | paper | ours: mean [95% interval] over instances (the
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
            v = r.get("verdict") or verdict(comp, r.get("predicted", +1), r.get("tol", 0.0))
        else:
            ours, rt, wl, v = r.get("ours", ""), r.get("ratio", "–"), r.get("wins", "–"), r.get("verdict", "")
        lines.append(f"| {r['claim']} | {r['paper']} | {ours} | {rt} | {wl} | **{v}** |")
    if bases:
        lines += ["", "Statistic (clustergym.stats): per instance 100·(agent − reference)/S, mean and 95% t-interval "
                  "over instances; S = " + "; ".join(f"^{i + 1} {b}" for i, b in enumerate(bases)) + "."]
    return "\n".join(lines)
