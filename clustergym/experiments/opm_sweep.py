"""The sweep of the OPM reproduction: what it runs (:func:`plan`: configurations, job lists, seeds), running it
(:func:`sweep`) and per-job-list views of its runs (:func:`_views`), which the claims, tables and figures of
:mod:`clustergym.experiments.opm` read."""

from __future__ import annotations

import time

import numpy as np

from clustergym.core import stats
from clustergym.experiments import instances_for
from clustergym.experiments.opm_runs import _run_all

__all__ = ["AGENTS", "SPEED_EXT", "COUPLED", "ROUNDING_CONFIG", "RATE_SWEEP", "EARLIER", "plan", "sweep"]

AGENTS = ["opm", "opm-noest", "fair", "edf", "random"]
SCALE_KW = {"default": {}, "paper": {"scale": "paper"}}  # scale="paper": identical machines (the paper's setup)
SPEED_EXT = 0.3  # the speed-factor extension: scale="paper" with speed_low=0.3
# eq. 72's rounding coupled across slots (agents/opm.py ``rounding``), run beside the default per-slot one
COUPLED = "opm[rounding=coupled]"
ROUNDING_CONFIG = ("paper", "heavy", 0.7)
# Arrival rates of the density sweep (jobs/slot at scale="paper"; the default 0.25 is calibrated to §VI's heavy
# load, 0.15 is the earlier reading, run as EARLIER).
RATE_SWEEP = (0.05, 0.45)
EARLIER = "paper-0.15"  # the scale of the earlier reading: the paper's sizes at 0.15 jobs/slot (demand ≈ 0.88 M)


def _key(kw: dict) -> tuple:
    return tuple(sorted((k, v) for k, v in kw.items() if k not in ("scenario_seed", "oracle")))


QUICK_H = 600  # quick mode's horizon at both scales
TINY_H = 30  # tests of the machinery only


def plan(quick: bool, instances=None, tiny: bool = False) -> dict:
    """The configurations, instances and seeds of ``reproduce`` (one place, so tests can read it).

    Quick: 10 job lists (``experiments.instances_for``), one seed, horizon 600 at both scales, β ∈
    {0.5, 0.7, 0.9} heavy, β = 0.9 light, the speed-factor extension at β ∈ {0.5, 0.7}; the heavy β and the
    light β = 0.9 also at the earlier arrival rate (``scale="paper-0.15"``, :data:`EARLIER`). Full: 20 job
    lists × 2 seeds, horizon 2000, Table I's three β and β = 0.9, light load at β ∈ {0.5, 0.7, 0.9},
    the extension at Table I's three β, the Fig. 3 α sweep and a horizon sweep (600 / 2000 / 5000 /
    50,000 slots, the last the paper's T) at the paper's scale. ``instances`` replaces the job lists; ``tiny`` the horizons (a few
    slots, for tests of the machinery).
    """
    h = TINY_H if tiny else QUICK_H if quick else 2000
    H = {"default": h, "paper": h}
    heavy = (0.5, 0.7, 0.9) if quick else (0.5, 0.6, 0.7, 0.9)
    light = (0.9,) if quick else (0.5, 0.7, 0.9)
    ext = (0.5, 0.7) if quick else (0.5, 0.6, 0.7)
    cfgs = {}
    for scale, skw in SCALE_KW.items():
        for b in heavy:
            cfgs[(scale, "heavy", b)] = dict(skw, horizon=H[scale], beta=b, load=1.0)
        for b in light:
            cfgs[(scale, "light", b)] = dict(skw, horizon=H[scale], beta=b, load=0.5)
    for b in heavy:  # the earlier reading of the load, beside the calibrated one on the same scenario seeds
        cfgs[(EARLIER, "heavy", b)] = dict(scale=EARLIER, horizon=H["paper"], beta=b, load=1.0)
    cfgs[(EARLIER, "light", 0.9)] = dict(scale=EARLIER, horizon=H["paper"], beta=0.9, load=0.5)
    for b in ext:  # the extension: machines with speed factors U[0.3, 1] (not in the paper)
        cfgs[("paper", "speed", b)] = dict(scale="paper", horizon=H["paper"], beta=b, load=1.0, speed_low=SPEED_EXT)
    for r in RATE_SWEEP:  # the arrival rate is ours: the claim at other densities (β = 0.7, heavy)
        cfgs[("paper", f"rate={r:g}", 0.7)] = dict(scale="paper", horizon=H["paper"], beta=0.7, load=1.0,
                                                   arrival_rate=r)
    instances = instances_for(quick, instances)
    seeds = [0] if quick else [0, 1]
    alphas = [] if quick else [None, 0.06, 0.6, 6.0]  # Fig. 3 sweep (full mode), None = Theorem 3
    if alphas:
        cfgs[("paper", "alpha", 0.8)] = dict(scale="paper", horizon=H["paper"], beta=0.8, load=1.0)
    horizons = [] if quick else [600, 5000, 50_000]  # with H["paper"]: OPM's gain against the horizon, to the
    # paper's T = 50,000 (§VI)
    for T in horizons:
        cfgs[("paper", f"T={T}", 0.7)] = dict(scale="paper", horizon=T, beta=0.7, load=1.0)
    return {"configs": cfgs, "instances": instances, "seeds": seeds, "horizons": H, "alphas": alphas,
            "horizon_sweep": horizons}


