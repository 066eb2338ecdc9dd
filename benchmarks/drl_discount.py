"""Which discount fits a per-slot problem: PPO trained with several gammas, scored on validation instances.

P1 and P2 have no state an action changes (arrivals and utilities are drawn independently of the
actions), so a discount only adds future slots' noise to each advantage. This study trains PPO with each
gamma (several training seeds, the default training pool 1000-1099), then scores every model on
*validation* instances (900-909 by default: disjoint from the pool and from the instances the docs
evaluate on), beside random and a baseline, with the runner's normalised score (random = 0, oracle = 1).
The discount the shipped ``ppo.yml`` gives each env is the one chosen here.

    python benchmarks/drl_discount.py clustergym/MultiServerChannel-v0 --gammas 0,0.5,0.9,0.99 \\
        --seeds 0,1 --timesteps 100000 --horizon 200 --baseline lcf --out runs/discount-p1

Prints one row per gamma: mean score over validation instances (each instance averaged over the training
seeds and dynamics seeds) with a 95% t-interval, wins/losses against gamma 0.99 (SB3's default), and the
training wall time; writes ``table.md`` and the evaluation's ``results.json`` into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("env_id")
    ap.add_argument("--gammas", default="0,0.5,0.9,0.99")
    ap.add_argument("--seeds", default="0,1", help="training seeds")
    ap.add_argument("--timesteps", type=int, default=100_000)
    ap.add_argument("--horizon", type=int, default=200, help="training and evaluation episode length")
    ap.add_argument("--validation", default="900-909", help="validation instances A-B")
    ap.add_argument("--eval-seeds", default="0", help="dynamics seeds of the evaluation")
    ap.add_argument("--baseline", default=None, help="a non-learned agent scored beside the models")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="env kwarg (JSON value)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)

    import clustergym
    from clustergym.cli.commands import _parse_set
    from clustergym.learning.training import TrainConfig, train
    from clustergym.core.stats import mean_ci

    kw = _parse_set(args.set)  # the CLI's --set rule (JSON values, else strings)
    kw["horizon"] = args.horizon
    gammas = [float(g) for g in args.gammas.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    a, b = (int(x) for x in args.validation.split("-"))
    validation = list(range(a, b + 1))
    os.makedirs(args.out, exist_ok=True)
    models, walls = {}, {}
    for g in gammas:
        for s in seeds:
            run = os.path.join(args.out, f"gamma{g:g}-s{s}")
            if os.path.exists(os.path.join(run, "clustergym.json")):  # resumable: a finished cell is kept
                meta = json.load(open(os.path.join(run, "clustergym.json")))
            else:
                config = TrainConfig(args.env_id, "ppo", args.timesteps, env_kwargs=kw, seed=s,
                                     hyperparams={"gamma": g})
                meta = train(config, run, progress=False)
            models[(g, s)] = f"sb3:{run}/model.zip"
            walls[(g, s)] = meta["train_wall_s"]
            print(f"gamma {g:g} seed {s}: {meta['timesteps_trained']:,} steps in {meta['train_wall_s']:.0f} s "
                  f"({meta['vec']})", flush=True)
    agents = list(models.values()) + ([args.baseline] if args.baseline else []) + ["random"]
    res = clustergym.evaluate(args.env_id, agents, seeds=[int(x) for x in args.eval_seeds.split(",")],
                              horizon=args.horizon,  # the models' envs get their action mode from their side-cars
                              env_kwargs={k: v for k, v in kw.items() if k not in ("horizon", "action_mode")},
                              instances=validation, workers=args.workers, progress=False)
    res.write(args.out, plots=False)

    def per_instance(names):  # instance -> mean score over the given agents (training seeds)
        vals = [res.per_instance(n, "score") for n in names]
        return {i: float(np.mean([v[i] for v in vals])) for i in vals[0]}

    ref = per_instance([models[(0.99, s)] for s in seeds]) if 0.99 in gammas else None
    lines = [f"PPO on {args.env_id}, {args.timesteps:,} steps, horizon {args.horizon}, training seeds "
             f"{args.seeds}, validation instances {args.validation} (dynamics seeds {args.eval_seeds}); "
             "score: random = 0, oracle = 1, 95% t-interval over instances", "",
             "| gamma | score [95% CI] | vs gamma 0.99 (score difference) [95% CI], W/L | training wall (s) |",
             "|---|---|---|---|"]
    for g in gammas:
        sc = per_instance([models[(g, s)] for s in seeds])
        ci = mean_ci(list(sc.values()))
        vs = ""
        if ref is not None and g != 0.99:
            d = {i: sc[i] - ref[i] for i in sc}
            dci = mean_ci(list(d.values()))
            vs = (f"{dci.mean:+.3f} [{dci.low:+.3f}, {dci.high:+.3f}], "
                  f"{sum(v > 0 for v in d.values())}/{sum(v < 0 for v in d.values())}")
        wall = np.mean([walls[(g, s)] for s in seeds])
        lines.append(f"| {g:g} | {ci.mean:.3f} [{ci.low:.3f}, {ci.high:.3f}] | {vs} | {wall:.0f} |")
    for name in ([args.baseline] if args.baseline else []):
        sc = res.per_instance(name, "score")
        ci = mean_ci(list(sc.values()))
        lines.append(f"| {name} (baseline) | {ci.mean:.3f} [{ci.low:.3f}, {ci.high:.3f}] | | |")
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(text + "\n")
    return 0


if __name__ == "__main__":
    t0 = time.time()
    rc = main()
    print(f"wall {time.time() - t0:.0f} s")
    raise SystemExit(rc)
