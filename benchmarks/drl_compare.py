"""Evaluate trained SB3 runs beside the paper agent and the baselines on held-out instances.

For every run directory under ``--runs`` (written by ``clustergym train``): evaluates
``sb3:RUN/model.zip``, the paper agent (and its documented options) and every baseline of that env
on ``--instances`` x ``--seeds`` with the training episode length (a model trained on a pool of
instances, ``clustergym train``'s default 1000-1099, is evaluated on instances it never saw; one
trained on a single instance is pinned to it and ``--instances`` is not used); writes
``RUN/../cmp-<env>/`` (results.json, curves.csv, plots); draws the training curve with the held-out
mean returns of the best non-learned agent, the paper agent and random as reference lines; and
prints a markdown table (also written to ``--runs``/summary.md). ``make drl`` runs it.

    python benchmarks/drl_compare.py --runs runs/drl --instances 0-4 --seeds 0,1,2 --figures docs/figures
"""

from __future__ import annotations

import argparse
import json
import os
import shutil

import clustergym
from clustergym.agent import list_agents
from clustergym.learning.training import plot_training_curve
from clustergym.family import family_spec

# The paper agents' documented options shown beside the faithful version ({T} = the episode length).
PAPER_OPTIONS = {"multiserver-channel": ["esdp[only_active=true]"],
                 "multiserver-allocation": ["ogasched[lr=eq26,horizon={T}]"]}
SHORT = {"MultiServerChannel": "p1", "MultiServerAllocation": "p2", "RingAllReduce": "p3", "ApproxJobs": "p4"}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", default="runs/drl")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--instances", default="0-4", help="held-out instances (lo-hi or comma-separated)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--figures", default=None, help="copy the training curves here as drl_<run>_training.png")
    p.add_argument("--only", action="append", default=None, metavar="RUN", help="only these run names (repeatable)")
    args = p.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    lo, _, hi = args.instances.partition("-")
    instances = list(range(int(lo), int(hi) + 1)) if hi else [int(k) for k in args.instances.split(",")]
    for name in sorted(os.listdir(args.runs)):
        run = os.path.join(args.runs, name)
        side = os.path.join(run, "clustergym.json")
        if not os.path.exists(side) or (args.only and name not in args.only):
            continue
        lines = []
        meta = json.load(open(side))
        env_id, fam = meta["env_id"], meta["family"]
        pads = set(getattr(family_spec(fam), "pad_kwargs", ()))  # the model's own env gets them; the others do not
        env_kwargs = {k: v for k, v in meta["env_kwargs"].items() if k != "horizon" and k not in pads}
        horizon = int(meta["env_kwargs"].get("horizon", 2000))
        paper = family_spec(fam).paper_agent
        model = f"sb3:{run}/model.zip"
        options = [o.format(T=horizon) for o in PAPER_OPTIONS.get(fam, [])]
        agents = [model, paper, *options, *[a for a in list_agents(env_id) if a != paper]]
        pool = meta.get("instances")
        if pool and set(pool) & set(instances):
            raise SystemExit(f"{name}: --instances {args.instances} overlap the model's training pool")
        res = clustergym.evaluate(env_id, agents, seeds, horizon, env_kwargs=env_kwargs, workers=args.workers,
                                  instances=instances if pool else None)
        short = f"{meta['algo']}_{SHORT[env_id.split('/')[1][:-3]]}"
        out = os.path.join(args.runs, f"cmp-{name}")
        res.write(out)
        summ = {s["agent"]: s for s in res.summary()}
        # Reference lines: the paper agent, the best non-learned agent (if another one), random.
        top = max((a for a in summ if a != model), key=lambda a: summ[a]["mean_total_reward"])
        ref = {f"{a} (held-out mean)": summ[a]["mean_total_reward"]
               for a in dict.fromkeys((top, paper, "random")) if a in summ}
        curve = plot_training_curve(run, reference=ref)
        if args.figures:
            os.makedirs(args.figures, exist_ok=True)
            shutil.copy(curve, os.path.join(args.figures, f"drl_{short}_training.png"))
        best = max(s["mean_total_reward"] for s in summ.values())
        lines += [f"### {meta['algo'].upper()} on {env_id} ({meta['timesteps']:,} training steps, "
                  f"{meta['train_wall_s'] / 60:.0f} min), "
                  + (f"held-out instances {args.instances} x seeds {args.seeds}" if pool else
                     f"its training instance, seeds {args.seeds}") + f", T={horizon}", "",
                  "| agent | total reward (mean ± std) | vs best | regret |", "|---|---|---|---|"]
        for s in sorted(summ.values(), key=lambda s: -s["mean_total_reward"]):
            label = f"{meta['algo'].upper()} ({meta['timesteps']:,} steps)" if s["agent"] == model else s["agent"]
            reg = "–" if s["mean_regret"] is None else f"{s['mean_regret']:,.1f}"
            lines.append(f"| {label} | {s['mean_total_reward']:,.1f} ± {s['std_total_reward']:,.1f} | "
                         f"{(s['mean_total_reward'] - best) / abs(best) * 100:+.1f}% | {reg} |")
        lines.append("")
        print(res.table(), flush=True)
        with open(os.path.join(out, "summary.md"), "w") as f:
            f.write("\n".join(lines) + "\n")
    # One summary over every compared run (also those compared in earlier invocations).
    parts = [open(os.path.join(args.runs, d, "summary.md")).read() for d in sorted(os.listdir(args.runs))
             if d.startswith("cmp-") and os.path.exists(os.path.join(args.runs, d, "summary.md"))]
    text = "\n".join(parts)
    print(text)
    with open(os.path.join(args.runs, "summary.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
