"""ESDP's regret claim judged by the shape of the regret curve (esdp.md Theorem 2).

Theorem 2: "as T → ∞, RE(T) is upper bounded by O(ln T · |E|(ln x*)² / min_t Δ(x*_P4(t)))" (eq. 38). An
asymptotic O(ln T) says nothing about a growth exponent over [T/4, T] at a fixed T (the earlier rule of
:func:`clustergym.experiments.esdp.regret_exponent`): with small gaps Δ and a wide confidence radius (g(t) of eq. 11),
exploration has not ended by T = 8,000 and the exponent reflects the exploration phase. The rule here asks what
the runs can answer: which reference curve, c·ln t or c·√t, **fitted on the first half** (t ≤ T/2, least squares
through the origin), predicts the regret of the **second half** (T/2 < t ≤ T) better — per instance the mean
absolute prediction error in % of R(T), and over instances the paired difference err(√t) − err(ln t) (points):
*reproduced* when its 95% interval lies above 0 (ln t predicts better), *not reproduced* below 0, else
*inconclusive*; W/L count the instances where ln t predicts better. Linear regret is under-predicted by both
curves and less so by √t, so the rule can fail; ln-shaped regret passes.

Rows for faithful ESDP, ``only_active`` and ``only_active`` with g(t) = ln(t+1) (:data:`G_LOG`, Fig. 8's third
sequence, "the third setting has an overwhelming advantage", esdp.md §4.2).
"""

from __future__ import annotations

import math

import numpy as np

from clustergym.core import stats
from clustergym.experiments.esdp_sweep import G_LOG

__all__ = ["fit_errors", "shape_rows", "shape_lines", "before_after_lines", "VARIANTS"]

VARIANTS = (("esdp", "faithful ESDP"), ("esdp[only_active=true]", "ESDP only_active"),
            (G_LOG, "ESDP only_active, g(t) = ln(t+1) (Fig. 8)"))
CURVES = {"ln": np.log, "sqrt": np.sqrt}


def fit_errors(cum_regret) -> dict:
    """Per reference curve f (``"ln"``: ln t, ``"sqrt"``: √t): c fitted on t ≤ T/2 (least squares through the origin,
    t = 1..T) and the mean absolute error of c·f(t) on T/2 < t ≤ T in % of R(T); NaN errors when R(T) <= 0."""
    R = np.asarray(cum_regret, dtype=float)
    T = R.shape[0]
    if T < 4:
        raise ValueError(f"cum_regret has {T} slots: a fit on the first half and a check on the second need >= 4")
    t = np.arange(1, T + 1, dtype=float)
    h = T // 2
    out = {}
    for name, f in CURVES.items():
        ft = f(t)
        c = float(ft[:h] @ R[:h] / (ft[:h] @ ft[:h])) if ft[:h] @ ft[:h] > 0 else 0.0
        err = float(np.mean(np.abs(R[h:] - c * ft[h:]))) / R[-1] * 100 if R[-1] > 0 else math.nan
        out[name] = {"c": c, "err": err}
    return out


def _per_instance(res, agent: str) -> dict:
    return {r.instance: fit_errors(r.cum_regret) for r in res.runs if r.agent == agent}


def _comparison(fits: dict) -> stats.Comparison:
    return stats.paired_comparison({i: f["sqrt"]["err"] for i, f in fits.items()},
                                   {i: f["ln"]["err"] for i, f in fits.items()}, agent="err(√t)",
                                   reference="err(ln t)", relative=False)


def shape_rows(res) -> list[dict]:
    """Claims rows: per ESDP variant present in ``res``, "regret follows c·ln t rather than c·√t" (module docstring)."""
    rows = []
    for a, lab in VARIANTS:
        if a not in res.agents:
            continue
        rows.append({"claim": f"regret of {lab} follows c·ln t rather than c·√t (each fitted on t ≤ T/2, judged on "
                              f"T/2 < t ≤ T = {res.horizon}; err(√t) − err(ln t), points of R(T))",
                     "paper": "O(ln T) (Theorem 2)", "comparison": _comparison(_per_instance(res, a)),
                     "predicted": +1, "unit": " pts"})
    return rows


def shape_lines(res) -> list[str]:
    """Per variant: R(T), c of each fit, each curve's prediction error on the second half (mean [95% interval]) and
    the instances where ln t predicts better."""
    lines = ["| ESDP variant | R(T) | c·ln t: c | c·√t: c | error of c·ln t on t > T/2, % of R(T) | error of c·√t | "
             "ln t better on |", "|---|---|---|---|---|---|---|"]
    for a, lab in VARIANTS:
        if a not in res.agents:
            continue
        fits = _per_instance(res, a)
        R = stats.mean_ci([float(r.cum_regret[-1]) for r in res.runs if r.agent == a])

        def ci(key, field, digits=1):
            return stats.fmt_ci(stats.mean_ci([f[key][field] for f in fits.values()]), "", digits, False)

        k = _comparison(fits)
        lines.append(f"| {lab} (`{a}`) | {stats.fmt_ci(R, '', 0, False)} | {ci('ln', 'c')} | {ci('sqrt', 'c')} | "
                     f"{ci('ln', 'err')} | {ci('sqrt', 'err')} | {k.wins} of {len(fits)} |")
    return lines


def before_after_lines(res, exponent_verdict) -> list[str]:
    """The verdict of the growth-exponent rule (``exponent_verdict(agent) -> (text, verdict)``) beside the
    fitted-curve rule's, per variant, on the same runs."""
    lines = ["| ESDP variant | earlier rule: growth exponent b over [T/4, T] | verdict | curve fits (ln t vs √t) "
             "| verdict |", "|---|---|---|---|---|"]
    for a, lab in VARIANTS:
        if a not in res.agents:
            continue
        k = _comparison(_per_instance(res, a))
        text, v = exponent_verdict(a)
        lines.append(f"| {lab} | {text} | **{v}** | err(√t) − err(ln t) {stats.fmt_ci(k, ' pts')}, ln t better "
                     f"on {k.wins}/{k.n} | **{stats.verdict(k, +1)}** |")
    return lines