def _tasks(pl: dict) -> list:
    tasks = []
    for (scale, group, b), kw in pl["configs"].items():
        agents = list(AGENTS)
        if group == "alpha":
            agents = ["fair", "random"] + [("opm" if a is None else f"opm[alpha={a:g}]") for a in pl["alphas"]]
        elif group.startswith("T=") or group.startswith("rate="):
            agents = ["opm", "fair", "edf", "random"]
        elif (scale, group, b) == ROUNDING_CONFIG:
            agents = [*agents, COUPLED]
        for inst in pl["instances"]:
            for sd in pl.get("seeds", [0]):
                for a in agents:
                    rec = group == "heavy" and b == 0.5 and sd == 0
                    tasks.append((dict(kw, scenario_seed=inst, oracle=a == "random"), a, 100 * inst + sd, rec))
    return tasks


def _per_instance(runs, kw, agent, field="total_reward") -> dict:
    """``{job list: mean over its seeds}`` of a run field for one agent and configuration."""
    k, groups = _key(kw), {}
    for r in runs:
        if r["agent"] == agent and _key(r["env_kwargs"]) == k:
            groups.setdefault(r["env_kwargs"]["scenario_seed"], []).append(r[field])
    return {i: float(np.mean(v)) for i, v in groups.items()}


def _bounds(runs, kw) -> dict:
    return _per_instance(runs, kw, "random", "bound")


def sweep(quick: bool, workers: int, progress: bool, instances=None, tiny: bool = False) -> dict:
    """Every episode of :func:`plan` (:func:`episode` per task, through the runner's worker pool)."""
    pl = plan(quick, instances, tiny)
    tasks = _tasks(pl)
    t0 = time.perf_counter()
    runs = _run_all(tasks, workers, progress)
    return {"quick": quick, "tiny": tiny, "pl": pl, "runs": runs, "wall": time.perf_counter() - t0}


def _views(sw: dict):
    """Per-instance views of a sweep's runs: ``vals(config, agent, field)``, ``best_base``, ``share`` of
    the bound, ``score``, ``eff`` (work / spend) and ``ci`` (mean [95% interval] as text)."""
    runs, cfg = sw["runs"], sw["pl"]["configs"]

    def vals(c, agent, field="total_reward"):
        return _per_instance(runs, cfg[c], agent, field)

    def best_base(c):
        f, e = vals(c, "fair"), vals(c, "edf")
        return {i: max(f[i], e[i]) for i in f}

    def share(c, agent):  # mean utility over seeds / the bound on the expected utility, per job list
        b, v = _bounds(runs, cfg[c]), vals(c, agent)
        return {i: v[i] / b[i] if b[i] > 0 else float("nan") for i in v}

    def score(c, agent):  # on means over seeds per job list
        b, v, r = _bounds(runs, cfg[c]), vals(c, agent), vals(c, "random")
        return {i: (v[i] - r[i]) / (b[i] - r[i]) if b[i] - r[i] > 0 else float("nan") for i in v}

    def eff(c, agent):
        w, s = vals(c, agent, "work"), vals(c, agent, "budget_spent")
        return {i: w[i] / s[i] if s[i] > 0 else float("nan") for i in w}  # nothing spent (a few slots): no ratio

    def ci(x, unit="", digits=3, signed=False, bounds=None):
        """mean [95% interval]; ``bounds``: a share or score, seeded bootstrap interval (stats.mean_ci)."""
        return stats.fmt_ci(stats.mean_ci(list(x.values()), bounds=bounds), unit, digits, signed)

    return vals, best_base, share, score, eff, ci
