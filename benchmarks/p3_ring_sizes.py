"""How P3 agents spend a cluster short of GPUs: per slot, the GPUs asked for, the jobs given a ring and the mean
ring size, and per run the jobs that entered the visible window, beside each agent's total.

Each agent runs on validation instances (instance = seed, as the benchmark's curves, 200 slots) of a P3 scenario
(``gpu-short`` by default) in the ``ring_size`` action mode, through the runner's episode loop
(``clustergym.runner.episode.run_episode``). Per slot it records, from the action and the window the agent saw: the share of the cluster's GPUs asked
for (Σ sizes / Σ_s C_s), the number of visible jobs given at least one worker and the number visible, and the mean
size of the rings asked for. Per run it counts the jobs admitted: the distinct jobs the window showed (a job enters
the window only when an older one has used up its budget, so on a busy cluster the policy decides how many of the
arrivals are ever served). A learned model is given as ``sb3:<model.zip>``; its padding comes from the model.

    python benchmarks/p3_ring_sizes.py --agents 'las[thresholds=continuous];greedy;sb3:runs/drl-p3s/p3s/ppo-decoder/seed0/model.zip'

Agents are separated by ``;`` (options use commas). Prints one Markdown table; ``--out`` also writes
``table.md`` and ``ring_sizes.json`` there.
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

from clustergym.cli.commands import int_list

P3 = "clustergym/RingAllReduce-v0"


def run_agent(spec: str, instances, scenario: str, horizon: int) -> dict:
    """Mean over ``instances`` of the agent's total, and per-slot means of its GPU share asked, jobs served,
    jobs visible and ring size (over slots with a ring), through the runner's episode loop."""
    import clustergym  # noqa: F401  (registers the envs)
    from clustergym.core.agent import make
    from clustergym.runner.episode import bound_agent, make_env, run_episode

    totals, share, served, visible, sizes, admitted = [], [], [], [], [], []
    for k in instances:
        agent = make(spec, family="ringallreduce")
        kw = {"scenario": scenario, "scenario_seed": k, "action_mode": "ring_size", "horizon": horizon}
        if hasattr(agent, "eval_env_kwargs"):  # an sb3: model: its padding and action kwargs
            kw.update(agent.eval_env_kwargs(spec, P3, {"scenario": scenario}, [k]))
        env = make_env(P3, **kw)
        gpus = float(np.sum(env.unwrapped.problem.topology.gpus))
        seen: set[int] = set()

        def on_step(tr):
            a, win = np.asarray(tr.action, dtype=np.int64), tr.info["window"]
            share.append(a.sum() / gpus)
            served.append(int((a > 0).sum()))
            visible.append(int((win["present"].astype(bool) & (win["cap"] > 0)).sum()))
            seen.update(np.asarray(win["id"])[win["present"].astype(bool)].tolist())
            if (a > 0).any():
                sizes.append(float(a[a > 0].mean()))

        ep = run_episode(env, bound_agent(spec, P3, kw, made=agent), k, horizon, on_step=on_step)
        totals.append(float(ep.rewards.sum()))
        admitted.append(len(seen))
        env.close()
    return {"agent": spec, "total": float(np.mean(totals)), "totals": totals, "gpu_share": float(np.mean(share)),
            "jobs_served": float(np.mean(served)), "jobs_visible": float(np.mean(visible)),
            "ring_size": float(np.mean(sizes)) if sizes else 0.0, "jobs_admitted": float(np.mean(admitted)),
            "admitted": admitted}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--agents", required=True, help="agents separated by ';' (e.g. 'las[thresholds=continuous];greedy')")
    p.add_argument("--instances", default="900-904", help="validation instances, instance = seed (default 900-904)")
    p.add_argument("--scenario", default="gpu-short")
    p.add_argument("--horizon", type=int, default=200)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    try:
        instances = int_list(args.instances)
    except argparse.ArgumentTypeError as e:
        p.error(str(e))
    rows = [run_agent(s.strip(), instances, args.scenario, args.horizon) for s in args.agents.split(";") if s.strip()]
    lines = [f"P3 `{args.scenario}`, instance = seed {args.instances}, {args.horizon} slots; per-slot means.", "",
             "| agent | mean total | GPUs asked / GPUs | jobs given a ring | jobs visible | mean ring size | "
             "jobs admitted per run |", "|---|---|---|---|---|---|---|"]
    lines += [f"| `{r['agent']}` | {r['total']:,.0f} | {r['gpu_share']:.3f} | {r['jobs_served']:.2f} | "
              f"{r['jobs_visible']:.2f} | {r['ring_size']:.2f} | {r['jobs_admitted']:.1f} |" for r in rows]
    text = "\n".join(lines)
    print(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "table.md"), "w", encoding="utf-8") as f:
            f.write(text + "\n")
        with open(os.path.join(args.out, "ring_sizes.json"), "w", encoding="utf-8") as f:
            json.dump({"instances": instances, "scenario": args.scenario, "horizon": args.horizon, "rows": rows}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
