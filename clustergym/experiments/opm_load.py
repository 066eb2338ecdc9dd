"""The load of the OPM reproduction: the demand of every setting (machines the active jobs' budgets pay for per
slot, ``envs/approxjobs/scenario.py`` "Load of the paper scale") beside the best baseline's share of the bound
(:func:`regime_lines`), the verdicts of the paper's claims at the earlier arrival rate 0.15 beside the calibrated
one on the same scenario seeds (:func:`before_after_lines`), and the machines × job density experiment
(:func:`ingredients`).

The deciding sentences (opm.md §VI, Fig. 2): "the lightly-loaded case where we only keep half of the jobs from the
original trace" and "OPM can find better job-to-machine matchings when the cluster resource is enough" — heavy
load asks for more machines than the cluster has, half of the jobs for at most as many.
"""

from __future__ import annotations

import gymnasium as gym

from clustergym.core import stats
from clustergym.envs.approxjobs.scenario import demand
from clustergym.experiments import instances_for
from clustergym.experiments.opm_runs import ENV, _run_all
from clustergym.experiments.opm_sweep import EARLIER, SPEED_EXT, _bounds, _views

__all__ = ["demands", "regime_lines", "price_demand_lines", "before_after_lines", "ingredients", "DEMAND_SKIP"]

DEMAND_SKIP = 300  # slots left out of the demand: the first jobs' ramp-up (life_max of the synthetic jobs)
SHARE_BOUNDS = (0.0, float("inf"))
LABEL = {"paper": "paper setup", EARLIER: "earlier reading (0.15 jobs/slot)", "default": "extension: default scale"}
BASIS = "fluid bound B on the expected utility of the job list (bound.py)"


def demands(sw: dict) -> dict:
    """``{config: {job list: demand in machines}}`` over the slots after :data:`DEMAND_SKIP` (all slots when the
    horizon is shorter than twice that), from the scenario each run's env draws."""
    out = {}
    for c, kw in sw["pl"]["configs"].items():
        skip = DEMAND_SKIP if kw["horizon"] >= 2 * DEMAND_SKIP else 0
        out[c] = {i: demand(gym.make(ENV, **kw, scenario_seed=i).unwrapped.scenario, skip=skip)
                  for i in sw["pl"]["instances"]}
    return out


def _setting(c: tuple) -> str:
    scale, group, b = c
    lab = LABEL.get(scale, scale)
    if group == "speed":
        lab = f"extension: paper scale with speed factors U[{SPEED_EXT}, 1]"
    elif group.startswith("rate="):
        lab = f"extension: paper setup at {group.split('=')[1]} jobs/slot"
    elif group == "alpha":
        lab = f"{lab}, Fig. 3's α sweep"
    elif group not in ("heavy", "light"):
        lab = f"{lab}, {group}"
    return f"{lab}, {group if group in ('heavy', 'light') else 'heavy'} load, β={b}"


def regime_lines(sw: dict, dem: dict | None = None) -> list[str]:
    """Per setting (configuration of the sweep): the measured demand in machines (mean [min, max] over job lists),
    as a multiple of M, and the best of Fair/EDF's share of B (mean [95% bootstrap interval]); the settings that
    are not the paper's are labelled extensions."""
    dem = demands(sw) if dem is None else dem
    cfg, runs = sw["pl"]["configs"], sw["runs"]
    vals, best_base, *_ = _views(sw)
    lines = ["| setting | machines M | demand, machines: mean [min, max] over job lists | demand / M | "
             "best of Fair/EDF: share of B |", "|---|---|---|---|---|"]
    for c in cfg:
        if not vals(c, "fair"):
            continue
        fair_only = not vals(c, "edf")  # Fig. 3's α sweep runs Fair as its only baseline
        d = list(dem[c].values())
        M = gym.make(ENV, **cfg[c]).unwrapped.scenario.problem.num_machines
        b, best = _bounds(runs, cfg[c]), (vals(c, "fair") if fair_only else best_base(c))
        sh = stats.mean_ci([best[i] / b[i] for i in best if b.get(i, 0) > 0], bounds=SHARE_BOUNDS)
        lines.append(f"| {_setting(c)} | {M} | {sum(d) / len(d):,.0f} [{min(d):,.0f}, {max(d):,.0f}] | "
                     f"{sum(d) / len(d) / M:.2f} | {stats.fmt_ci(sh, '', 3, False)}{' (Fair; no EDF run)' if fair_only else ''} |")
    return lines


