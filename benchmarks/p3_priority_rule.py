"""A learned priority rule on P3's ``gpu-short`` scenario: train, validate, and (once) score it on held-out instances.

The rule (``clustergym/experiments/priority_rule.py``) ranks the jobs by a score with seven weights; its start, θ =
(30, 1, 0, ...), is ``srpt[workers=5,row_value=30]`` exactly. Each training seed fits the weights by the
cross-entropy method on the training instances (``--train``, optionally only those with at most ``--train-max-gpus``
GPUs) and writes ``<out>/seed<s>/rule.json`` (a seed whose file exists is not trained again: the run resumes). The
rules are then compared with SRPT on the validation instances (``--validation``), where the settings are chosen.
``--held-out`` also runs every non-learned agent of the ``p3s`` benchmark and each seed's rule (``rule:<file>``)
through the runner on those instances and prints the learned rule (per instance, the mean of its seeds' totals)
against each of them, with the room to each instance's admission bound (``envs/ringallreduce/oracle.py``).

    python benchmarks/p3_priority_rule.py --seeds 0-2 --out runs/p3-priority-rule
    python benchmarks/p3_priority_rule.py --seeds 0-2 --out runs/p3-priority-rule --held-out 0-29

``--hindsight`` instead fits one rule per validation instance, on that instance alone (the same search, seed 0), and
prints the gain over SRPT of the best candidate it ran there: what the family of rules gives when the rule may be
chosen knowing the instance, a ceiling for one rule learned for all instances (a study, nothing is saved as a rule):

    python benchmarks/p3_priority_rule.py --hindsight --validation-max-gpus 33 --validation 910-999 --out runs/p3-rule-hindsight

Prints Markdown; writes ``table.md`` and ``results.json`` into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from clustergym.cli.commands import int_list

P3 = "clustergym/RingAllReduce-v0"
SRPT = "srpt[workers=5,row_value=30]"


def _paired(values, ref) -> str:
    """The rule's paired relative difference of totals to SRPT over instances (the project's claims statistic)."""
    from clustergym.core.stats import paired_comparison

    c = paired_comparison(dict(enumerate(values)), dict(enumerate(ref)))
    return (f"{c.mean:+.3f}% [{c.low:+.3f}, {c.high:+.3f}], higher on {c.wins}, lower on {c.losses} of {c.n}")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", default="0-2", help="training seeds (each one fitted rule)")
    p.add_argument("--train", default="1000-1099", help="training instances (the p3s benchmark's pool)")
    p.add_argument("--train-max-gpus", type=int, default=None,
                   help="train only on the training instances whose cluster has at most this many GPUs")
    p.add_argument("--iterations", type=int, default=15)
    p.add_argument("--population", type=int, default=16)
    p.add_argument("--elite", type=int, default=4)
    p.add_argument("--validation", default="900-999", help="validation instances (settings are chosen here)")
    p.add_argument("--validation-max-gpus", type=int, default=None,
                   help="validate only on the validation instances whose cluster has at most this many GPUs")
    p.add_argument("--held-out", default=None, help="held-out instances, e.g. 0-29 (score once, after choosing)")
    p.add_argument("--scenario", default="gpu-short")
    p.add_argument("--horizon", type=int, default=200)
    p.add_argument("--workers", type=int, default=2, help="processes")
    p.add_argument("--hindsight", action="store_true",
                   help="fit one rule per validation instance on that instance (a ceiling; no rule is trained for all)")
    p.add_argument("--out", required=True)
    return p


def _instances(p: argparse.ArgumentParser, args) -> tuple[list, list, list, list]:
    """(seeds, training, validation, held-out instances), the GPU filters applied; one line on a bad list."""
    import gymnasium as gym

    try:
        seeds, train, val = int_list(args.seeds), int_list(args.train), int_list(args.validation)
        held = int_list(args.held_out) if args.held_out else []
    except argparse.ArgumentTypeError as e:
        p.error(str(e))
    if set(train) & (set(val) | set(held)) or set(val) & set(held):
        p.error("the training, validation and held-out instances must be disjoint")

    def gpus(k: int) -> int:
        return int(np.sum(gym.make(P3, scenario=args.scenario, scenario_seed=k).unwrapped.problem.topology.gpus))

    for what, limit in (("training", args.train_max_gpus), ("validation", args.validation_max_gpus)):
        if limit is not None:
            kept = [k for k in (train if what == "training" else val) if gpus(k) <= limit]
            if not kept:
                p.error(f"no {what} instance has at most {limit} GPUs")
            train, val = (kept, val) if what == "training" else (train, kept)
    return seeds, train, val, held


def _fit(args, seeds: list, train: list) -> tuple[dict, list]:
    """Each seed's rule file (fitted unless it exists) and the table of their weights and costs."""
    from clustergym.experiments.priority_rule import load_rule, save_rule, theta_text, train_rule

    env_kwargs = {"scenario": args.scenario}
    lines = [f"P3 `{args.scenario}`, {args.horizon} slots. Training instances: {args.train}"
             + (f" with at most {args.train_max_gpus} GPUs ({len(train)})" if args.train_max_gpus else f" ({len(train)})")
             + f"; cross-entropy search, {args.iterations} iterations of {args.population} candidates, elite "
               f"{args.elite}, from `{SRPT}`.", "",
             "| seed | fitted weights | env steps | wall |", "|---|---|---|---|"]
    files = {}
    for s in seeds:
        path = os.path.join(args.out, f"seed{s}", "rule.json")
        files[s] = path
        if not os.path.exists(path):
            fit = train_rule(train, seed=s, iterations=args.iterations, population=args.population, elite=args.elite,
                             horizon=args.horizon, env_kwargs=env_kwargs, processes=args.workers)
            save_rule(path, fit.theta, env_kwargs=env_kwargs,
                      training=fit.record(instances=train, seed=s, iterations=args.iterations,
                                          population=args.population, elite=args.elite, horizon=args.horizon))
        rule = load_rule(path)
        tr = rule.meta["training"]
        lines.append(f"| {s} | {theta_text(rule.theta)} | {tr['env_steps']:,} | {tr['wall_s']:.0f} s |")
    return files, lines


