"""P3's headroom over GADGET: its utility against the per-slot MILP optimum, on validation instances, per load.

A learner in RingAllReduce-v0 can only beat GADGET where GADGET leaves something on the table. This study runs
GADGET (and the one-pass ``greedy``) with the env's per-slot oracle on (``oracle=True``: the MILP optimum of
problem (10) for the state each slot starts in) and reports, per arrival rate, the share of the per-slot
optimum each keeps: Σ utility / Σ optimum over a run, with its 95% t-interval over instances and on how many
instances it is below 1 (by more than 1e-9 relative). The trajectory is the agent's own, so the optimum is of
the states that agent meets; a per-slot optimum says nothing about later slots (the headroom it shows is a
lower bound on what a learner could gain per slot, not a bound on a run).

It also reports each agent's share of the *episode bound* (``oracle.run_upper_bound``): every job at
min(N_i, budget left) workers in every slot from its arrival, as if GPUs, links and the visible window were
unlimited. No policy scores above it, so bound − agent bounds what any learner could gain over that agent on a
run; an agent at the bound is optimal over the episode. And its share of the tighter *window bound*
(``run_upper_bound(..., window=J_max)``): the same with the env's visible window of J_max jobs kept, GPUs and
links still unlimited; it too holds for every policy, and an agent at it is optimal over the episode.
``--no-slot-oracle`` skips the per-slot MILP (slow) and reports the episode bounds alone, at any horizon.
``--set key=value`` (repeatable) changes a scenario parameter, e.g. ``--set num_servers=10`` for a cluster
short of GPUs.

It runs on validation instances (default 900-909, dynamics seed 0), never on the held-out ones.

    python benchmarks/ring_headroom.py --rates 2,6,12 --horizon 60 --out runs/ring-headroom
    python benchmarks/ring_headroom.py --rates 2,4,6,12 --horizon 200 --no-slot-oracle --out runs/ring-bound
    python benchmarks/ring_headroom.py --rates 1,2 --horizon 200 --no-slot-oracle --set num_servers=10 --out runs/ring-tight

Prints one Markdown table and writes ``table.md`` and ``headroom.json`` into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os

import gymnasium as gym
import numpy as np

from clustergym.cli.commands import UsageError, _parse_seeds, _parse_set
from clustergym.runner.evaluation import evaluate
from clustergym.envs.ringallreduce.oracle import run_upper_bound
from clustergym.core.stats import fmt_ci, mean_ci

ENV_ID = "clustergym/RingAllReduce-v0"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="2,6,12", help="comma-separated arrival rates (jobs per slot; 2: the default)")
    ap.add_argument("--agents", default="gadget,greedy")
    ap.add_argument("--instances", default="900-909")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--horizon", type=int, default=60)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--out", required=True)
    ap.add_argument("--no-slot-oracle", action="store_true", help="skip the per-slot MILP; the episode bounds only")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a scenario parameter (JSON value), e.g. num_servers=10; repeatable")
    a = ap.parse_args()
    try:
        extra = _parse_set(a.set)  # JSON values, as clustergym run --set
    except UsageError as e:
        ap.error(str(e))
    agents = a.agents.split(",")
    slot = not a.no_slot_oracle
    rows, record = [], {"instances": a.instances, "seeds": a.seeds, "horizon": a.horizon, "set": extra, "loads": {}}
    for rate in (float(r) for r in a.rates.split(",")):
        res = evaluate(ENV_ID, agents, _parse_seeds(a.seeds), a.horizon,
                       env_kwargs={"oracle": slot, "arrival_rate": rate, **extra},
                       instances=_parse_seeds(a.instances), workers=a.workers, progress=True, score=False)
        bound, window = {}, {}
        for k in {r.instance for r in res.runs}:
            env = gym.make(ENV_ID, scenario_seed=k, arrival_rate=rate, **extra).unwrapped
            bound[k] = run_upper_bound(env.scenario.truth, a.horizon)
            window[k] = run_upper_bound(env.scenario.truth, a.horizon, window=env.problem.max_jobs)
        record["loads"][str(rate)] = {"bound": {str(k): v for k, v in sorted(bound.items())},
                                      "window_bound": {str(k): v for k, v in sorted(window.items())}}
        for agent in agents:
            runs = [r for r in res.runs if r.agent == agent]
            gpu = float(np.mean([r.metrics["mean_gpu_util"] for r in runs]))
            of_bound = [r.total_reward / bound[r.instance] for r in runs if bound[r.instance] > 0]
            b_ci, b_below = mean_ci(of_bound), sum(x < 1 - 1e-9 for x in of_bound)
            of_window = [r.total_reward / window[r.instance] for r in runs if window[r.instance] > 0]
            w_ci, w_below = mean_ci(of_window), sum(x < 1 - 1e-9 for x in of_window)
            entry = {"gpu_util": gpu, "of_bound": of_bound, "of_bound_mean": b_ci.mean, "of_bound_low": b_ci.low,
                     "of_bound_high": b_ci.high, "below_bound": b_below, "of_window": of_window,
                     "of_window_mean": w_ci.mean, "of_window_low": w_ci.low, "of_window_high": w_ci.high,
                     "below_window": w_below}
            cells = [f"{rate:g}", agent, f"{gpu:.2f}"]
            if slot:
                share = [r.total_reward / r.oracle_total for r in runs if r.oracle_total > 0]
                ci, below = mean_ci(share), sum(s < 1 - 1e-9 for s in share)
                cells += [fmt_ci(ci, unit="", digits=3, signed=False), f"{float(np.min(share)):.3f}",
                          f"{below}/{len(share)}"]
                entry.update(share=share, mean=ci.mean, low=ci.low, high=ci.high, below=below)
            cells += [fmt_ci(b_ci, unit="", digits=4, signed=False), f"{float(np.min(of_bound)):.4f}",
                      f"{b_below}/{len(of_bound)}", fmt_ci(w_ci, unit="", digits=4, signed=False),
                      f"{float(np.min(of_window)):.4f}", f"{w_below}/{len(of_window)}"]
            rows.append("| " + " | ".join(cells) + " |")
            record["loads"][str(rate)][agent] = entry
    head = ["arrivals / slot", "agent", "GPU utilisation"]
    if slot:
        head += ["utility / per-slot optimum, mean [95% CI]", "lowest instance", "instances below 1"]
    head += ["utility / episode bound, mean [95% CI]", "lowest instance", "instances below the bound",
             "utility / window bound, mean [95% CI]", "lowest instance", "instances below the window bound"]
    text = "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *rows])
    print(text)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(a.out, "headroom.json"), "w") as f:
        json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
