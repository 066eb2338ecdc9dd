"""Where in a long run a learned policy loses ground: the score per 200-slot window of 2,000-slot runs.

The benchmark trains on 200-slot episodes and scores the main rows again at the env's default horizon. This
study splits each default-horizon run into windows of the training length and scores every window like the
tables score a run: (agent − random) / (oracle − random), summed over the runs in that window. The oracle is the
env's per-slot oracle, the same for every agent on a run (common random numbers), so the window score is
1 − regret(agent) / regret(random), with the per-slot regrets the runner records (``oracle=True``). If a model's window
scores fall after the first window while ESDP's do not, the model loses ground as its episode grows past what
it trained on; if they stay level, the horizon changes only how the run's total is weighted.

It runs on validation instances (default 910-919, dynamics seed 0), never the held-out ones, with every
training seed of each asked row, the paper policy and random, through the runner (``clustergym.evaluate``).

    python benchmarks/drl_horizon_windows.py runs/drl2-p1 p1 --rows ppo-entity-1m,ppo-entity --out runs/windows-p1

Prints one Markdown table (rows: agents; columns: windows; the last column: the change from the first window to
the last, per instance, mean with its 95% t-interval over instances and how many instances rose / fell) and
writes ``table.md`` and ``windows.json`` into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

from clustergym.cli.commands import _parse_seeds
from clustergym.experiments.drl_plan import PLAN
from clustergym.core.family import env_family, family_spec
from clustergym.runner.evaluation import evaluate
from clustergym.core.stats import fmt_ci, mean_ci

WITH_ORACLE = ("p1", "p2")  # the envs whose runs record a per-slot oracle (regret per slot)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench", help="a clustergym drl output folder")
    ap.add_argument("env", choices=WITH_ORACLE, help="the env key (an env with a per-slot oracle)")
    ap.add_argument("--rows", required=True, help="comma-separated row names")
    ap.add_argument("--instances", default="910-919")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--horizon", type=int, default=2000)
    ap.add_argument("--window", type=int, default=200)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    plan = PLAN[a.env]
    paper = family_spec(env_family(plan.env_id)).paper_agent
    rows = a.rows.split(",")
    cells = {r: sorted(os.path.join(a.bench, a.env, r, d, "model.zip") for d in os.listdir(os.path.join(a.bench, a.env, r))
                       if d.startswith("seed")) for r in rows}
    agents = [f"sb3:{m}" for r in rows for m in cells[r]] + [paper, "random"]
    res = evaluate(plan.env_id, agents, _parse_seeds(a.seeds), a.horizon, env_kwargs={"oracle": True},
                   instances=_parse_seeds(a.instances), workers=a.workers, progress=True, score=False)
    nw = a.horizon // a.window

    def windows(run) -> np.ndarray:  # the regret of each window
        cum = np.asarray(run.cum_regret, dtype=float)[: nw * a.window]
        return np.diff(np.concatenate([[0.0], cum])).reshape(nw, a.window).sum(axis=1)

    by: dict = {}
    for run in res.runs:
        by.setdefault(run.agent, {})[(run.instance, run.seed)] = windows(run)
    keys = sorted(by["random"])
    rnd = sum(by["random"][k] for k in keys)

    def score(agent_list) -> np.ndarray:
        reg = np.mean([sum(by[ag][k] for k in keys) for ag in agent_list], axis=0)
        return 1.0 - reg / rnd

    def change(agent_list):  # per instance: last window's score − first window's (regret mean over agent_list)
        d = []
        for k in keys:
            reg = np.mean([by[ag][k] for ag in agent_list], axis=0)
            s = 1.0 - reg / by["random"][k]
            d.append(float(s[-1] - s[0]))
        return mean_ci(d), int(sum(x > 0 for x in d)), int(sum(x < 0 for x in d))

    groups = {f"{r} (mean of {len(cells[r])} seeds)": [f"sb3:{m}" for m in cells[r]] for r in rows}
    for r in rows:
        for m in cells[r]:
            groups[f"{r} {os.path.basename(os.path.dirname(m))}"] = [f"sb3:{m}"]
    groups[paper] = [paper]
    table = {n: score(g) for n, g in groups.items()}
    changes = {n: change(g) for n, g in groups.items()}
    head = ("| agent | " + " | ".join(f"{w * a.window}-{(w + 1) * a.window}" for w in range(nw))
            + " | last − first window [95% CI] rose/fell |")
    lines = [head, "|---|" + "---|" * (nw + 1)] + [
        f"| {n} | " + " | ".join(f"{x:.3f}" for x in v)
        + f" | {fmt_ci(changes[n][0], unit='', digits=3)} {changes[n][1]}/{changes[n][2]} |"
        for n, v in table.items()]
    text = "\n".join(lines)
    print(text)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(a.out, "windows.json"), "w") as f:
        json.dump({"env": a.env, "instances": a.instances, "seeds": a.seeds, "horizon": a.horizon,
                   "window": a.window, "scores": {n: [float(x) for x in v] for n, v in table.items()},
                   "last_minus_first": {n: {"mean": c.mean, "low": c.low, "high": c.high, "rose": up, "fell": down}
                                        for n, (c, up, down) in changes.items()}}, f, indent=1)


if __name__ == "__main__":
    main()