def _against_srpt(args, seeds: list, files: dict, train: list, val: list) -> tuple[dict, list]:
    """Each seed's rule and SRPT on the training and the validation instances (the rule at THETA_SRPT is SRPT)."""
    from clustergym.experiments.priority_rule import THETA_SRPT, load_rule, rule_totals_many

    t0 = time.perf_counter()
    thetas = [THETA_SRPT] + [load_rule(files[s]).theta for s in seeds]
    tot = np.array(rule_totals_many(thetas, train + val, horizon=args.horizon, env_kwargs={"scenario": args.scenario},
                                    processes=args.workers))
    tot_train, tot_val = tot[:, :len(train)], tot[:, len(train):]
    lines = ["", f"Against `{SRPT}`: paired relative difference of totals, 95% t-interval over instances, on the "
                 f"training instances and on the validation instances {args.validation}"
             + (f" with at most {args.validation_max_gpus} GPUs" if args.validation_max_gpus else "")
             + f" ({len(val)}); {time.perf_counter() - t0:.0f} s:", "",
             "| rule | training instances | validation instances |", "|---|---|---|"]
    for i, s in enumerate(seeds):
        lines.append(f"| seed {s} | {_paired(tot_train[1 + i], tot_train[0])} | "
                     f"{_paired(tot_val[1 + i], tot_val[0])} |")
    lines.append(f"| mean of the seeds' totals | {_paired(tot_train[1:].mean(axis=0), tot_train[0])} | "
                 f"{_paired(tot_val[1:].mean(axis=0), tot_val[0])} |")
    per = {k: {"srpt": t[0].tolist(), **{str(s): t[1 + i].tolist() for i, s in enumerate(seeds)}}
           for k, t in (("training_totals", tot_train), ("validation_totals", tot_val))}
    return {"train": train, "seeds": seeds, "files": files, "validation": val, **per}, lines


def main(argv=None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    seeds, train, val, held = _instances(p, args)
    os.makedirs(args.out, exist_ok=True)
    if args.hindsight:
        results, lines = _hindsight(args, val)
    else:
        files, lines = _fit(args, seeds, train)
        results, more = _against_srpt(args, seeds, files, train, val)
        lines += more
        if held:
            lines += ["", *_held_out(args, held, [f"rule:{files[s]}" for s in seeds], results)]
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(args.out, "table.md"), "w", encoding="utf-8") as f:
        f.write(text + "\n")
    with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    return 0


