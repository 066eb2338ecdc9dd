"""GADGET paper: Fig. 4 with trace-driven arrivals (the ``philly`` scenario) beside the Poisson
version of ``reproduce gadget``, as claims rows over instances (scenario seeds).

The paper drives its arrivals by "the job arrival pattern from the Google Cluster data", which we do
not have; ``reproduce gadget`` uses Poisson arrivals. Here the same Fig. 4 grid (each budget reading
× number of jobs, every active job visible) runs with the submit times of the Philly trace window that
ships with the package (``envs/traces/presets/philly.json``; scenario ``philly``: the submit times
rescaled so that their mean rate is ``arrival_rate``, the trace's GPU counts as N_i capped at
``workers_max``, the other job attributes and the topology drawn as in the paper from the instance's
seed). The instance (``scenario_seed`` = dynamics seed, as in ``reproduce gadget``) draws the
topology and the job attributes; the arrival slots are the trace's on every instance, so the
instances differ in everything but the arrival pattern.

Claims, per budget reading: GADGET's total utility above FIFO, DRF and LAS at each number of jobs
("GADGET above all baselines") and its gain over each growing from the fewest to the most jobs
("gains more pronounced as jobs increase"), as in ``reproduce gadget``; beside each, the same gain
under Poisson arrivals on the same instances (the main sweep's runs) and the difference trace −
Poisson (points, no direction claimed: the paper states none).

The window is sized from the trace: ``max_jobs`` = the number of trace arrivals in the horizon + 20,
so every active job is visible (the report prints the mean waiting jobs, which must be 0). Full mode
only (GADGET's LPs cost about as much as the Poisson Fig. 4 of full mode); the quick report lists it.
``python -m clustergym.experiments.extra.cli gadget`` runs it alone at any size.
"""

from __future__ import annotations

import os
import time

import numpy as np

from clustergym.core import stats
from clustergym.envs.ringallreduce.scenario import make_ring_scenario
from clustergym.experiments import write_summary
from clustergym.runner.evaluation import evaluate

__all__ = ["trace_jobs", "trace_window", "trace_sweep", "trace_rows", "trace_table", "run", "section", "write"]

ENV_ID = "clustergym/RingAllReduce-v0"
BASELINES = ("fifo", "drf", "las")
AGENTS = ("gadget", "gadget[rounding_repair=true]", *BASELINES)  # Algorithm 2 as written; the repair option beside it
SCENARIO = "philly"


def trace_jobs(rate: float, horizon: int) -> int:
    """Jobs of the ``philly`` scenario that arrive in ``horizon`` slots at mean rate ``rate`` (the same
    on every instance: the arrival slots are the trace's)."""
    sc = make_ring_scenario(SCENARIO, seed=0, arrival_rate=float(rate))
    return int(np.sum(np.asarray(sc.truth.trace_slot) < horizon))


def trace_window(rate: float, horizon: int) -> int:
    """``max_jobs`` that keeps every active job visible: the trace's arrivals in the horizon + 20."""
    return int(max(64, trace_jobs(rate, horizon) + 20))


def trace_sweep(grid: dict, horizon: int, instances, workers: int = 1, progress: bool = False) -> dict:
    """``{(budget mode, rate): Results}`` of GADGET, FIFO, DRF and LAS with the trace's arrivals;
    ``grid`` = {budget mode: [rates]} (``reproduce gadget``'s Fig. 4 grid); seed = instance."""
    seeds = [int(i) for i in instances]
    out = {}
    for mode, rates in grid.items():
        for rate in rates:
            out[mode, rate] = evaluate(ENV_ID, list(AGENTS), seeds, horizon,
                                       env_kwargs=dict(scenario=SCENARIO, arrival_rate=rate, budget_mode=mode,
                                                       max_jobs=trace_window(rate, horizon)),
                                       workers=workers, progress=progress, score=False)
    return out


def _totals(res, agent) -> dict:
    return res.per_instance(agent, "total_reward")


def _gain(res, agent="gadget", ref="fifo"):
    return stats.paired_comparison(_totals(res, agent), _totals(res, ref), agent=agent, reference=ref)


