"""How much a policy could gain over a P3 teacher by deviating from it: a privileged one-step rollout improvement.

At every slot of a run of the teacher (``las[thresholds=continuous,workers=3]`` by default, the best non-learned
policy on ``gpu-short``), the *expert* tries the teacher's ring sizes and every variant with one visible job's size
one worker higher or lower (within 0 and the job's cap), plays each variant on a copy of the env, then lets the
teacher finish the episode on that copy, and keeps the variant with the highest total from this slot to the end
(ties: the teacher's own sizes). This is one step of policy iteration on the teacher with exact returns: it reads
the instance's future arrivals through the env copies, so it is a study of headroom, never an agent. A learner
that starts from the teacher and improves it one decision at a time can gain at most about what this expert
gains, unless it changes many decisions at once.

    python benchmarks/p3_teacher_headroom.py --instances 900-909 --out runs/p3-teacher-headroom

Per instance (instance = seed, 200 slots, ``ring_size`` mode) it prints the teacher's total, the expert's, their
relative difference and the number of slots where the expert left the teacher's sizes; then the mean relative
difference with its 95% t-interval over instances and the wins. About 1.5-2.5 min per instance on one core.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import time

import numpy as np

from clustergym.cli.commands import int_list

P3 = "clustergym/RingAllReduce-v0"
TEACHER = "las[thresholds=continuous,workers=3]"


def _finish(env, agent, obs, info) -> float:
    """The total reward of ``agent`` playing ``env`` from (obs, info) to the episode's end."""
    from clustergym.core.agent import public_info

    total, done = 0.0, False
    while not done:
        obs, r, term, trunc, info = env.step(agent.act(obs, public_info(info)))
        total, done = total + float(r), term or trunc
    return total


def _variants(sizes: np.ndarray, window: dict) -> list[np.ndarray]:
    """The teacher's sizes first, then each visible job's size one worker up or down within [0, cap]."""
    out = [sizes]
    for j in np.flatnonzero(window["present"]):
        for d in (1, -1):
            v = sizes.copy()
            v[j] += d
            if 0 <= v[j] <= window["cap"][j]:
                out.append(v)
    return out


def run_instance(k: int, teacher: str, scenario: str, horizon: int) -> dict:
    """The teacher's total and the one-step rollout expert's on instance = seed ``k``."""
    import clustergym  # noqa: F401  (registers the envs)
    from clustergym.core.agent import make, public_info
    from clustergym.runner.episode import make_env

    t0 = time.time()
    env = make_env(P3, horizon=horizon, scenario=scenario, scenario_seed=k, action_mode="ring_size")
    obs, info = env.reset(seed=k)
    agent = make(teacher, env_id=P3)
    agent.reset(env.unwrapped.problem, seed=k)
    teacher_total = _finish(copy.deepcopy(env), copy.deepcopy(agent), obs, info)
    expert_total, deviations, done = 0.0, 0, False
    while not done:
        sizes = np.asarray(agent.act(obs, public_info(info)))
        best, best_sizes, best_at = -np.inf, sizes, 0
        for n, v in enumerate(_variants(sizes, info["window"])):
            e, a = copy.deepcopy(env), copy.deepcopy(agent)
            o, r, term, trunc, i = e.step(v)
            value = float(r) + (0.0 if term or trunc else _finish(e, a, o, i))
            if value > best + 1e-6:
                best, best_sizes, best_at = value, v, n
        deviations += best_at != 0
        obs, r, term, trunc, info = env.step(best_sizes)
        expert_total, done = expert_total + float(r), term or trunc
    env.close()
    return {"instance": k, "teacher": teacher_total, "expert": expert_total,
            "gain_pct": 100.0 * (expert_total - teacher_total) / teacher_total, "deviations": deviations,
            "wall_s": round(time.time() - t0, 1)}


def main(argv=None) -> int:
    from clustergym.core.stats import mean_ci

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instances", default="900-909", help="instance = seed range, e.g. 900-909 (validation)")
    ap.add_argument("--teacher", default=TEACHER)
    ap.add_argument("--scenario", default="gpu-short")
    ap.add_argument("--horizon", type=int, default=200)
    ap.add_argument("--out", default="", help="folder for table.md and teacher_headroom.json")
    a = ap.parse_args(argv)
    try:
        instances = int_list(a.instances)
    except argparse.ArgumentTypeError as e:
        ap.error(str(e))
    rows = []
    lines = ["| instance | teacher total | expert total | expert vs teacher | slots deviated | wall |",
             "|---|---|---|---|---|---|"]
    for k in instances:
        r = run_instance(k, a.teacher, a.scenario, a.horizon)
        rows.append(r)
        lines.append(f"| {k} | {r['teacher']:,.1f} | {r['expert']:,.1f} | {r['gain_pct']:+.2f}% | "
                     f"{r['deviations']} of {a.horizon} | {r['wall_s']:.0f} s |")
        print(lines[-1], flush=True)
    ci = mean_ci([r["gain_pct"] for r in rows])
    wins = sum(r["gain_pct"] > 1e-9 for r in rows)
    ties = sum(abs(r["gain_pct"]) <= 1e-9 for r in rows)
    summary = (f"Expert vs `{a.teacher}` on {a.scenario}, instances {a.instances}: {ci.mean:+.2f}% "
               f"[{ci.low:+.2f}, {ci.high:+.2f}] (95% t-interval over instances), higher on {wins}, equal on {ties}; "
               f"{np.mean([r['deviations'] for r in rows]):.1f} of {a.horizon} slots deviated on average.")
    text = "\n".join(lines) + "\n\n" + summary
    print("\n" + text)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "table.md"), "w", encoding="utf-8") as f:
            f.write(text + "\n")
        with open(os.path.join(a.out, "teacher_headroom.json"), "w", encoding="utf-8") as f:
            json.dump({"teacher": a.teacher, "scenario": a.scenario, "horizon": a.horizon, "rows": rows,
                       "mean_gain_pct": ci.mean, "low": ci.low, "high": ci.high}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