def _hindsight(args, val: list) -> tuple[dict, list]:
    """Per validation instance, the best candidate of a search on that instance alone, against SRPT there."""
    from clustergym.core.stats import mean_ci
    from clustergym.experiments.priority_rule import train_rule

    t0, gains = time.perf_counter(), []
    for k in val:
        fit = train_rule([k], seed=0, iterations=args.iterations, population=args.population, elite=args.elite,
                         horizon=args.horizon, env_kwargs={"scenario": args.scenario}, processes=args.workers,
                         progress=False)
        gains.append(max(h["best_gain_pct"] for h in fit.history))  # the first candidate is SRPT itself: >= 0
    ci = mean_ci(gains)
    lines = [f"P3 `{args.scenario}`, {args.horizon} slots: one rule fitted per validation instance on that instance "
             f"alone ({len(val)} of {args.validation}"
             + (f" with at most {args.validation_max_gpus} GPUs" if args.validation_max_gpus else "")
             + f"; {args.iterations} iterations of {args.population} candidates, seed 0; "
               f"{time.perf_counter() - t0:.0f} s). Gain of the best candidate over `{SRPT}` on its instance:", "",
             f"- mean **{ci.mean:+.2f}% [{ci.low:+.2f}, {ci.high:+.2f}]** (95% t-interval over instances); higher on "
             f"{sum(g > 0 for g in gains)}, equal on {sum(g == 0 for g in gains)}; median {np.median(gains):+.2f}%, "
             f"largest {max(gains):+.2f}% (instance {val[int(np.argmax(gains))]}).", "",
             "| instance | gain of its own best rule |", "|---|---|",
             *(f"| {k} | {g:+.2f}% |" for k, g in zip(val, gains))]
    return {"hindsight": {"instances": val, "gain_pct": gains}}, lines


def _held_out(args, held: list, rules: list, results: dict) -> list:
    """Every non-learned agent of the p3s benchmark and the rules on ``held``: the reference table and the rooms."""
    import gymnasium as gym

    from clustergym.core.stats import mean_ci
    from clustergym.envs.ringallreduce.oracle import admission_bound
    from clustergym.experiments.drl_plan import PLAN
    from clustergym.experiments.drl_report import reference_table
    from clustergym.runner.evaluation import evaluate

    refs = PLAN["p3s"].references()
    t0 = time.perf_counter()
    res = evaluate(P3, refs + rules, [0], args.horizon, env_kwargs={"scenario": args.scenario}, instances=held,
                   workers=args.workers, progress=True, score=False)
    summary, table = reference_table(res, {"learned rule": rules})
    total = {(r.agent, r.instance): r.total_reward for r in res.runs}
    learned = np.array([np.mean([total[(a, k)] for a in rules]) for k in held])
    srpt = np.array([total[(SRPT, k)] for k in held])
    bound = []
    for k in held:
        u = gym.make(P3, scenario=args.scenario, scenario_seed=k).unwrapped
        bound.append(admission_bound(u.scenario.truth, args.horizon, int(np.sum(u.problem.topology.gpus)),
                                     u.problem.max_jobs))
    bound = np.array(bound)
    room = {n: mean_ci(100 * (bound - v) / bound) for n, v in (("learned rule", learned), (SRPT, srpt))}
    gap = float(np.mean(bound - srpt))
    closed = f"{float(np.mean(learned - srpt)) / gap:+.3f}" if gap > 1e-6 else "none (SRPT is at the bound)"
    results["held_out"] = {"instances": held, "summary": summary, "admission_bound": bound.tolist(),
                           "learned": learned.tolist(), "srpt": srpt.tolist()}
    return [f"Held-out instances {args.held_out} ({len(held)}), instance = seed, one run each; the learned rule's "
            f"value per instance is the mean of its {len(rules)} seeds' totals ({time.perf_counter() - t0:.0f} s):",
            "", table, "",
            *(f"- `{n}`: room to the admission bound {ci.mean:.2f}% [{ci.low:.2f}, {ci.high:.2f}]"
              for n, ci in room.items()),
            f"- share of `{SRPT}`'s room the learned rule closes, pooled (mean gain / mean room): {closed}"]


if __name__ == "__main__":
    raise SystemExit(main())
