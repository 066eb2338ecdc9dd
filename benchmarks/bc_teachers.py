"""Which teachers can be cloned? Behaviour cloning only (``clustergym train --warm-start T --timesteps 0``)
vs its teacher on held-out instances, per env and teacher (docs/drl.md "Warm start").

Per cell: train on the pool 100-199 (horizon 200, ``--bc-steps`` demonstration slots, ``--bc-epochs``
passes, training seed 0), then ``clustergym.evaluate`` the clone and the teacher on instances 0-4, seed 0,
horizon 200. Prints one Markdown row per cell: totals, the clone's difference from its teacher in % of the
teacher's total (mean over instances, 95% t-interval, wins/losses/ties:
:func:`clustergym.core.stats.paired_comparison`; marked * where a total is <= 0 and the % is of the pair's mean
|total| instead), the ratio of totals, the accuracy on the demonstrations and the
wall times. Each finished cell is kept as JSON in ``--out`` (rerunning skips it).

    nice -n 10 python benchmarks/bc_teachers.py --out runs/bc-teachers            # all cells
    python benchmarks/bc_teachers.py --out runs/bc-teachers --cells P4:fair       # one
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

import clustergym
from clustergym.learning.training import TrainConfig, train
from clustergym.core.stats import paired_comparison

ENVS = {"P1": ("clustergym/MultiServerChannel-v0", "maskable_ppo"), "P2": ("clustergym/MultiServerAllocation-v0", "ppo"),
        "P3": ("clustergym/RingAllReduce-v0", "ppo"), "P4": ("clustergym/ApproxJobs-v0", "maskable_ppo")}
CELLS = ["P4:fair", "P4:opm", "P2:ogasched", "P2:drf", "P3:greedy", "P3:gadget", "P1:esdp"]


def cell(key: str, out: str, steps: int, epochs: int, horizon: int) -> dict:
    p, teacher = key.split(":")
    env, algo = ENVS[p]
    path = os.path.join(out, f"{p}-{teacher}.json")
    if os.path.exists(path):
        return json.load(open(path))
    run = os.path.join(out, f"{p}-{teacher}")
    t0 = time.perf_counter()
    config = TrainConfig(env, algo, 0, env_kwargs={"horizon": horizon}, instances=range(100, 200), warm_start=teacher,
                         bc_steps=steps, bc_epochs=epochs)
    meta = train(config, run, progress=False)
    ws = meta["warm_start"]
    agent = f"sb3:{run}/model.zip"
    res = clustergym.evaluate(env, [agent, teacher], seeds=[0], horizon=horizon, instances=range(5), progress=False,
                              score=False)
    tot: dict = {agent: {}, teacher: {}}
    for r in res.runs:
        tot[r.agent][r.instance] = r.total_reward
    comp = paired_comparison(tot[agent], tot[teacher], agent="clone", reference=teacher)
    row = {"cell": key, "env": env, "algo": algo, "teacher": teacher, "teacher_totals": tot[teacher],
           "clone_totals": tot[agent], "comparison": comp.to_json(), "demo_steps": ws["demo_steps"], "epochs": epochs,
           "accuracy_per_dim": ws.get("accuracy_per_dim"), "mse": ws.get("mse_deterministic"),
           "demo_wall_s": ws["demo_wall_s"], "bc_wall_s": ws["bc_wall_s"], "fit_wall_s": ws["bc_fit_wall_s"],
           "cell_wall_s": time.perf_counter() - t0, "reward_gap": ws["reward_gap"]}
    json.dump(row, open(path, "w"), indent=1)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--cells", default=",".join(CELLS))
    ap.add_argument("--bc-steps", type=int, default=10_000)
    ap.add_argument("--bc-epochs", type=int, default=30)
    ap.add_argument("--horizon", type=int, default=200)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    print("| env | teacher | teacher mean total | clone mean total | clone vs teacher, % [95% CI] | W/L/T | ratio of "
          "totals | fit on demos | demo steps | demo s | fit s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for key in a.cells.split(","):
        r = cell(key, a.out, a.bc_steps, a.bc_epochs, a.horizon)
        c = r["comparison"]
        fit = f"acc {r['accuracy_per_dim']:.3f}/dim" if r["accuracy_per_dim"] is not None else f"mse {r['mse']:.3f}"
        t, b = np.mean(list(r["teacher_totals"].values())), np.mean(list(r["clone_totals"].values()))
        star = "" if c["basis"].startswith("reference") else "*"
        print(f"| {key.split(':')[0]} | {r['teacher']} | {t:,.1f} | {b:,.1f} | {c['mean']:+.1f} [{c['low']:+.1f}, "
              f"{c['high']:+.1f}]{star} | {c['wins']}/{c['losses']}/{c['ties']} | {b / t:.3f} | {fit} | {r['demo_steps']:,} | "
              f"{r['demo_wall_s']:.0f} | {r['fit_wall_s']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
