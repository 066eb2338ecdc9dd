"""Trained against untrained on more validation instances than the learning curves use.

``clustergym drl``'s "trained − untrained (validation)" column compares each row's final models with its
first checkpoint (the initial policy, 0 steps) on the curves' five validation instances 910-914 at one
dynamics seed: a t-interval over five instances. This study repeats that comparison on more validation
instances (default 910-929, dynamics seeds 0 and 1; never the tuning instances 900-909, the training pool or
the held-out instances).

For every training seed of a row it rebuilds the initial policy: the cell's own training call (its recorded
configuration: env kwargs, hyperparameters, network, SB3 seed) with a checkpoint at 0 steps, saved before the
first update. Before it is used, the rebuilt policy is checked against the cell's curve: on the curve's runs
its totals must equal the curve's first point run for run (the study stops otherwise). Then the initial and
the final model (``model.zip``) run on the study's instances; per instance the mean over dynamics seeds and
training seeds is compared, trained − untrained, as a paired 95% t-interval with wins/losses. On P3, whose
instances differ only in a topology that does not change totals, every run is its own instance = seed
(910-929), as in the benchmark.

    python benchmarks/drl_before_after.py runs/drl2-p4 p4 --rows ppo-entity,ppo --out runs/before-after-p4

Prints one Markdown table; writes ``table.md`` and ``before_after.json`` into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

import numpy as np

from clustergym.cli.commands import _parse_seeds
from clustergym.experiments.drl_plan import PLAN
from clustergym.learning.training import TrainConfig, train
from clustergym.runner.evaluation import evaluate
from clustergym.core.stats import fmt_ci, paired_comparison


def initial_policy(cell: str, tmp: str) -> str:
    """The cell's initial policy (its training call with a checkpoint at 0 steps); returns the model path."""
    cfg = json.load(open(os.path.join(cell, "done.json")))["config"]
    lrn = cfg["learner"]
    opts = dict(lrn["options"])
    if opts.get("warm_start"):
        raise SystemExit(f"{cell}: a warm-started row's first checkpoint is the cloned policy, not an untrained one")
    env_kwargs = {"horizon": cfg["horizon"], **opts.pop("env_kwargs", {})}
    # the shortest training call: one rollout and one update; the checkpoint at 0 is saved before the update
    train(TrainConfig(cfg["env_id"], lrn["algo"], 1, env_kwargs=env_kwargs, seed=cfg["sb3_seed"], checkpoints=[0],
                      **opts), tmp, progress=False)
    return os.path.join(tmp, "checkpoints", "0", "model.zip")


def _check_against_curve(cell: str, env_id: str, model: str) -> None:
    curve = json.load(open(os.path.join(cell, "curve.json")))
    first = curve["points"][0]
    if first["steps"] != 0:
        raise SystemExit(f"{cell}: the curve has no 0-step point")
    res = evaluate(env_id, [f"sb3:{model}"], curve["curve"]["seeds"], curve["horizon"],
                   instances=curve["curve"]["instances"], workers=1, progress=False, score=False)
    got = {str(k): v for k, v in res.per_instance(f"sb3:{model}").items()}
    if got != first["per_instance"]:
        raise SystemExit(f"{cell}: the rebuilt initial policy does not reproduce the curve's first point: "
                         f"{got} != {first['per_instance']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bench", help="a clustergym drl output folder")
    ap.add_argument("env", choices=sorted(PLAN), help="the env key (p1-p4)")
    ap.add_argument("--rows", required=True, help="comma-separated row names (e.g. ppo-entity,ppo)")
    ap.add_argument("--instances", default="910-929", help="validation instances (default 910-929)")
    ap.add_argument("--seeds", default="0,1", help="dynamics seeds (default 0,1; unused where instance = seed)")
    ap.add_argument("--horizon", type=int, default=200)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    plan = PLAN[args.env]
    instances, seeds = _parse_seeds(args.instances, "--instances"), _parse_seeds(args.seeds)
    bad = set(instances) & (set(range(900, 910)) | set(range(1000, 1100)) | set(range(100)))
    if bad:
        raise SystemExit(f"instances {sorted(bad)[:5]} are tuning, training or held-out instances")
    os.makedirs(args.out, exist_ok=True)
    runs = ("instance = seed" if plan.eval_instances is None else f"x dynamics seeds {seeds}")
    lines = [f"Trained − untrained on validation instances {instances[0]}-{instances[-1]} {runs} "
             f"({args.horizon} slots); per instance the mean over dynamics and training seeds; paired 95% "
             "t-interval over instances, wins/losses.", "",
             "| row | training seeds | untrained (mean total) | trained (mean total) | trained − untrained | "
             "W/L |", "|---|---|---|---|---|---|"]
    record = {"bench": args.bench, "env": args.env, "instances": instances, "seeds": seeds,
              "horizon": args.horizon, "rows": {}}
    for row in args.rows.split(","):
        cells = sorted(os.path.join(args.bench, args.env, row, d)
                       for d in os.listdir(os.path.join(args.bench, args.env, row)) if d.startswith("seed"))
        before, after = [], []
        with tempfile.TemporaryDirectory(prefix="before-after-") as tmp:
            for i, cell in enumerate(cells):
                init = initial_policy(cell, os.path.join(tmp, str(i)))
                _check_against_curve(cell, plan.env_id, init)
                final = os.path.join(cell, "model.zip")
                pair = plan.eval_instances is None  # P3: instance = seed
                res = evaluate(plan.env_id, [f"sb3:{init}", f"sb3:{final}"], instances if pair else seeds,
                               args.horizon, instances=None if pair else instances, workers=1, progress=False,
                               score=False)
                before.append(res.per_instance(f"sb3:{init}"))
                after.append(res.per_instance(f"sb3:{final}"))
                print(f"{row} {os.path.basename(cell)}: untrained {np.mean(list(before[-1].values())):.2f}, "
                      f"trained {np.mean(list(after[-1].values())):.2f}", flush=True)
        b = {k: float(np.mean([d[k] for d in before])) for k in before[0]}
        a = {k: float(np.mean([d[k] for d in after])) for k in after[0]}
        c = paired_comparison(a, b, agent=f"{row} trained", reference=f"{row} untrained")
        lines.append(f"| {row} | {len(cells)} | {np.mean(list(b.values())):.2f} | {np.mean(list(a.values())):.2f} "
                     f"| {fmt_ci(c)} | {c.wins}/{c.losses} |")
        record["rows"][row] = {"cells": cells, "untrained": b, "trained": a, "mean": c.mean, "low": c.low,
                               "high": c.high, "wins": c.wins, "losses": c.losses,
                               "untrained_per_seed": before, "trained_per_seed": after}
    text = "\n".join(lines) + "\n"
    print(text)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out, "before_after.json"), "w") as f:
        json.dump(record, f, indent=1, default=str)


if __name__ == "__main__":
    main()
