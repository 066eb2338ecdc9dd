"""The runs of the P4 experiment: one episode of an agent (:func:`episode`) and many through the worker pool."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from clustergym.core.agent import make
from clustergym.runner.episode import run_episode
from clustergym.runner.workers import run_tasks
from clustergym.runner.runstore import TaskInfo, register_task

__all__ = ["ENV", "episode"]

ENV = "clustergym/ApproxJobs-v0"


def episode(env_kw: dict, agent: str, seed: int, records: bool = False) -> dict:
    """One episode (:func:`clustergym.runner.episode.run_episode`); returns utility, spending, migrations,
    timings (and per-job records)."""
    env = gym.make(ENV, **env_kw).unwrapped
    ep = run_episode(env, make(agent, family=env.family), seed)
    m, sums, steps = ep.final_metrics, ep.metrics.sums, ep.steps
    out = {"agent": agent, "seed": seed, "env_kwargs": env_kw, "steps": steps, "wall_s": ep.wall_s,
           "total_reward": float(m["episode_utility"]), "budget_spent": float(m["episode_budget_spent"]),
           "fit": float(m["episode_fit"]), "repaired": int(sums["repaired"]),
           "migration_rate": sums["migration_rate"] / steps, "busy": sums["busy"] / steps,
           "decision_ms_median": float(np.median(ep.decision_s) * 1000),
           "metrics": {k: v for k, v in m.items() if k.startswith("episode_")}}
    rec = env.job_records()
    out["work"] = float(rec["work"].sum())  # Σ_j X_j (efficiency = work / budget_spent)
    out["jobs_under_90"] = float(np.mean(rec["spent"] / rec["budget"] < 0.9)) if rec["budget"].size else 0.0
    out["budget_used_median"] = float(np.median(rec["spent"] / rec["budget"])) if rec["budget"].size else 0.0
    out["bound"] = float(m["episode_bound"]) if "episode_bound" in m else None
    if records:
        out["records"] = {k: v.tolist() for k, v in rec.items()}
    return out


def _task(args, report=None):
    return episode(*args)


def describe_episode(task) -> TaskInfo:
    """What an :func:`episode` task runs (for the run store's plans and unit costs)."""
    env_kw, agent = task[0], task[1]
    horizon = env_kw.get("horizon") or gym.spec(ENV).kwargs.get("horizon") or gym.spec(ENV).max_episode_steps
    return TaskInfo(agent=str(agent), env_id=ENV, horizon=int(horizon),
                    config={k: v for k, v in env_kw.items() if k not in ("scenario_seed", "horizon")})


def placeholder_episode(task) -> dict:
    """What stands in for a missing :func:`episode` in a plan (never written, never reported)."""
    env_kw, agent, seed = task[:3]
    h = describe_episode(task).horizon
    out = {"agent": agent, "seed": seed, "env_kwargs": env_kw, "steps": h, "wall_s": 0.0, "total_reward": 1.0,
           "budget_spent": 1.0, "fit": 1.0, "repaired": 0, "migration_rate": 0.0, "busy": 0.0,
           "decision_ms_median": 0.0, "metrics": {}, "work": 1.0, "jobs_under_90": 0.5, "budget_used_median": 0.5,
           "bound": 2.0}
    if len(task) > 3 and task[3]:
        out["records"] = {k: [1.0, 1.0] for k in ("work", "spent", "budget", "utility", "cost", "value")}
    return out


register_task(_task, describe=describe_episode, placeholder=placeholder_episode)


def _run_all(tasks: list, workers: int, progress: bool) -> list[dict]:
    """Every task through the runner's worker pool (:func:`clustergym.runner.workers.run_tasks`)."""
    from tqdm.auto import tqdm

    bar = tqdm(total=len(tasks), desc="opm runs", leave=False, disable=not progress)
    try:
        return run_tasks(_task, tasks, workers, on_done=lambda _: bar.update(1))
    finally:
        bar.close()