def price_demand_lines(pw: dict) -> list[str]:
    """The load of the price ablation's settings (its sweep ``pw``: ``{"pl": {"configs", "instances"}, ...}``):
    per setting the machines the active jobs' budgets pay for per slot at that setting's prices (scenario.demand),
    mean [min, max] over its job lists and as a multiple of M; Fair's share of B is in the ablation's own table.
    The two price rules draw different job lists from the same scenario seed (the uniform prices come from the
    scenario's generator before the jobs), so the demand is measured per rule."""
    lines = ["| machines | prices | demand, machines: mean [min, max] over job lists | demand / M |",
             "|---|---|---|---|"]
    dem = demands(pw)
    for (scale, mach, price), kw in pw["pl"]["configs"].items():
        d = list(dem[(scale, mach, price)].values())
        M = gym.make(ENV, **kw).unwrapped.scenario.problem.num_machines
        lines.append(f"| extension: {scale} scale, {mach} | {'p = 2θ' if price == 'paper' else 'U[0.2, 1]'} | "
                     f"{sum(d) / len(d):,.0f} [{min(d):,.0f}, {max(d):,.0f}] | {sum(d) / len(d) / M:.2f} |")
    return lines


def before_after_lines(sw: dict, paper_vs: dict) -> list[str]:
    """The paper's Table I and Fig. 2 claims (OPM > best of Fair/EDF, OPM > Fair at β = 0.9) at the earlier rate
    0.15 (``scale="paper-0.15"``) and at the calibrated rate (``scale="paper"``) on the same scenario seeds (each seed's job list drawn at its rate): mean [95%
    interval] of 100·(OPM − baseline)/B, W/L and the verdict of each; empty without the earlier reading's runs."""
    cfg, runs = sw["pl"]["configs"], sw["runs"]
    vals, best_base, *_ = _views(sw)
    claims = [(b, "heavy", f"Table I, β={b}: OPM > best of Fair/EDF", min(paper_vs["fair"][b], paper_vs["edf"][b]))
              for b in (0.5, 0.6, 0.7)]
    claims += [(0.9, "heavy", "Fig. 2, heavy load, β=0.9: OPM > Fair", 47.0),
               (0.9, "light", "Fig. 2, light load, β=0.9: OPM > Fair", 56.0)]
    lines = ["| claim (paper) | earlier reading: 0.15 jobs/slot | verdict | calibrated: 0.25 jobs/slot (default) | "
             "verdict |", "|---|---|---|---|---|"]
    for b, load, name, paper in claims:
        if (EARLIER, load, b) not in cfg or ("paper", load, b) not in cfg:
            continue
        cells = []
        for scale in (EARLIER, "paper"):
            c = (scale, load, b)
            ref = best_base(c) if name.startswith("Table") else vals(c, "fair")
            k = stats.paired_comparison(vals(c, "opm"), ref, scale=_bounds(runs, cfg[c]), basis=BASIS)
            cells.append(f"{stats.fmt_ci(k)} {k.wins}/{k.losses} | **{stats.verdict(k, +1, paper=paper)}**")
        lines.append(f"| {name} (+{paper:g}%) | " + " | ".join(cells) + " |")
    return lines if len(lines) > 2 else []


def ingredients(horizon: int = 1000, workers: int = 2, progress: bool = False, paper_vs: dict | None = None) -> str:
    """Identical machines vs speed factors × job density (arrival rate) at the paper scale, β = 0.7,
    heavy load: OPM vs the best of Fair/EDF per job list (claims statistic, S = the fluid bound) and
    Fair's share of the bound, over ``experiments.instances_for`` job lists, seed 0. Returns the
    markdown table (docs/opm.md names the command)."""
    paper = 32.6 if paper_vs is None else min(paper_vs["fair"][0.7], paper_vs["edf"][0.7])
    insts = instances_for(False)
    cfgs = {(sl, ar): dict(scale="paper", horizon=horizon, beta=0.7, load=1.0, speed_low=sl, arrival_rate=ar)
            for sl in (1.0, SPEED_EXT) for ar in (0.05, 0.15, 0.25, 0.45)}
    tasks = [(dict(kw, scenario_seed=i, oracle=a == "random"), a, 100 * i, False)
             for kw in cfgs.values() for i in insts for a in ("opm", "fair", "edf", "random")]
    runs = _run_all(tasks, workers, progress)
    sw = {"runs": runs, "pl": {"configs": cfgs}}
    vals, best_base, share, *_ = _views(sw)
    lines = ["| machines | arrival rate (jobs/slot) | OPM vs best of Fair/EDF, % of B, W/L (ratio of totals) | "
             "Fair share of B | OPM share of B |", "|---|---|---|---|---|"]
    for (sl, ar), kw in cfgs.items():
        c = stats.paired_comparison(vals((sl, ar), "opm"), best_base((sl, ar)), scale=_bounds(runs, kw), basis=BASIS)
        fs = stats.fmt_ci(stats.mean_ci(list(share((sl, ar), "fair").values()), bounds=SHARE_BOUNDS), "", 3, False)
        os_ = stats.fmt_ci(stats.mean_ci(list(share((sl, ar), "opm").values()), bounds=SHARE_BOUNDS), "", 3, False)
        mach = "identical (paper)" if sl == 1.0 else f"extension: speed factors U[{sl}, 1]"
        lines.append(f"| {mach} | {ar} | {stats.fmt_ci(c)} {c.wins}/{c.losses} ({c.ratio:+.1f}%) "
                     f"{stats.verdict(c, +1, paper=paper)} | {fs} | {os_} |")
    return "\n".join(lines)
