"""The gap to the bound of the shipped models on new instances, at each env's default horizon.

For each env with a bound (P1, P2, P4; P3's ``p3s``, scored against each instance's window bound), the shipped model
``sb3:pretrained/<EnvName>`` (``p3s``: ``sb3:pretrained/RingAllReduce-v0-gpu-short``) and every non-learned
agent the benchmark compares (the paper policy, its option rows, every registered baseline, random) run through
the runner under today's defaults and the plan's scenario (the same instances and dynamics seeds for all: common
random numbers), on instances no pool, validation or held-out set holds (2000-2014 by default) at the env's
default horizon. Per instance (the mean over its seeds) a score s is the share of the gap between random (0) and
the env's oracle or bound (1) an agent closes; 1 − s is the headroom it leaves; for the model and a reference R, (s − s_R) / (1 − s_R)
is the share of R's headroom the model closes, R being the paper policy and the best non-learned agent (the
highest mean total). Then the model against every non-learned agent: the paired relative difference of totals.
Both tables are the benchmark's own (``clustergym.experiments.drl_report``: ``gap_table``, ``reference_table``),
with 95% t-intervals over instances.

    python benchmarks/pretrained_gap.py --envs p1,p2,p4 --instances 2000-2014 --seeds 0,1 --out runs/pretrained-gap
    python benchmarks/pretrained_gap.py --envs p3s --instances 2000-2029 --seeds 0 --out runs/pretrained-gap-p3s

Prints one Markdown table per env; ``--out`` writes them to ``table.md`` and the rows to ``gap.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from clustergym.cli.commands import int_list

def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--envs", default="p1,p2,p4", help="benchmark env keys with a bound (clustergym drl's: p1, p2, p4, "
                                                       "p3s)")
    p.add_argument("--instances", default="2000-2014")
    p.add_argument("--seeds", default="0,1")
    p.add_argument("--horizon", type=int, default=None, help="slots per run (default: each env's default horizon)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)

    import numpy as np

    import clustergym  # noqa: F401  (registers the envs)
    from clustergym.core.family import env_family, family_spec
    from clustergym.experiments.drl_export import pretrained_name
    from clustergym.experiments.drl_plan import HORIZON, PLAN
    from clustergym.experiments.drl_report import episode_bounds, gap_table, reference_table
    from clustergym.runner.evaluation import evaluate

    try:
        instances, seeds = int_list(args.instances), int_list(args.seeds)
    except argparse.ArgumentTypeError as e:
        p.error(str(e))
    texts, doc = [], {}
    for key in args.envs.split(","):
        plan = PLAN[key.strip()]
        env_id, paper = plan.env_id, family_spec(env_family(plan.env_id)).paper_agent
        others = [a for a in plan.references() if a != paper]  # the benchmark's non-learned agents
        model = f"sb3:pretrained/{pretrained_name(key.strip())}"
        horizon = args.horizon or plan.default_horizon or HORIZON
        t0 = time.perf_counter()
        res = evaluate(env_id, [model, paper, *others], seeds, horizon, env_kwargs=dict(plan.env_kwargs) or None,
                       workers=args.workers, instances=instances, progress=True)
        wall = time.perf_counter() - t0
        mean = {a: np.mean([r.total_reward for r in res.runs if r.agent == a]) for a in [paper, *others]}
        best = max((a for a in mean if a != "random"), key=lambda a: mean[a])
        rows, table = gap_table(res, {model: [model]}, paper, best, episode_bounds(plan, res, horizon))
        vs, vs_table = reference_table(res, {model: [model]})
        head = (f"{key.upper()} `{env_id}`, {horizon} slots, instances {args.instances} x seeds {args.seeds}; "
                f"paper policy {paper}, best non-learned {best}; {wall / 60:.1f} min of wall time.")
        texts.append(head + "\n\n" + table + "\n\n" + vs_table)
        doc[key] = {"env_id": env_id, "horizon": horizon, "instances": instances, "seeds": seeds, "wall_s": wall,
                    "paper": paper, "best": best, "gap": rows, "vs_every_reference": vs}
        print(texts[-1] + "\n", flush=True)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "table.md"), "w", encoding="utf-8") as f:
            f.write("\n\n".join(texts) + "\n")
        with open(os.path.join(args.out, "gap.json"), "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
