"""Where a learned P1 scheduler fails on held-out instances: against how far each instance is from the pool.

A P1 instance ties each channel's demand (public) to its mean utility (hidden) through the scenario
generator: eq. 7's utility is mu_e minus the device cost, so channels with high demand tend to have low
value. A learner can score well on its training pool by learning that link (LCF's rule: low demand first)
instead of reading the per-episode value estimates. This study measures, per held-out instance of a
finished ``clustergym drl`` P1 evaluation,

* ``rho``: the Pearson correlation over the instance's channels between total demand and mean utility
  (hidden truth: used here as a measurement, never by an agent), and its percentile among the training
  pool's instances (1000-1099);
* the learner's normalised score, LCF's and ESDP's (``results.json`` of the benchmark);

and reports the rank correlation (Spearman) between ``rho`` and the learner's score minus LCF's and
minus ESDP's. A learner that copies the pool's prior should lose most where ``rho`` is least typical of
the pool.

    python benchmarks/drl_instance_shift.py runs/drl/p1/eval --learner ppo --out runs/shift-p1

Prints the per-instance table and the rank correlations; writes ``table.md`` into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np


def demand_value_correlation(instance: int) -> float:
    """Pearson correlation over channels of (Σ_k a_k^e, ṽ_e) of P1 instance ``instance`` (default scenario)."""
    from clustergym.envs.multiserver.channel.scenario import make_channel_scenario

    sc = make_channel_scenario("paper", seed=instance)
    d = np.asarray(sc.problem.demand).sum(axis=1).astype(float)
    v = np.asarray(sc.truth.mean_utility, dtype=float)
    return float(np.corrcoef(d, v)[0, 1])


def spearman(x, y) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(x, y).statistic)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("eval_dir", help="a benchmark's P1 evaluation folder (with results.json)")
    ap.add_argument("--learner", default="ppo", help="the learner's folder name in the benchmark (default ppo)")
    ap.add_argument("--pool", default="1000-1099", help="the training pool (A-B)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    with open(os.path.join(a.eval_dir, "results.json")) as f:
        res = json.load(f)
    lo, hi = map(int, a.pool.split("-"))
    pool_rho = np.array([demand_value_correlation(k) for k in range(lo, hi + 1)])

    def score(match) -> dict:
        g: dict = {}
        for r in res["runs"]:
            if match(r["agent"]) and r["score"] is not None:
                g.setdefault(r["instance"], []).append(r["score"])
        return {k: float(np.mean(v)) for k, v in g.items()}

    mine = score(lambda ag: ag.startswith("sb3:") and f"/{a.learner}/seed" in ag)
    lcf, esdp = score(lambda ag: ag == "lcf"), score(lambda ag: ag == "esdp")
    insts = sorted(mine)
    rho = {k: demand_value_correlation(k) for k in insts}
    pct = {k: float(100 * np.mean(pool_rho <= rho[k])) for k in insts}
    lines = [f"Learner `{a.learner}` on {len(insts)} held-out instances; pool {a.pool}: rho from "
             f"{pool_rho.min():+.3f} to {pool_rho.max():+.3f} (median {np.median(pool_rho):+.3f}).", "",
             "| instance | rho (demand, value) | percentile in pool | learner score | LCF | ESDP | learner − LCF |",
             "|---|---|---|---|---|---|---|"]
    for k in insts:
        lines.append(f"| {k} | {rho[k]:+.3f} | {pct[k]:.0f} | {mine[k]:.3f} | {lcf.get(k, float('nan')):.3f} | "
                     f"{esdp.get(k, float('nan')):.3f} | {mine[k] - lcf.get(k, float('nan')):+.3f} |")
    x = [rho[k] for k in insts]
    gap_lcf = [mine[k] - lcf[k] for k in insts]
    gap_esdp = [mine[k] - esdp[k] for k in insts]
    lines += ["", f"Spearman(rho, learner − LCF) = {spearman(x, gap_lcf):+.2f}; "
              f"Spearman(rho, learner − ESDP) = {spearman(x, gap_esdp):+.2f}; "
              f"Spearman(rho, learner score) = {spearman(x, [mine[k] for k in insts]):+.2f} "
              f"(n = {len(insts)})."]
    text = "\n".join(lines)
    print(text)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "table.md"), "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
