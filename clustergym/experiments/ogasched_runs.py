"""OGASched's hindsight comparator: the best static allocation of every prefix of a run (eq. 6), shared by the
paper's reproduction (``experiments/ogasched.py``) and its additional experiments (``experiments/extra``)."""

from __future__ import annotations

import numpy as np

from clustergym.envs.multiserver.allocation.oracle import best_static_allocation
from clustergym.runner.episode import make_env
from clustergym.runner.workers import run_tasks
from clustergym.runner.runstore import TaskInfo, register_task

__all__ = ["ENV_ID", "best_static_values", "hindsight"]

ENV_ID = "clustergym/MultiServerAllocation-v0"


def best_static_values(env_kwargs: dict, seed: int, checkpoints) -> list[float]:
    """Q(y*) of the best static allocation of every prefix [1, t], t in ``checkpoints`` (eq. 6's comparator).
    Arrivals do not depend on actions, so they are regenerated from the env seed."""
    T = int(max(checkpoints))
    env = make_env(ENV_ID, horizon=T, oracle=False, **env_kwargs).unwrapped
    obs, _ = env.reset(seed=seed)
    zero = np.zeros((env.problem.num_edges, env.problem.num_device_types))
    arr = [obs["arrivals"]]
    for _ in range(T - 1):
        obs, *_ = env.step(zero)
        arr.append(obs["arrivals"])
    cum = np.cumsum(np.array(arr, dtype=float), axis=0)
    return [best_static_allocation(env.problem, cum[int(c) - 1]).value for c in checkpoints]


def _opt_task(args, report=None):
    kw, seed, checkpoints = args
    return best_static_values(kw, seed, checkpoints)


register_task(_opt_task,
              describe=lambda t: TaskInfo(agent="best static (hindsight)", env_id=ENV_ID, horizon=int(max(t[2])),
                                          config={k: v for k, v in t[0].items() if k != "scenario_seed"}),
              placeholder=lambda t: [1.0 for _ in t[2]])


def hindsight(tasks: list, workers: int) -> list[list[float]]:
    """:func:`best_static_values` of every ``(env_kwargs, seed, checkpoints)`` task, through the runner's worker
    pool (and so the run store of a reproduction)."""
    return run_tasks(_opt_task, [(dict(kw), int(seed), [int(c) for c in cps]) for kw, seed, cps in tasks], workers)
