"""Where a learner stands against the constant action that equals the best baseline in its action mode.

Each compact action mode is built so that the best simple baseline is one constant action of the mode
(docs/drl.md, "Action modes"): on P2 (``action_mode="port"``) DRF is every request fraction 1; on P3
(``"ring_size"``) the greedy ring placement of every job's largest ring; on P4 (``"job"``) Fair is every
level 10 (with its machine order fixed to index order). So a learner in that mode ties the baseline by
learning the constant, and beats it only by deviating from it where that pays. This study runs, on
validation instances (200 slots, the default scenario; P2 and P4 at dynamics seed 0, P3 instance = seed):

* the best baseline and the paper policy in their own action;
* constant actions of the mode, the baseline's constant (``max``) among them;
* optionally the final model of each training seed of a ``clustergym drl`` row (``--cells``), with the
  share of its per-entity action entries (ports with a request, visible jobs, live jobs) at the
  constant ``max`` (P2: a fraction of at least 0.99; P3: a request at the job's cap min(N_i, budget
  left); P4: level 10).

    python benchmarks/drl_headroom.py p3 --instances 900-909 --cells runs/drl/p3/ppo --out runs/headroom-p3

Prints one Markdown table; writes ``table.md`` and ``headroom.json`` into ``--out``.
"""

from __future__ import annotations

import argparse
import glob
import json
import os

import gymnasium as gym
import numpy as np

ENVS = {  # key: env id, compact mode, best baseline, paper policy, constants, instance = seed
    "p2": ("clustergym/MultiServerAllocation-v0", "port", "drf", "ogasched", ("0.5", "max"), False),
    "p3": ("clustergym/RingAllReduce-v0", "ring_size", "greedy", "gadget", ("1", "2", "4", "max"), True),
    "p4": ("clustergym/ApproxJobs-v0", "job", "fair", "opm", ("5", "max"), False),
}


def _family(env_id: str) -> str:
    from clustergym.core.family import env_family

    return env_family(env_id)


def _total(env, agent, seed: int, on_step=None) -> float:
    """One episode through the runner's loop (:func:`clustergym.runner.episode.run_episode`: agents see public info only)."""
    from clustergym.runner.episode import run_episode

    return float(run_episode(env, agent, seed, on_step=on_step).rewards.sum())


class _Constant:
    """The same action every slot."""

    def __init__(self, action: np.ndarray):
        self.action = action

    def reset(self, problem, *, seed=None) -> None:
        pass

    def act(self, obs, info):
        return self.action

    def update(self, *args) -> None:
        pass


def _constant_action(env, value: str) -> np.ndarray:
    sp = env.action_space
    if isinstance(sp, gym.spaces.Box):
        return np.full(sp.shape, sp.high.max() if value == "max" else float(value), dtype=sp.dtype)
    top = int(sp.nvec.max()) - 1
    return np.full(sp.shape, top if value == "max" else min(int(value), top), dtype=np.int64)


def at_max(key: str, obs, info, a) -> np.ndarray:
    """Per acting entity (P2: ports with a job; P3: visible jobs; P4: live jobs), whether ``a`` is the
    baseline's constant there, from public data only (the observation and the action mask)."""
    a = np.asarray(a)
    if key == "p2":  # a Box action: the env reads it within [0, 1]
        arr = np.asarray(obs["arrivals"]) > 0
        return np.clip(a.reshape(-1), 0.0, 1.0)[arr] >= 0.99
    if key == "p3":
        from clustergym.envs.ringallreduce.env import JOB_FEATURES

        jobs = np.asarray(obs["jobs"])
        cap = np.minimum(jobs[:, JOB_FEATURES.index("workers_cap")], jobs[:, JOB_FEATURES.index("remaining")])
        rows = (np.asarray(obs["job_mask"]) > 0) & (cap > 0)
        return np.minimum(a[rows], cap[rows]) == cap[rows]
    mask = np.asarray(info["action_mask"], dtype=bool).reshape(a.size, -1)  # p4: (J_max, S + 1)
    live = mask[:, 1:].any(axis=1)
    return a[live] == mask.shape[1] - 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("env", choices=sorted(ENVS))
    ap.add_argument("--instances", default="900-909", help="validation instances A-B")
    ap.add_argument("--horizon", type=int, default=200)
    ap.add_argument("--cells", action="append", default=[], help="a clustergym drl row folder (repeatable)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    from clustergym.core.agent import make
    from clustergym.learning.sb3_agent import SB3Agent
    from clustergym.learning.instances import model_env_kwargs

    env_id, mode, best, paper, constants, inst_is_seed = ENVS[a.env]
    fam = _family(env_id)
    lo, hi = map(int, a.instances.split("-"))
    inst = list(range(lo, hi + 1))
    seed = (lambda k: k) if inst_is_seed else (lambda k: 0)
    rows, shares = {}, {}
    for name in (best, paper):
        tot = []
        for k in inst:
            env = gym.make(env_id, scenario_seed=k, horizon=a.horizon)
            tot.append(_total(env, make(name, family=fam), seed(k)))
        rows[name] = tot
    for c in constants:
        tot = []
        for k in inst:
            env = gym.make(env_id, scenario_seed=k, horizon=a.horizon, action_mode=mode)
            tot.append(_total(env, _Constant(_constant_action(env, c)), seed(k)))
        rows[f"constant {c}" + (f" (= {best})" if c == "max" else "")] = tot
    for row in a.cells:
        for cell in sorted(glob.glob(os.path.join(row, "seed*", "model.zip"))):
            name = f"{os.path.basename(os.path.normpath(row))} {os.path.basename(os.path.dirname(cell))}"
            ag = SB3Agent(os.path.dirname(cell))
            tot, hits = [], []
            for k in inst:
                env = gym.make(env_id, scenario_seed=k, horizon=a.horizon, **model_env_kwargs(ag.meta))
                tot.append(_total(env, ag, seed(k),
                                  lambda tr: hits.extend(at_max(a.env, tr.obs, tr.info, tr.action).tolist())))
            rows[name], shares[name] = tot, float(np.mean(hits)) if hits else float("nan")
    ref = np.array(rows[best])
    lines = [f"| policy | mean total | vs {best} (mean relative) | equal / above / below {best} | entries at the "
             "constant max |", "|---|---|---|---|---|"]
    for name, v in rows.items():
        v = np.array(v)
        rel = (v - ref) / np.abs(ref)
        eq = np.isclose(v, ref, rtol=1e-9, atol=1e-6)
        lines.append(f"| {name} | {v.mean():,.1f} | {100 * rel.mean():+.2f}% | {int(eq.sum())} / "
                     f"{int(np.sum(~eq & (v > ref)))} / {int(np.sum(~eq & (v < ref)))} | "
                     f"{'' if name not in shares else f'{100 * shares[name]:.1f}%'} |")
    design = f"instance = seed {lo}-{hi}" if inst_is_seed else f"instances {lo}-{hi} at seed 0"
    text = f"{env_id} (action mode {mode!r}), {design}, {a.horizon} slots.\n\n" + "\n".join(lines) + "\n"
    print(text)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "table.md"), "w") as f:
            f.write(text)
        with open(os.path.join(a.out, "headroom.json"), "w") as f:
            json.dump({"env": env_id, "instances": inst, "totals": rows, "at_max": shares}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