def trace_rows(trace: dict, horizon: int) -> list[dict]:
    """Fig. 4's claims under the trace's arrivals (module docstring)."""
    rows = []
    modes = list(dict.fromkeys(m for m, _ in trace))
    for mode in modes:
        rates = sorted(r for m, r in trace if m == mode)
        for b in BASELINES:
            for rate in rates:
                res = trace[mode, rate]
                rows.append(dict(claim=f"Fig. 4, Philly arrivals ({mode}, {trace_jobs(rate, horizon)} jobs): GADGET > "
                                       f"{b.upper()}", paper="GADGET above all baselines", comparison=_gain(res, ref=b),
                                 predicted=+1))
            lo, hi = rates[0], rates[-1]
            if lo == hi:
                continue
            g_lo, g_hi = _gain(trace[mode, lo], ref=b), _gain(trace[mode, hi], ref=b)
            rows.append(dict(claim=f"Fig. 4, Philly arrivals ({mode}): gain over {b.upper()} grows from "
                                   f"{trace_jobs(lo, horizon)} to {trace_jobs(hi, horizon)} jobs (difference of gains, "
                                   "points)", paper="gains more pronounced as jobs increase",
                             comparison=stats.paired_comparison(g_hi.per_instance, g_lo.per_instance,
                                                                agent="gap at most jobs", reference="gap at fewest",
                                                                relative=False),
                             predicted=+1, unit=" pt"))
    return rows


def trace_table(trace: dict, poisson: dict | None, horizon: int) -> list[str]:
    """Per budget reading and rate: jobs, waiting jobs, each agent's total utility and GADGET's gain
    over each baseline with the trace's arrivals, beside the gain with Poisson arrivals (same instances,
    ``reproduce gadget``'s runs) and the difference trace − Poisson."""
    lines = ["| budget | rate (jobs/slot) | jobs (trace / Poisson mean) | waiting | " + " | ".join(AGENTS)
             + " | " + " | ".join(f"GADGET vs {b.upper()}: trace / Poisson / trace − Poisson (pts)" for b in BASELINES)
             + " |", "|---" * (4 + len(AGENTS) + len(BASELINES)) + "|"]
    for (mode, rate), res in trace.items():
        wait = max(max(res.per_instance(a, "mean_waiting_jobs").values()) for a in AGENTS)
        tot = [stats.fmt_ci(stats.mean_ci(list(_totals(res, a).values())), "", 0, False) for a in AGENTS]
        cells = []
        for b in BASELINES:
            g = _gain(res, ref=b)
            cell = f"{stats.fmt_ci(g)} ({g.wins}/{g.losses})"
            pres = (poisson or {}).get((mode, rate))
            if pres is not None and b in pres.agents:
                gp = _gain(pres, ref=b)
                d = stats.paired_comparison(g.per_instance, gp.per_instance, relative=False)
                cell += f" / {stats.fmt_ci(gp)} / {stats.fmt_ci(d, ' pts')}"
            cells.append(cell)
        lines.append(f"| {mode} | {rate:g} | {trace_jobs(rate, horizon)} / {rate * horizon:.0f} | {wait:.1f} | "
                     + " | ".join(tot) + " | " + " | ".join(cells) + " |")
    return lines


def run(main_sw: dict, quick: bool, workers: int, progress: bool, tiny: bool = False) -> dict:
    """The trace-driven Fig. 4 on ``reproduce gadget``'s grid, horizon and instances (``main_sw``: its
    sweep), beside its Poisson runs; in quick mode (not tiny) only listed as full mode only."""
    cfg = main_sw["cfg"]
    out = {"quick": quick, "tiny": tiny, "instances": cfg["instances"], "horizon": cfg["horizon"],
           "poisson": main_sw.get("fig4")}
    if quick and not tiny:
        return out
    t0 = time.perf_counter()
    out["trace"] = trace_sweep(cfg["fig4"], cfg["horizon"], cfg["instances"], workers, progress)
    out["wall"] = time.perf_counter() - t0
    return out


def rows_of(more: dict) -> list[dict]:
    return trace_rows(more["trace"], more["horizon"]) if "trace" in more else []


def section(more: dict) -> str:
    if "trace" not in more:
        return ("\n## Fig. 4 with the Philly trace's arrivals\n\nFull mode only (GADGET's LPs on the full grid); "
                "`python -m clustergym.experiments.extra.cli gadget` runs it alone.\n")
    H = more["horizon"]
    return "\n".join(["", f"## Fig. 4 with the Philly trace's arrivals ({len(more['instances'])} instances, T = {H}, "
                          f"{more['wall']:.0f} s)", "",
                      "The submit times of the shipped Philly window (scenario `philly`) instead of Poisson arrivals; "
                      "the same instances, budget readings and rates as the Poisson Fig. 4 above. Gains: mean [95% t] "
                      "over instances of the relative gain in total utility (W/L).", "",
                      *trace_table(more["trace"], more.get("poisson"), H), "",
                      stats.claims_table(trace_rows(more["trace"], H)), ""])


def write(more: dict, folder: str) -> str:
    os.makedirs(folder, exist_ok=True)
    return write_summary(folder, ENV_ID, more["instances"], more["quick"], more["tiny"], rows_of(more),
                         arrivals=SCENARIO, horizon=more["horizon"])
